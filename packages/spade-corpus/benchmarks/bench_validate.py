"""Validation throughput of the 60-game corpus: ours (sandboxed, every check) against an
in-process baseline in the style of upstream's validator, measured in the same run.

    uv run --package spade-corpus python packages/spade-corpus/benchmarks/bench_validate.py [--rounds 3] [--fresh]

Each round times, one after the other over the example corpus (the 60-game starter corpus,
``--repeat`` times):

- **ours, reset reuse** (the default): ``validate_many`` on a warm ``SandboxPool`` of
  ``--workers``; the probes start from a copy of each seed's reset state in the worker.
- **ours, real resets**: the same with ``reuse_resets=False`` (every reset runs, as before the
  copies); its reports must equal the default's.
- **upstream-style, in-process**: what upstream's generation loop runs on a new game, with no
  sandbox, in ``--workers`` threads (as upstream's executor): execute the module, construct the
  ``*Env`` class, reset(42), up to three boxed guesses with type and [-10, 10] reward checks,
  reset(123), then reset() and up to three bare guesses, and close.

Prints the median envs/s of each over the rounds and the ratios ours / upstream-style (goal:
at least 0.5 with reuse). ``--fresh`` also times one fresh sandboxed interpreter per
environment (no pool). Run on a checkout without ``reuse_resets`` it times what that checkout
does (the "before" column of the README's table).
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import spade_envs as se
import spade_sandbox as ss
from spade_corpus.validate import ValidationItem, validate_many, validate_source

_BOXED_GUESSES = ("\\boxed{1}", "\\boxed{test}", "\\boxed{42}")
_BARE_GUESSES = ("1", "2", "test")


def _guesses(env: Any, actions: tuple[str, ...], check: bool) -> None:
    for action in actions:
        result = env.step(action)
        obs, reward, terminated, truncated, info = result
        if check and not (
            isinstance(obs, str)
            and isinstance(reward, (int, float))
            and isinstance(terminated, bool)
            and isinstance(truncated, bool)
            and isinstance(info, dict)
            and -10 <= reward <= 10
        ):
            raise ValueError(f"step({action!r}) returned a bad result")
        if terminated or truncated:
            return


def upstream_style_check(item: ValidationItem) -> bool:
    """One game through the in-process sequence upstream runs on a generated game (our own
    code, mirroring its calls: load and smoke-test, then the generation loop's own check)."""
    try:
        module = types.ModuleType("upstream_style_game")
        exec(compile(item.source, item.env_id or "<game>", "exec"), module.__dict__)
        cls = next(v for k, v in vars(module).items() if k.endswith("Env") and isinstance(v, type))
        env = cls(max_turns=item.max_turns)
        obs, info = env.reset(seed=42)
        if not (isinstance(obs, str) and obs and isinstance(info, dict)):
            raise ValueError("reset returned a bad result")
        _guesses(env, _BOXED_GUESSES, check=True)
        env.reset(seed=123)
        env.reset(seed=None)
        _guesses(env, _BARE_GUESSES, check=False)
        env.close()
        return True
    except Exception:
        return False


def _timed(run: Callable[[], list[Any]]) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def _same(reports: list[Any]) -> list[dict[str, Any]]:
    """Reports without their timings, for comparing two runs."""
    rows = []
    for report in reports:
        row = report.to_dict()
        row.pop("wall_s")
        row["checks"] = {k: v for k, v in row["checks"].items() if not k.endswith("_s")}
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="passes over the corpus per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (median)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fresh", action="store_true", help="also time a fresh sandbox per env")
    args = parser.parse_args()
    corpus = se.load_corpus("example")
    items = [
        ValidationItem(
            corpus.sources[r.id], r.hint, r.id, r.skill, r.max_turns or se.DEFAULT_MAX_TURNS
        )
        for r in corpus.records
    ] * args.repeat
    n = len(items)
    has_switch = "reuse_resets" in inspect.signature(validate_many).parameters
    config = ss.SandboxConfig.from_env()
    times: dict[str, list[float]] = {}

    def record(name: str, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)

    with (
        ss.SandboxPool(config, size=args.workers) as pool,
        ThreadPoolExecutor(max_workers=args.workers) as executor,
    ):
        pool.wait_ready()
        for _ in range(args.rounds):
            seconds, upstream = _timed(lambda: list(executor.map(upstream_style_check, items)))
            assert all(upstream), "an example game failed the upstream-style check"
            record("upstream-style, in-process", seconds)
            options: list[tuple[str, dict[str, Any]]] = [("ours", {})]
            if has_switch:
                options = [
                    ("ours, real resets", {"reuse_resets": False}),
                    ("ours, reset reuse", {}),
                ]
            reports = {}
            for name, extra in options:
                seconds, reports[name] = _timed(
                    lambda extra=extra: validate_many(
                        items, workers=args.workers, progress=False, pool=pool, **extra
                    )
                )
                assert all(r.valid for r in reports[name]), [r.message for r in reports[name]]
                record(name, seconds)
            rows = [_same(r) for r in reports.values()]
            assert all(r == rows[0] for r in rows), "reports differ with and without reuse"
    if args.fresh:
        seconds, fresh = _timed(lambda: list(executor_map_fresh(items, args.workers, config)))
        assert all(r.valid for r in fresh)
        record("ours, fresh interpreter per env", seconds)

    base = statistics.median(times["upstream-style, in-process"])
    print(
        f"{n} validations (example corpus x{args.repeat}), {args.workers} workers, median of {args.rounds} rounds"
    )
    for name, runs in times.items():
        median = statistics.median(runs)
        print(
            f"{name:32s}: {median:6.2f} s  {n / median:6.1f} envs/s  ratio to upstream-style {base / median:5.3f}x"
        )
    if has_switch:
        gain = statistics.median(times["ours, real resets"]) / statistics.median(
            times["ours, reset reuse"]
        )
        print(f"reset reuse / real resets       : {gain:5.2f}x faster, reports identical")
    return 0


def executor_map_fresh(items: list[ValidationItem], workers: int, config: Any) -> list[Any]:
    """Our validation with no pool: each environment opens fresh sandboxed interpreters."""
    with ThreadPoolExecutor(max_workers=workers) as executor:
        return list(
            executor.map(
                lambda i: validate_source(
                    i.source, i.hint, skill=i.skill, max_turns=i.max_turns, config=config, env_id=i.env_id
                ),
                items,
            )
        )  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
