"""What a recipe's designer writes before any training: how many designs are valid, how many
are new, and why the others failed.

    uv run python scripts/design_probe.py [--recipe quickstart] [--cycles 4] [KEY=VALUE ...]

Runs the recipe's design step (prompts, sampling, scaffold, hint pass) for ``--cycles`` cycles
with the policy as a run starts it (after its cold start, when it has one; no loop updates),
validates every design in the process sandbox, admits the valid ones to a pool (so a repeat of
an earlier design is a ``duplicate``, as in a run) and asks spade-corpus's near-duplicate
detection which valid designs copy a reference game. Prints one line per design (skill,
outcome, and the reference game with the highest exact structural Jaccard similarity) and the
totals. ``--revalidate`` validates every valid design again with
``spade_corpus.validate_source`` at its default seeds and counts those it rejects. ``KEY=VALUE`` overrides the recipe as on the ``spade train`` command line. Used to
compare designer prompts for the quickstart (README).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

import spade_corpus as sc
import spade_sandbox as ss
from spade_train.backends import make_backend
from spade_train.cold_start import policy_model
from spade_train.config import RunConfig, load_recipe
from spade_train.core.pool import EnvPool
from spade_train.core.skeleton import PUZZLE_COPY_SHARE, nearest_reference, shared_puzzle
from spade_train.errors import RecipeError
from spade_train.progress import StageProgress
from spade_train.resources import NO_GROUNDING, SandboxValidator
from spade_train.steps import admit as s_admit
from spade_train.steps import design as s_design
from spade_train.steps import validate as s_validate
from spade_train.steps.records import Validated


def _revalidate(cfg: RunConfig, x: Validated, sandbox: ss.SandboxPool) -> str | None:
    """The strict validator's reason for rejecting a valid design at its default seeds (its
    full probe battery, leak and reward-contract checks), or None when it passes."""
    report = sc.validate_source(
        x.env.source or "",
        x.env.hint or "",
        skill=x.skill,
        max_turns=cfg.agent.max_turns,
        pool=sandbox,
    )
    if not report.valid:
        print(f"  revalidation rejects it: {report.reason}: {report.message}", flush=True)
    return None if report.valid else report.reason or "invalid"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default="quickstart")
    parser.add_argument("--cycles", type=int, default=4, help="design steps to run")
    parser.add_argument("--out", help="write every design's record here (JSON lines)")
    parser.add_argument(
        "--revalidate",
        action="store_true",
        help="validate every valid design again with spade_corpus.validate_source's defaults",
    )
    parser.add_argument("overrides", nargs="*", help="recipe overrides, KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        cfg = load_recipe(args.recipe, args.overrides)
    except RecipeError as exc:
        print(f"design_probe: {exc}", file=sys.stderr)
        return 2
    kwargs = {**cfg.backend.backend_kwargs(cfg.seed), "model": policy_model(cfg, _say)}
    backend = make_backend(cfg.backend.name, **kwargs)
    limits = ss.Limits(call_wall_s=cfg.validation.timeout_s)
    sandbox_config = ss.SandboxConfig(backend=cfg.validation.sandbox, limits=limits)
    pool = EnvPool(capacity=cfg.pool.capacity, seed=cfg.seed)
    memory = sc.EnvironmentMemory(capacity=cfg.designer.memory.capacity)
    outcomes: collections.Counter[str] = collections.Counter()
    rows = []
    rejected: list[str | None] = []
    puzzles: list[float] = []
    started = time.monotonic()
    with ss.SandboxPool(sandbox_config, size=cfg.validation.workers) as sandbox:
        with StageProgress(False) as progress:
            for cycle in range(1, args.cycles + 1):
                designs = s_design.design(cfg, backend, cycle, memory, NO_GROUNDING, progress)
                checker = SandboxValidator(sandbox, cfg.validation.workers)
                judging = s_validate.Judging(cfg, backend, cycle, checker, sandbox_config)
                slots = s_validate.check_in_sandbox(judging, designs, progress)
                slots, _ = s_admit.admit(cfg, slots, pool, cycle, sandbox_config)
                slots, _ = s_admit.mark_copies(slots)
                for x in slots:
                    copy = x.verdict.copy_of
                    outcome = "new" if x.valid and copy is None else "copy" if x.valid else ""
                    outcome = outcome or x.reason or "invalid"
                    outcomes[outcome] += 1
                    near = ""
                    if x.env.source:
                        ref, jaccard = nearest_reference(x.env.source)
                        near = f"nearest {ref} {jaccard:.2f}"
                        if cfg.designer.skeleton == "holes" and x.valid:
                            ref, share = shared_puzzle(x.env.source)
                            near += f"; hole in {ref} {share:.2f}"
                            puzzles.append(share)
                    rows.append({"cycle": cycle, "outcome": outcome, **x.to_row()})
                    print(f"cycle {cycle} {x.skill:12} {outcome:24} {near}", flush=True)
                    if args.revalidate and x.valid:
                        rejected.append(_revalidate(cfg, x, sandbox))
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
    total = sum(outcomes.values())
    valid = outcomes["new"] + outcomes["copy"]
    print(
        f"{total} designs: valid {valid} ({valid / max(1, total):.0%}), new {outcomes['new']}; "
        f"{dict(outcomes.most_common())} ({time.monotonic() - started:.0f} s)"
    )
    if puzzles:
        copied = sum(share >= PUZZLE_COPY_SHARE for share in puzzles)
        print(
            f"skeleton holes of valid designs: {copied} of {len(puzzles)} with >= "
            f"{PUZZLE_COPY_SHARE:.0%} of their shingles in one reference game"
        )
    if args.revalidate:
        bad = collections.Counter(r for r in rejected if r is not None)
        print(
            f"revalidated {len(rejected)} valid designs (strict validator, default seeds): "
            f"{sum(bad.values())} rejected {dict(bad)}"
        )
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
