"""What Gymnasium make/reset/close cycles leave behind: worker processes, file descriptors and
sandbox work directories, counted before and after, for three ways an environment ends.

    uv run --package spade-envs --extra sandbox python packages/spade-envs/benchmarks/bench_gym_lifecycle.py [--cycles 1000] [--few 50]

Each cycle is ``gymnasium.make("spade/<id>", sandbox=True)``, ``reset(seed=i)`` and then:

- **close** (``--cycles``): ``env.close()``, the object then dropped (no ``gc.collect()``);
- **kept** (``--few``): ``env.close()``, the closed object kept in a list until the count (as a
  program that holds its closed environments does);
- **drop** (``--few``): the last reference dropped without ``close()``, then ``gc.collect()``;
- **exit** (once, in a child interpreter): ``make`` and ``reset``, then the interpreter exits
  without closing; counted in this process afterwards.

Work directories are counted in a private ``SPADE_SANDBOX_WORK_ROOT`` (other users of the temp
dir do not disturb the count); processes are this process's descendants; fds are
``/proc/self/fd``. Prints one line per mode with the counts before and after and the seconds a
cycle took. Run on a checkout before the lifecycle fix, the same command shows what it left.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

CHILD = """
import gymnasium, spade_envs
env = gymnasium.make({gym_id!r}, sandbox=True)
env.reset(seed=0)
print("ready", flush=True)
"""


def descendants() -> set[int]:
    """Every process below this one."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def processes_in(root: str) -> int:
    """Processes anywhere on the machine whose working directory lies under ``root`` (a
    sandbox worker runs in its work dir; an orphan outlives the interpreter that started it)."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/cwd").startswith(root):
                    count += 1
            except OSError:
                continue
    return count


def counts(root: str) -> tuple[int, int, int]:
    """(descendant processes, open fds, work directories under ``root``)."""
    return len(descendants()), len(os.listdir("/proc/self/fd")), len(os.listdir(root))


def run_cycles(gym_id: str, cycles: int, end: Callable[[object], None]) -> float:
    import gymnasium

    started = time.perf_counter()
    for i in range(cycles):
        env = gymnasium.make(gym_id, sandbox=True)
        env.reset(seed=i)
        end(env)
        del env
    return (time.perf_counter() - started) / cycles


def close(env: object) -> None:
    env.close()  # type: ignore[attr-defined]


def drop(env: object) -> None:
    gc.collect()  # the caller's `del` drops the last reference; the collector takes cycles


def exit_check(gym_id: str, root: str) -> tuple[int, int]:
    """(processes, work dirs) under ``root`` after a child makes and resets an environment
    and exits without closing it."""
    before = len(os.listdir(root))
    proc = subprocess.run(
        [sys.executable, "-c", CHILD.format(gym_id=gym_id)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SPADE_SANDBOX_WORK_ROOT": root},
    )
    if proc.returncode != 0 or "ready" not in proc.stdout:
        raise SystemExit(f"the child failed: {proc.stderr.strip()[-500:]}")
    time.sleep(0.5)  # an orphaned worker would still be running now
    return processes_in(root), len(os.listdir(root)) - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=1000, help="cycles of the close mode")
    parser.add_argument("--few", type=int, default=50, help="cycles of the kept and drop modes")
    parser.add_argument("--env-id", default=None, help="a registered id (default: spade/<first>)")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="bench-gym-lifecycle-")
    os.chmod(root, 0o755)  # as the temp dir: the workers' uid must reach its work dir
    os.environ["SPADE_SANDBOX_WORK_ROOT"] = root
    import gymnasium
    import spade_envs  # noqa: F401  (registers the shipped corpora)

    gym_id = args.env_id or next(i for i in gymnasium.registry if i.startswith("spade/"))
    print(f"{gym_id}, work root {root}")
    run_cycles(gym_id, 1, close)  # imports and the corpus load, not counted
    gc.collect()
    kept: list[object] = []
    modes = (
        ("close", args.cycles, close),
        ("kept", args.few, lambda env: (close(env), kept.append(env))),
        ("drop", args.few, drop),
    )
    for name, cycles, end in modes:
        before = counts(root)
        per_cycle = run_cycles(gym_id, cycles, end)
        after = counts(root)
        kept.clear()
        gc.collect()
        print(
            f"{name:>5} x{cycles}: processes {before[0]} -> {after[0]}, fds {before[1]} -> {after[1]}, "
            f"work dirs {before[2]} -> {after[2]}  ({per_cycle * 1000:.0f} ms a cycle)"
        )
    procs, dirs = exit_check(gym_id, root)
    print(f" exit: worker processes left {procs}, work dirs left {dirs}")
    os.environ.pop("SPADE_SANDBOX_WORK_ROOT")
    shutil.rmtree(root, ignore_errors=True)  # what a leaking checkout left, counted above


if __name__ == "__main__":
    main()
