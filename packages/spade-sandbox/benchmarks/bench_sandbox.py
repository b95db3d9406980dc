"""Sandbox benchmarks; every ratio is against a baseline measured in the same run.

    uv run --package spade-sandbox python packages/spade-sandbox/benchmarks/bench_sandbox.py [--rounds N]

1. Time to a ready isolated environment through a warm `SandboxPool` vs `python -c pass`
   (goal: at least 10x faster); also a cold `open_env` and the pool's sustained rate when
   environments are opened back to back faster than spares are started.
2. Per-step round trip through the sandbox vs a bare pipe round trip of the same payload to
   a child that only echoes frames (goal: within 3x), and vs a Python child that decodes each
   request and encodes the reply as JSON (what any Python worker on this wire must do).
3. Steps per second of a small game sandboxed vs in-process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import textwrap
import time

from spade_sandbox import Limits, SandboxConfig, SandboxPool, open_env

GAME = textwrap.dedent(
    """
    import random

    class GuessEnv:
        def __init__(self, max_turns=10, n=100):
            self.n = n
            self.max_turns = max_turns

        def reset(self, seed=None):
            self.rng = random.Random(seed)
            self.target = self.rng.randint(1, self.n)
            self.turn = 0
            return f"Guess a number from 1 to {self.n}. Answer as \\\\boxed{{k}}.", {"n": self.n}

        def step(self, action):
            self.turn += 1
            guess = action.strip().removeprefix("\\\\boxed{").removesuffix("}")
            if guess == str(self.target):
                return "Correct.", 1.0, True, False, {"turn": self.turn}
            hint = "higher" if guess.isdigit() and int(guess) < self.target else "lower"
            return f"Wrong, go {hint}.", 0.0, False, self.turn >= self.max_turns, {"turn": self.turn}
    """
)

ECHO_CHILD = textwrap.dedent(
    """
    import json, os, struct, sys
    reply, mode = open(sys.argv[1], 'rb').read(), sys.argv[2]
    value = json.loads(reply[4:])
    while True:
        head = os.read(0, 4)
        if len(head) < 4:
            break
        size, body = struct.unpack('>I', head)[0], b''
        while len(body) < size:
            body += os.read(0, size - len(body))
        if mode == 'json':  # what any Python worker on this wire does: decode, then encode
            value['id'] = json.loads(body)['id']
            out = json.dumps(value, separators=(',', ':')).encode()
            os.write(1, struct.pack('>I', len(out)) + out)
        else:
            os.write(1, reply)
    """
)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_ready(config: SandboxConfig, rounds: int) -> None:
    python_pass = []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        python_pass.append(time.perf_counter() - t)
    cold = []
    for _ in range(max(3, rounds // 4)):
        t = time.perf_counter()
        env = open_env(GAME, config=config)
        cold.append(time.perf_counter() - t)
        env.close()
    pooled = []
    with SandboxPool(config, size=2) as pool:
        for _ in range(rounds):
            pool.wait_ready(60)  # a spare is waiting (steady state); the open itself is timed
            time.sleep(0.02)  # let the previous environment's exit finish in the kernel
            t = time.perf_counter()
            env = pool.open_env(GAME)
            env.reset(seed=0)
            pooled.append(time.perf_counter() - t)
            env.close()
        pool.wait_ready(60)
        t = time.perf_counter()
        for _ in range(rounds):
            with pool.open_env(GAME) as env:
                env.reset(seed=0)
        sustained = (time.perf_counter() - t) / rounds
    base = median_ms(python_pass)
    print("1. time to a ready isolated environment (opened and reset)")
    print(f"   python -c pass                 {base:8.2f} ms  (baseline)")
    print(
        f"   open_env, cold                 {median_ms(cold):8.2f} ms  {median_ms(cold) / base:6.2f}x the baseline"
    )
    p90 = sorted(pooled)[int(0.9 * (len(pooled) - 1))] * 1000
    print(
        f"   SandboxPool, spare ready       {median_ms(pooled):8.2f} ms  {base / median_ms(pooled):6.1f}x faster (goal >= 10x); p90 {p90:.2f} ms"
    )
    print(
        f"   SandboxPool(size=2), sustained {sustained * 1000:8.2f} ms  per environment opened back to back"
    )


def _pin_threads(cpus: set[int]) -> None:
    """Every thread of this process on `cpus`: workers are forked by spade-sandbox's spawner
    thread and inherit its placement, not the main thread's."""
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), cpus)


