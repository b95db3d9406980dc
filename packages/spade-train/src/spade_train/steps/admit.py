"""The last stage of step 2 (:mod:`spade_train.steps.validate` runs it): the valid
environments enter the pool (one it already holds becomes a ``duplicate``), each valid copy
of a shipped game is marked (``copy_of``), and the slots' ``design/*`` metrics."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import cast

import spade_corpus as sc
import spade_envs as se
import spade_sandbox as ss

from spade_train.config import RunConfig
from spade_train.core.pool import EnvPool, PoolEntry
from spade_train.core.scaffold import copies_of_references
from spade_train.core.skeleton import PUZZLE_COPY_SHARE, shared_puzzle
from spade_train.steps.records import Validated
from spade_train.types import JSON, Metrics


def admit(
    cfg: RunConfig,
    slots: Sequence[Validated],
    pool: EnvPool,
    cycle: int,
    sandbox_config: ss.SandboxConfig,
) -> tuple[list[Validated], list[PoolEntry]]:
    """Valid environments enter the pool (a source or id it already holds is a
    ``duplicate``); the slots and the entries added."""
    out, accepted = list(slots), []
    for i, s in enumerate(out):
        report = s.verdict.report
        if not s.valid or report is None:
            continue
        env = s.env
        class_name = report.checks.get("class_name") or env.class_name or ""
        tools = None
        if cfg.setting == "tool-use":
            tools = read_tools(env.source or "", class_name, sandbox_config)
        entry = PoolEntry(
            env_id=env.env_id or "",
            source=env.source or "",
            class_name=class_name,
            hint=env.hint,
            skill=s.skill,
            max_turns=cfg.agent.max_turns,
            cycle_added=cycle,
            origin="designer",
            tools=tools,
        )
        if pool.add(entry) is not None:
            accepted.append(entry)
        else:  # a valid environment whose source or id the pool already holds
            duplicate = dataclasses.replace(report, valid=False, reason="duplicate")
            out[i] = replace(s, verdict=replace(s.verdict, report=duplicate))
    return out, accepted


def read_tools(
    source: str, class_name: str, sandbox_config: ss.SandboxConfig
) -> list[dict[str, object]] | None:
    """The declared tools of a validated tool-use environment (read in the sandbox: a
    sandboxed environment exposes no attributes to the runner)."""
    try:
        tools, _domain = sc.read_tools(source, class_name, sandbox_config)
    except se.ContractError:
        return None
    return [dict(t) for t in tools] if isinstance(tools, list) and tools else None


def mark_copies(slots: Sequence[Validated]) -> tuple[list[Validated], int]:
    """Mark each valid slot that copies a scaffold example or a shipped corpus game
    (``copy_of``): the whole program a near duplicate, or a skeleton design's ``make()``
    mostly made of one game's shingles (:func:`spade_train.core.skeleton.shared_puzzle`);
    the slots and how many valid ones are new."""
    valid = [s for s in slots if s.valid]
    copies = copies_of_references([(s.env_id or "", s.env.source or "") for s in valid])
    for s in valid:  # a skeleton design copies a game when its hole (make()) does
        ref, share = shared_puzzle(s.env.source or "")
        if (s.env_id or "") not in copies and share >= PUZZLE_COPY_SHARE:
            copies[s.env_id or ""] = ref
    out = [
        replace(s, verdict=replace(s.verdict, copy_of=copies.get(s.env_id or ""))) if s.valid else s
        for s in slots
    ]
    return out, sum(s.verdict.copy_of is None for s in out if s.valid)


def design_metrics(slots: Sequence[Validated]) -> Metrics:
    reasons = Counter(s.reason for s in slots if not s.valid)
    valid = sum(s.valid for s in slots)
    return {
        "design/completions": len(slots),
        "design/parsed": sum(s.env.parse_error is None for s in slots),
        "design/valid": valid,
        "design/validity_rate": valid / max(1, len(slots)),
        "design/reasons": cast(  # a reason is a string: None only where none was given
            "dict[str, JSON]", dict(sorted(reasons.items(), key=lambda kv: str(kv[0])))
        ),
    }
