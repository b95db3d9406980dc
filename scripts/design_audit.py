"""What the designer of finished runs wrote: validity, novelty and the strict validator's
verdict on every design a run accepted.

    uv run python scripts/design_audit.py RUN_DIR [RUN_DIR ...] [--no-revalidate]

Reads each run's ``designs/cycle_*.jsonl`` (every design of every cycle, as the run judged it)
and prints one row per run and a total:

- valid: the run's own verdict (its ``validation.seeds`` seeds);
- copies: valid designs the run marked ``copy_of`` a reference game (spade-corpus's
  near-duplicate check against the starter and example corpora and the scaffold examples);
- new: valid and not a copy;
- nearest: the median exact 5-token-shingle Jaccard of the valid designs with their closest
  reference game (identifier- and literal-blind tokens, the near-duplicate check's), so a
  "new" design that sits just under the copy line shows;
- rejected on revalidation: valid designs that ``spade_corpus.validate_source`` rejects at its
  default seeds (the full probe battery, leak, reward-contract and feasibility checks), with
  their reasons;
- why the others failed: the run's reasons for its invalid designs.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import spade_corpus as sc
import spade_sandbox as ss
import yaml
from spade_train.core.design import DesignParseError, parse_designer_output
from spade_train.core.skeleton import nearest_reference


def designs(run_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted((run_dir / "designs").glob("cycle_*.jsonl")):
        cycle = int(path.stem.split("_")[1])
        rows += [{"cycle": cycle, **json.loads(x)} for x in path.read_text().splitlines() if x]
    return rows


def source_of(row: dict[str, Any]) -> str | None:
    """The module a design's reply holds (a scaffolded reply has no HINT line: its hint came
    from a second pass, so the parser's missing-hint error still carries the source)."""
    try:
        return parse_designer_output(row["text"]).source
    except DesignParseError as exc:
        return exc.source


def revalidate(row: dict[str, Any], max_turns: int, pool: ss.SandboxPool) -> str | None:
    """The strict validator's reason for rejecting a design the run accepted, or None."""
    source = source_of(row)
    if source is None:  # the run parsed it: the parser changed since
        return "unparsed"
    report = sc.validate_source(
        source, row.get("hint") or "", skill=row["skill"], max_turns=max_turns, pool=pool
    )
    return None if report.valid else report.reason or "invalid"


def audit(run_dir: Path, pool: ss.SandboxPool | None) -> dict[str, Any]:
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    max_turns = int(cfg["agent"]["max_turns"])
    rows = designs(run_dir)
    valid = [r for r in rows if r["valid"]]
    copies = [r for r in valid if r.get("copy_of")]
    near = [nearest_reference(src)[1] for r in valid if (src := source_of(r)) is not None]
    rejected = collections.Counter(
        reason
        for r in valid
        if pool is not None and (reason := revalidate(r, max_turns, pool)) is not None
    )
    failed = collections.Counter(r["reason"] or "invalid" for r in rows if not r["valid"])
    return {
        "run": run_dir.name,
        "designs": len(rows),
        "valid": len(valid),
        "copies": len(copies),
        "new": len(valid) - len(copies),
        "nearest": near,
        "nearest_median": statistics.median(near) if near else float("nan"),
        "revalidated": len(valid) if pool is not None else 0,
        "rejected": dict(rejected),
        "failed": dict(failed),
    }


def _row(a: dict[str, Any]) -> str:
    share = a["valid"] / a["designs"] if a["designs"] else float("nan")
    rejected = sum(a["rejected"].values())
    why = ", ".join(f"{k} {v}" for k, v in sorted(a["rejected"].items())) or "-"
    failed = ", ".join(f"{k} {v}" for k, v in collections.Counter(a["failed"]).most_common())
    return (
        f"| {a['run']} | {a['valid']}/{a['designs']} ({share:.0%}) | {a['copies']} | {a['new']} "
        f"| {a['nearest_median']:.2f} | {rejected} of {a['revalidated']} ({why}) | {failed or '-'} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--no-revalidate", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the per-run audits here")
    args = parser.parse_args(argv)
    missing = [str(d) for d in args.run_dirs if not (d / "config.yaml").exists()]
    if missing:
        print(f"design_audit: not a run directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    audits = []
    with ss.SandboxPool(ss.SandboxConfig(), size=2) as pool:
        for d in args.run_dirs:
            audits.append(audit(d, None if args.no_revalidate else pool))
    total: dict[str, Any] = {"run": "**all**", "rejected": {}, "failed": {}}
    for key in ("designs", "valid", "copies", "new", "revalidated"):
        total[key] = sum(a[key] for a in audits)
    for key in ("rejected", "failed"):
        total[key] = dict(sum((collections.Counter(a[key]) for a in audits), collections.Counter()))
    near = [x for a in audits for x in a["nearest"]]
    total["nearest_median"] = statistics.median(near) if near else float("nan")
    print("| run | valid | copies | new | nearest (median) | rejected on revalidation | failed |")
    print("|---|---:|---:|---:|---:|---|---|")
    for a in [*audits, total]:
        print(_row(a))
    if args.json:
        args.json.write_text(json.dumps(audits, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