def bench_round_trip(config: SandboxConfig, rounds: int) -> None:
    from spade_sandbox import wire

    obs = "o" * 200
    src = f"class EchoEnv:\n    def reset(self, seed=None):\n        return 'r', {{}}\n    def step(self, action):\n        return {obs!r}, 0.5, False, False, {{'t': 1}}\n"
    action = "\\boxed{" + "a" * 50 + "}"
    steps = rounds * 50
    request = wire.encode({"op": "step", "action": action, "id": 1})
    reply = wire.encode({"id": 1, "ok": True, "value": [obs, 0.5, False, False, {"t": 1}]})
    # max_steps is lifted: this measures the channel, not episode bookkeeping.
    config = config.replace(limits=Limits(**{**config.limits.to_dict(), "max_steps": 100 * steps}))

    def measure() -> tuple[float, float, float]:
        reply_path = os.path.join(
            os.environ.get("TMPDIR", "/tmp"), f"spade-bench-reply-{os.getpid()}"
        )
        with open(reply_path, "wb") as f:
            f.write(reply)
        children = [
            subprocess.Popen(
                [sys.executable, "-S", "-c", ECHO_CHILD, reply_path, mode],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            for mode in ("raw", "json")
        ]

        def round_trip(child: subprocess.Popen) -> None:
            os.write(child.stdin.fileno(), request)  # type: ignore[union-attr]
            got, r = 0, child.stdout.fileno()  # type: ignore[union-attr]
            while got < len(reply):
                got += len(os.read(r, len(reply) - got))

        times: list[list[float]] = [[], [], []]
        calls = [lambda: round_trip(children[0]), lambda: round_trip(children[1])]
        try:
            with open_env(src, config=config) as env:
                env.reset()
                calls.append(lambda: env.step(action))
                for _ in range(200):
                    for call in calls:
                        call()
                for _ in range(rounds):  # interleaved, so drift in machine load hits all alike
                    for call, samples in zip(calls, times, strict=True):
                        t = time.perf_counter()
                        for _ in range(50):
                            call()
                        samples.append((time.perf_counter() - t) / 50)
        finally:
            for child in children:
                child.stdin.close()  # type: ignore[union-attr]
                child.wait()
                child.stdout.close()  # type: ignore[union-attr]
            os.unlink(reply_path)
        raw, json_echo, boxed = (statistics.median(samples) for samples in times)
        return raw, json_echo, boxed

    print(
        f"2. per-step round trip ({len(request)}-byte request, {len(reply)}-byte reply, {steps} steps each)"
    )
    all_cpus = os.sched_getaffinity(0)
    for label in ("free placement", "one CPU"):
        if label == "one CPU":  # children inherit it: no cross-CPU wake-ups on either side
            _pin_threads({min(all_cpus)})
        try:
            raw, json_echo, boxed = measure()
        finally:
            _pin_threads(all_cpus)
        print(f"   {label:<15} bare pipe echo {raw * 1e6:6.1f} us  JSON echo {json_echo * 1e6:6.1f} us  "
              f"SandboxedEnv.step {boxed * 1e6:6.1f} us  {boxed / raw:5.2f}x the echo (goal <= 3x), "
              f"{boxed / json_echo:4.2f}x the JSON echo")  # fmt: skip


def bench_steps(config: SandboxConfig, rounds: int) -> None:
    namespace: dict = {}
    exec(compile(GAME, "<game>", "exec"), namespace)
    episodes = rounds * 20
    actions = [f"\\boxed{{{k}}}" for k in range(1, 11)]

    def play(env) -> int:
        steps = 0
        for seed in range(episodes):
            env.reset(seed=seed)
            for action in actions:
                steps += 1
                if env.step(action)[2]:
                    break
        return steps

    t = time.perf_counter()
    n_local = play(namespace["GuessEnv"]())
    local = n_local / (time.perf_counter() - t)
    # One worker throughout (no recycling): this measures stepping, not starting workers.
    with open_env(GAME, config=config.replace(recycle_after_episodes=0)) as env:
        t = time.perf_counter()
        n_boxed = play(env)
        boxed = n_boxed / (time.perf_counter() - t)
    print(
        f"3. steps per second, guess-the-number game ({episodes} episodes, reset counted as work)"
    )
    print(f"   in-process                     {local:10.0f} steps/s  (baseline)")
    print(f"   sandboxed                      {boxed:10.0f} steps/s  {local / boxed:6.1f}x slower")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=30, help="repetitions per measurement (default 30)"
    )
    args = parser.parse_args()
    config = SandboxConfig(limits=Limits(call_wall_s=10.0, cpu_s=60))
    print(f"spade-sandbox benchmarks, {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    bench_ready(config, args.rounds)
    bench_round_trip(config, args.rounds)
    bench_steps(config, args.rounds)


if __name__ == "__main__":
    main()
