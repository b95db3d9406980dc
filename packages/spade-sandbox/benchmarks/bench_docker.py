"""Docker backend benchmarks; every ratio is against a baseline measured in the same run.

    uv run --package spade-sandbox --extra docker python packages/spade-sandbox/benchmarks/bench_docker.py [--rounds N]

Needs a running engine and the image (packages/spade-sandbox/docker/build-image.sh).

1. Time to a ready environment (opened and reset): a cold Docker `open_env` and a warm
   `SandboxPool` on Docker, against `python -c pass` and the process backend's cold start.
2. Per-step round trip through a Docker worker against (a) a bare echo over the same
   attach socket into a container (the transport alone) and (b) the process backend.
3. Steps per second of a small game in a Docker worker against in-process and the process
   backend.
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
    '''
    import random

    class CountdownEnv:
        """Say the number that comes next, counting down from a seeded start."""

        def __init__(self, max_turns=10):
            self.max_turns = max_turns

        def reset(self, seed=None):
            self.value = random.Random(seed).randint(5, 9)
            self.turn = 0
            return f"Count down from {self.value}; answer as \\\\boxed{{k}}.", {"start": self.value}

        def step(self, action):
            self.turn += 1
            if action.strip() == f"\\\\boxed{{{self.value - 1}}}":
                self.value -= 1
                done = self.value == 0
                return ("Lift-off." if done else f"{self.value}."), 1.0 if done else 0.1, done, False, {}
            return "No.", 0.0, False, self.turn >= self.max_turns, {}
    '''
)

ECHO = (
    "import os, struct\n"
    "while True:\n"
    "    head = os.read(0, 4)\n"
    "    if len(head) < 4:\n"
    "        break\n"
    "    body = b''\n"
    "    size = struct.unpack('>I', head)[0]\n"
    "    while len(body) < size:\n"
    "        body += os.read(0, size - len(body))\n"
    "    os.write(1, head + body)\n"
)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def ready_once(config: SandboxConfig) -> float:
    t = time.perf_counter()
    with open_env(GAME, config=config) as env:
        env.reset(seed=0)
        return time.perf_counter() - t


def bench_ready(docker: SandboxConfig, process: SandboxConfig, rounds: int) -> None:
    python_pass = []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        python_pass.append(time.perf_counter() - t)
    ready_once(docker)  # the first one also connects to the engine and looks up the image
    cold_docker = [ready_once(docker) for _ in range(max(3, rounds // 3))]
    cold_process = [ready_once(process) for _ in range(max(3, rounds // 3))]
    pooled = []
    with SandboxPool(docker, size=2) as pool:
        for _ in range(max(3, rounds // 3)):
            pool.wait_ready(120)  # a warm container is waiting; the open itself is timed
            t = time.perf_counter()
            env = pool.open_env(GAME)
            env.reset(seed=0)
            pooled.append(time.perf_counter() - t)
            env.close()
    base = median_ms(python_pass)
    print("1. time to a ready environment (opened and reset), medians")
    print(f"   python -c pass                  {base:8.2f} ms  (baseline)")
    print(
        f"   process backend, cold open_env  {median_ms(cold_process):8.2f} ms  {median_ms(cold_process) / base:6.2f}x the baseline"
    )
    print(f"   Docker backend, cold open_env   {median_ms(cold_docker):8.2f} ms  {median_ms(cold_docker) / base:6.2f}x the baseline, "
          f"{median_ms(cold_docker) / median_ms(cold_process):.1f}x the process backend")  # fmt: skip
    print(
        f"   Docker SandboxPool, spare ready {median_ms(pooled):8.2f} ms  {base / median_ms(pooled):6.1f}x faster than the baseline"
    )


def attach_echo_round_trip(image: str, payload: bytes, steps: int) -> float:
    """Seconds per round trip of `payload` to a container that only echoes frames back,
    over the same attach socket and stream demultiplexing the backend uses."""
    import docker

    client = docker.from_env()
    container = client.containers.create(
        image, ["python3", "-S", "-c", ECHO], stdin_open=True, network_mode="none"
    )
    try:
        attach = container.attach_socket(params={"stdin": 1, "stdout": 1, "stream": 1})
        sock = attach._sock
        container.start()
        buf = bytearray()

        def round_trip() -> None:
            sock.sendall(payload)
            got = 0
            while got < len(payload):
                while len(buf) < 8 or len(buf) < 8 + int.from_bytes(buf[4:8], "big"):
                    buf.extend(sock.recv(1 << 16))
                size = int.from_bytes(buf[4:8], "big")
                got += size
                del buf[: 8 + size]

        for _ in range(200):
            round_trip()
        t = time.perf_counter()
        for _ in range(steps):
            round_trip()
        elapsed = (time.perf_counter() - t) / steps
        attach.close()
        sock.close()
        return elapsed
    finally:
        container.remove(force=True)
        client.close()


def per_step(config: SandboxConfig, source: str, action: str, steps: int) -> float:
    with open_env(source, config=config) as env:
        env.reset()
        for _ in range(200):
            env.step(action)
        t = time.perf_counter()
        for _ in range(steps):
            env.step(action)
        return (time.perf_counter() - t) / steps


def bench_round_trip(
    docker: SandboxConfig, process: SandboxConfig, image: str, rounds: int
) -> None:
    from spade_sandbox import wire

    obs = "o" * 200
    src = f"class EchoEnv:\n    def reset(self, seed=None):\n        return 'r', {{}}\n    def step(self, action):\n        return {obs!r}, 0.5, False, False, {{'t': 1}}\n"
    action = "\\boxed{" + "a" * 50 + "}"
    steps = rounds * 50
    request = wire.encode({"op": "step", "action": action, "id": 1})
    bare = attach_echo_round_trip(image, request, steps)
    in_docker = per_step(docker, src, action, steps)
    in_process = per_step(process, src, action, steps)
    print(f"2. per-step round trip ({len(request)}-byte request, {steps} steps)")
    print(
        f"   bare echo over the attach socket {bare * 1e6:8.1f} us  (baseline: the transport alone)"
    )
    print(
        f"   Docker backend step              {in_docker * 1e6:8.1f} us  {in_docker / bare:6.2f}x the baseline"
    )
    print(
        f"   process backend step             {in_process * 1e6:8.1f} us  (Docker is {in_docker / in_process:.2f}x it)"
    )


def steps_per_second(env, episodes: int) -> float:
    steps = 0
    t = time.perf_counter()
    for seed in range(episodes):
        _, info = env.reset(seed=seed)
        for k in range(info["start"] - 1, -1, -1):
            steps += 1
            if env.step(f"\\boxed{{{k}}}")[2]:
                break
    return steps / (time.perf_counter() - t)


def bench_steps(docker: SandboxConfig, process: SandboxConfig, rounds: int) -> None:
    namespace: dict = {}
    exec(compile(GAME, "<game>", "exec"), namespace)
    episodes = rounds * 20
    local = steps_per_second(namespace["CountdownEnv"](), episodes)
    with open_env(GAME, config=docker) as env:
        in_docker = steps_per_second(env, episodes)
    with open_env(GAME, config=process) as env:
        in_process = steps_per_second(env, episodes)
    print(f"3. steps per second, countdown game ({episodes} episodes, reset counted as work)")
    print(f"   in-process                       {local:10.0f} steps/s  (baseline)")
    print(
        f"   process backend                  {in_process:10.0f} steps/s  {local / in_process:6.1f}x slower"
    )
    print(f"   Docker backend                   {in_docker:10.0f} steps/s  {local / in_docker:6.1f}x slower, "
          f"{in_process / in_docker:.2f}x the process backend's time")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=30, help="repetitions per measurement (default 30)"
    )
    args = parser.parse_args()
    from spade_sandbox.docker_backend import DEFAULT_IMAGE

    limits = Limits(call_wall_s=10.0, cpu_s=120, max_steps=1_000_000, episode_wall_s=3600.0)
    docker = SandboxConfig(backend="docker", limits=limits, start_timeout_s=60.0)
    process = SandboxConfig(limits=limits)
    print(
        f"spade-sandbox Docker backend benchmarks, {os.cpu_count()} CPUs, python {sys.version.split()[0]}, image {DEFAULT_IMAGE}"
    )
    bench_ready(docker, process, args.rounds)
    bench_round_trip(docker, process, DEFAULT_IMAGE, args.rounds)
    bench_steps(docker, process, args.rounds)


if __name__ == "__main__":
    main()
