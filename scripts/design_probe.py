"""What a recipe's designer writes before any training: how many designs are valid, how many
are new, and why the others failed.

    uv run python scripts/design_probe.py [--recipe quickstart] [--cycles 4] [KEY=VALUE ...]

Runs the recipe's design step (prompts, sampling, scaffold, hint pass) for ``--cycles`` cycles
with the untrained policy, validates every design in the process sandbox, admits the valid ones
to a pool (so a repeat of an earlier design is a ``duplicate``, as in a run) and asks spade-corpus's
near-duplicate detection which valid designs copy a reference game. Prints one line per design
(skill, outcome, the reference it copies and the highest structural Jaccard similarity to any
reference) and the totals. ``KEY=VALUE`` overrides the recipe as on the ``spade train`` command
line. Used to compare designer prompts for the quickstart (README).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

import spade_corpus as sc
import spade_sandbox as ss
from datasketch import MinHash
from spade_train.backends import make_backend
from spade_train.cold_start import prepare
from spade_train.config import load_recipe
from spade_train.core.pool import EnvPool
from spade_train.core.scaffold import reference_sources
from spade_train.errors import RecipeError
from spade_train.progress import StageProgress
from spade_train.steps import design as s_design


def _sketch(source: str) -> MinHash:
    tokens = sc.structure_tokens(source)
    m = MinHash(num_perm=256, seed=1)
    for i in range(max(1, len(tokens) - 4)):
        m.update(" ".join(tokens[i : i + 5]).encode())
    return m


def nearest_reference(source: str) -> tuple[str, float]:
    """The reference game structurally closest to ``source`` and the estimated Jaccard."""
    mine = _sketch(source)
    scored = [(ref, mine.jaccard(_sketch(src))) for ref, src in reference_sources()]
    return max(scored, key=lambda x: x[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default="quickstart")
    parser.add_argument("--cycles", type=int, default=4, help="design steps to run")
    parser.add_argument("--out", help="write every design's record here (JSON lines)")
    parser.add_argument("overrides", nargs="*", help="recipe overrides, KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        cfg = load_recipe(args.recipe, args.overrides)
    except RecipeError as exc:
        print(f"design_probe: {exc}", file=sys.stderr)
        return 2
    kwargs = cfg.backend.backend_kwargs(cfg.seed)
    if cfg.cold_start_applies:
        kwargs["model"] = str(prepare(cfg, print))
    backend = make_backend(cfg.backend.name, **kwargs)
    limits = ss.Limits(call_wall_s=cfg.validation.timeout_s)
    sandbox_config = ss.SandboxConfig(backend=cfg.validation.sandbox, limits=limits)
    pool = EnvPool(capacity=cfg.pool.capacity, seed=cfg.seed)
    memory = sc.EnvironmentMemory(capacity=cfg.designer.memory.capacity)
    outcomes: collections.Counter[str] = collections.Counter()
    rows = []
    started = time.monotonic()
    with ss.SandboxPool(sandbox_config, size=cfg.validation.workers) as sandbox:
        with StageProgress(False) as progress:
            for cycle in range(1, args.cycles + 1):
                designs = s_design.design(cfg, backend, cycle, memory, None, progress)
                s_design.validate(cfg, designs, cycle, sandbox, sandbox_config, progress)
                s_design.admit_designs(cfg, designs, pool, cycle, sandbox_config)
                s_design.mark_copies(designs)
                for x in designs:
                    outcome = "new" if x.valid and x.copy_of is None else "copy" if x.valid else ""
                    outcome = outcome or x.reason or "invalid"
                    outcomes[outcome] += 1
                    near = ""
                    if x.source:
                        ref, jaccard = nearest_reference(x.source)
                        near = f"nearest {ref} {jaccard:.2f}"
                    rows.append({"cycle": cycle, "outcome": outcome, **x.to_row()})
                    print(f"cycle {cycle} {x.skill:12} {outcome:24} {near}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
    total = sum(outcomes.values())
    valid = outcomes["new"] + outcomes["copy"]
    print(
        f"{total} designs: valid {valid} ({valid / max(1, total):.0%}), new {outcomes['new']}; "
        f"{dict(outcomes.most_common())} ({time.monotonic() - started:.0f} s)"
    )
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
