"""Rebuild the shipped example corpus's manifest, validation files and checksums.

    uv run --package spade-envs python packages/spade-envs/tools/build_example_corpus.py

Reads games/game_*.py and the hand-written fields of manifest.jsonl, checks every game with
spade_envs.check_env (hint included), measures a seeded random agent's win rate, and rewrites
the corpus in the released layout (sha256 per record, validation_manifest.jsonl,
validation_summary.json, checksums.sha256). Run it after editing a game.
"""

from __future__ import annotations

import json
import sys
from collections import Counter

import spade_envs as se

EPISODES = 50


def main() -> int:
    root = se.example_corpus_path()
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines() if line.strip()]
    records, sources, validation = [], {}, {}
    for row in rows:
        source = (root / row["file"]).read_text(encoding="utf-8")
        row["sha256"] = se.sha256_text(source)
        rec = se.EnvRecord.from_dict(row, f"manifest {row.get('id')}")
        factory = se.load_env(source, rec.class_name, origin=rec.file)
        try:
            report = se.check_env(factory, seeds=range(5), max_turns=rec.max_turns, hint=rec.hint)
            entry = {"id": rec.id, "valid": True, "reason": None, "checks": {
                "seeds": list(report.seeds), "probe_episodes": report.probe_episodes,
                "steps": report.steps, "solution_turns": report.solution_turns}}
        except se.ContractError as exc:
            print(f"{rec.id}: INVALID {exc}", file=sys.stderr)
            entry = {"id": rec.id, "valid": False, "reason": exc.code, "message": exc.message}
        agent = se.RandomAgent(seed=0)
        results = se.run_episodes(
            [se.EpisodeSpec(factory, seed=s, env_id=rec.id, max_turns=rec.max_turns) for s in range(EPISODES)],
            lambda batch, agent=agent: [agent(m) for m in batch],
        )
        wins = sum(r.won for r in results) / EPISODES
        rec = se.EnvRecord(**{**rec.__dict__, "difficulty": {"random_agent_win_rate": wins, "episodes": EPISODES}})
        records.append(rec)
        sources[rec.id] = source
        validation[rec.id] = entry
        print(f"{rec.id:<28} {rec.skill:<12} valid={entry['valid']}  random win rate {wins:.2f}")
    summary = {
        "total": len(records),
        "valid": sum(v["valid"] for v in validation.values()),
        "by_skill": dict(sorted(Counter(r.skill for r in records).items())),
        "by_reason": dict(Counter(v["reason"] for v in validation.values() if not v["valid"])),
    }
    se.write_corpus(root, records, sources, validation=validation, summary=summary, overwrite=True)
    se.load_corpus(root)  # verify what was written
    print(f"wrote {root} ({summary['valid']}/{summary['total']} valid)")
    return 0 if summary["valid"] == summary["total"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
