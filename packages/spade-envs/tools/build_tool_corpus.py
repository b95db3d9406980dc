"""Build the shipped tool-use corpus from the hand-written environments in tools/tool_envs/.

    python packages/spade-envs/tools/build_tool_corpus.py [--check]

Each ``tool_envs/<id>.py`` holds one environment class (header lines ``# ID:``, ``# TITLE:``,
``# SPLIT:``, ``# HINT:`` carry its record fields); ``_base.py`` holds the episode mechanics they
share. Every module written to the corpus is self-contained: the base text followed by the
environment. Each is checked with ``spade_envs.check_env`` (hint included) and its tool schemas
with ``spade_envs.tool_schema_problems``; a seeded ``RandomToolAgent``'s win rate is recorded in
``difficulty``. ``--check`` validates without writing.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import spade_envs as se

HERE = Path(__file__).parent / "tool_envs"
EPISODES = 40
MAX_TURNS = 12
FIELDS = ("ID", "TITLE", "SPLIT", "HINT")


def compose(body_path: Path) -> tuple[dict[str, str], str]:
    """The record fields from a body file's header and the self-contained module source."""
    meta, lines = {}, []
    for line in body_path.read_text(encoding="utf-8").splitlines():
        key = line[2:].split(":", 1)[0] if line.startswith("# ") else ""
        if line.startswith("# ruff:"):
            continue
        if key in FIELDS and not meta.get(key):
            meta[key] = line.split(":", 1)[1].strip()
        else:
            lines.append(line)
    doc = f'"""{meta["TITLE"]}: a SPADE tool-use environment."""\n\n'
    base = (HERE / "_base.py").read_text(encoding="utf-8")
    return meta, doc + base.rstrip() + "\n\n" + "\n".join(lines).strip() + "\n"


def build(write: bool = True) -> int:
    records, sources, validation = [], {}, {}
    for body in sorted(HERE.glob("[a-z]*.py")):
        meta, source = compose(body)
        factory = se.load_env(source, origin=body.name)
        env = factory(max_turns=MAX_TURNS)
        tools, domain = [dict(t) for t in env.tools], env.domain
        problems = [p for t in tools for p in se.tool_schema_problems(t)]
        try:
            if problems:
                raise se.ContractError("tool_schema_invalid", "; ".join(problems))
            report = se.check_env(factory, seeds=range(5), max_turns=MAX_TURNS, hint=meta["HINT"])
            entry = {
                "id": meta["ID"],
                "valid": True,
                "reason": None,
                "checks": {
                    "seeds": list(report.seeds),
                    "steps": report.steps,
                    "solution_turns": report.solution_turns,
                },
            }
        except se.ContractError as exc:
            print(f"{meta['ID']}: INVALID {exc}", file=sys.stderr)
            entry = {"id": meta["ID"], "valid": False, "reason": exc.code, "message": exc.message}
        specs = [
            se.EpisodeSpec(factory, seed=s, env_id=meta["ID"], max_turns=MAX_TURNS)
            for s in range(EPISODES)
        ]
        wins = sum(r.won for r in se.run_episodes(specs, se.RandomToolAgent(seed=0))) / EPISODES
        rec = se.EnvRecord(
            id=meta["ID"],
            skill=se.TOOL_USE,
            hint=meta["HINT"],
            sha256=se.sha256_text(source),
            class_name=se.find_env_class(source),
            origin="hand-written",
            max_turns=MAX_TURNS,
            split=meta["SPLIT"],
            title=meta["TITLE"],
            description=source.split("\n", 1)[0].strip('"'),
            difficulty={"random_agent_win_rate": wins, "episodes": EPISODES},
            extra={"domain": domain, "tools": tools},
        )
        records.append(rec)
        sources[rec.id] = source
        validation[rec.id] = entry
        print(
            f"{rec.id:<30} {domain:<11} {rec.split:<8} valid={entry['valid']}  random win rate {wins:.3f}"
        )
    summary = {
        "total": len(records),
        "valid": sum(v["valid"] for v in validation.values()),
        "by_skill": dict(Counter(r.skill for r in records)),
        "by_domain": dict(sorted(Counter(r.extra["domain"] for r in records).items())),
        "by_reason": dict(Counter(v["reason"] for v in validation.values() if not v["valid"])),
    }
    if write:
        root = se.tool_use_corpus_path()
        se.write_corpus(
            root, records, sources, validation=validation, summary=summary, overwrite=True
        )
        se.load_corpus(root)
        print(f"wrote {root} ({summary['valid']}/{summary['total']} valid)")
    return 0 if summary["valid"] == summary["total"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="validate without writing the corpus")
    return build(write=not parser.parse_args().check)


if __name__ == "__main__":
    sys.exit(main())
