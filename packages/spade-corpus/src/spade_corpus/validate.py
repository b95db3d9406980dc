"""The validation pipeline: structural checks, then the contract checker inside the sandbox.

Every generated environment passes through :func:`validate_source` before it is trained on:

1. **structural** (:mod:`spade_corpus.structural`): size, syntax, one ``*Env`` class, method
   signatures, import policy, no module-level side effects, skill attribute. Nothing runs.
2. **runtime**: ``spade_envs.check_env`` plays the environment in spade-sandbox (reset over the
   seeds, probe actions, bounds, termination, determinism, seeds matter, the hint is non-empty,
   never shown and not itself the answer, ``solution()`` wins, the answer is not printed, a
   second worker plays alike, no reward-hack probe wins on most seeds). Its
   ``ContractError.code`` is the reason; the probe win rate lands in ``checks``.

A failure is data, never an exception: the :class:`ValidationReport` carries one reason code
from :data:`VALIDATION_REASONS` and a one-line message. When the sandbox stopped the
environment (timeout, memory, a forbidden call, a bad return value, ...) the reason is
``sandbox_<reason>``; when the sandbox itself failed, ``infrastructure`` is true and the
environment is not counted as rejected (:func:`validation_summary`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import spade_envs as se
import spade_sandbox as ss
from tqdm import tqdm

from .compat_validation import validate_compat
from .report import RuntimeFailure, ValidationReport, classify, one_line
from .structural import (
    DEFAULT_MAX_SOURCE_BYTES,
    STRUCTURAL_REASONS,
    StructuralRejection,
    check_structure,
)
from .tools_validation import TOOL_REASONS, check_tool_env

__all__ = [
    "DEFAULT_SEEDS",
    "VALIDATION_REASONS",
    "INFRASTRUCTURE_REASONS",
    "ValidationItem",
    "ValidationReport",
    "validate_source",
    "validate_many",
    "validate_corpus",
    "validation_summary",
]

DEFAULT_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)
"""Seeds the runtime stage plays (the released corpus's validation used five)."""

_MASKED = " (inside the sandbox the host's own check reports this first, as sandbox_bad_return)"
_RUNTIME_REASONS: dict[str, str] = {
    **{
        code: text
        + (
            _MASKED
            if code
            in {"reset_return_type", "step_return_type", "reward_not_finite", "info_not_json"}
            else ""
        )
        for code, text in se.REASON_CODES.items()
    },
    "solution_leaked": "the final action of solution() appears in the first observation of every seed",
}
_SANDBOX_DESCRIPTIONS: dict[str, str] = {
    "timeout": "a call ran past the sandbox's wall-clock or CPU-time limit",
    "memory": "the environment ran out of the sandbox's memory limit",
    "crashed": "the sandboxed worker died mid-call (signal, exit, SystemExit)",
    "forbidden_syscall": "the seccomp filter killed the worker (process spawn, socket, ...)",
    "forbidden_import": "a module outside the allow-list was imported at run time",
    "bad_return": "a method returned the wrong type or shape, a non-finite reward or non-JSON data",
    "output_too_large": "an observation, result or printed output exceeded the sandbox's size limit",
    "protocol_error": "the worker's channel carried something that is not a valid frame",
    "env_exception": "the environment raised where the contract checker names no method",
    "limit_exceeded": "a per-episode limit of the sandbox (steps, episode wall time) was reached",
    "disk_quota": "the environment filled its work directory past the sandbox's disk quota (bytes or files)",
    "infrastructure": "the sandbox itself failed (no worker could start, pool closed); not the environment's fault",
}
_SANDBOX_REASONS: dict[str, str] = {
    f"sandbox_{code.value}": _SANDBOX_DESCRIPTIONS.get(
        code.value, f"the sandbox reported {code.value!r}"
    )
    for code in ss.ReasonCode
}

#: Every reason code a ValidationReport can carry, with what it means.
VALIDATION_REASONS: dict[str, str] = {
    **STRUCTURAL_REASONS,
    **_RUNTIME_REASONS,
    **_SANDBOX_REASONS,
    **TOOL_REASONS,
    "validator_error": "the validator itself failed unexpectedly; not the environment's fault",
}

#: Reasons that are faults of the sandbox or the validator, never the environment's.
INFRASTRUCTURE_REASONS: frozenset[str] = frozenset({"sandbox_infrastructure", "validator_error"})


@dataclass(frozen=True)
class ValidationItem:
    """One environment to validate: its source, privileged hint and what it was made for."""

    source: str
    hint: str
    env_id: str | None = None
    skill: str | None = None
    max_turns: int = se.DEFAULT_MAX_TURNS


def _run_checks(
    source: str,
    hint: str,
    class_name: str,
    max_turns: int,
    seeds: Sequence[int],
    config: Any,
    pool: Any,
    tool_checks: dict[str, Any] | None = None,
    reuse_resets: bool = True,
) -> se.CheckReport:
    """The runtime stage; with ``tool_checks`` (a dict to fill) the tool-use checks run too."""
    factory = se.load_env(
        source, class_name, sandbox=True, sandbox_config=config, sandbox_pool=pool
    )
    try:
        report = se.check_env(
            factory, seeds=seeds, max_turns=max_turns, hint=hint, reuse_resets=reuse_resets
        )
        if tool_checks is not None:
            tool_checks.update(
                check_tool_env(
                    source, class_name, factory, config=config, seeds=seeds, max_turns=max_turns
                )
            )
    except se.ContractError as exc:
        raise classify(exc.code, one_line(exc.message), exc.__cause__, exc.evidence) from exc
    except ss.SandboxError as exc:  # a call check_env does not wrap, or the leak check's
        raise classify(
            None, one_line(f"an environment call raised {type(exc).__name__}: {exc.message}"), exc
        ) from exc
    return report


def validate_source(
    source: str,
    hint: str,
    *,
    skill: str | None = None,
    max_turns: int = se.DEFAULT_MAX_TURNS,
    config: ss.SandboxConfig | None = None,
    pool: ss.SandboxPool | None = None,
    env_id: str | None = None,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES,
    mode: str = "strict",
    reuse_resets: bool = True,
) -> ValidationReport:
    """Validate one environment's ``source`` with its privileged ``hint``; never raises for it.

    ``mode="compat"``: judge code written for the released SPADE code as it was judged there
    (:mod:`spade_corpus.compat_validation`; ``hint`` and ``skill`` are not checked).

    ``skill``: the skill it was made for (checked against a literal ``skill`` class attribute).
    ``pool``: a warm ``SandboxPool`` to run in (its config is used); otherwise each environment
    opens a fresh sandboxed worker with ``config`` (default ``SandboxConfig.from_env()``).
    ``reuse_resets``: as ``spade_envs.check_env`` (probes start from a copy of a seed's reset
    state in the worker; the same report, 1.3-1.5x faster on the example corpus); False resets
    for real every time.
    """
    seeds = _checked_arguments(pool, config, skill, seeds)
    if mode == "compat":  # the released code's rules, kept apart from the strict pipeline
        return validate_compat(
            source, max_turns=max_turns, config=config, pool=pool, env_id=env_id, seeds=seeds
        )
    if mode != "strict":
        raise ValueError(f"mode must be 'strict' or 'compat', not {mode!r}")
    config = pool.config if pool is not None else config or ss.SandboxConfig.from_env()
    start = time.perf_counter()

    def report(valid: bool, reason: str | None, message: str, stage: str,
               checks: dict[str, Any], **extra: Any) -> ValidationReport:  # fmt: skip
        return ValidationReport(
            valid, reason, message, stage, checks, time.perf_counter() - start, env_id, **extra
        )

    try:
        checks = check_structure(
            source,
            allowed_imports=config.allowed_imports,
            skill=skill,
            max_source_bytes=max_source_bytes,
        )
    except StructuralRejection as exc:
        elapsed = {"structural_s": round(time.perf_counter() - start, 4)}
        return report(False, exc.code, one_line(exc.message), "structural", elapsed)
    checks["structural_s"] = round(time.perf_counter() - start, 4)
    runtime_start = time.perf_counter()
    tool_use = se.TOOL_USE in (skill, checks.get("declared_skill"))
    tool_checks: dict[str, Any] | None = {} if tool_use else None
    try:
        result = _run_checks(source, hint, checks["class_name"], max_turns, seeds, config,
                             pool, tool_checks, reuse_resets)  # fmt: skip
    except RuntimeFailure as exc:
        checks["runtime_s"] = round(time.perf_counter() - runtime_start, 4)
        return report(False, exc.reason, exc.message, "runtime", checks,
                      infrastructure=exc.infrastructure, sandbox_reason=exc.sandbox_reason,
                      evidence=exc.evidence)  # fmt: skip
    except Exception as exc:  # a validator bug must not be scored as the environment's fault
        checks["runtime_s"] = round(time.perf_counter() - runtime_start, 4)
        message = one_line(f"the validator failed: {type(exc).__name__}: {exc}")
        return report(False, "validator_error", message, "runtime", checks, infrastructure=True)
    checks.update(_passed_checks(result), runtime_s=round(time.perf_counter() - runtime_start, 4),
                  **(tool_checks or {}))  # fmt: skip
    message = f"passed: {len(result.seeds)} seeds, {result.steps} probe steps, solution wins in {result.solution_turns} turn(s)"
    return report(True, None, message, "runtime", checks)


def _checked_arguments(
    pool: ss.SandboxPool | None,
    config: ss.SandboxConfig | None,
    skill: str | None,
    seeds: Sequence[int],
) -> tuple[int, ...]:
    """The seeds as a tuple; ValueError for a pool with another config, an unknown skill or
    no seed."""
    if pool is not None and config is not None and config != pool.config:
        raise ValueError("pass either a pool or a config, not a pool with a different config")
    if skill is not None and skill not in (*se.SKILLS, se.TOOL_USE):
        raise ValueError(
            f"unknown skill {skill!r}; use one of {', '.join((*se.SKILLS, se.TOOL_USE))}"
        )
    if not tuple(seeds):
        raise ValueError("validate_source needs at least one seed")
    return tuple(seeds)


def _passed_checks(result: se.CheckReport) -> dict[str, Any]:
    """What a passed environment's report records of its checks."""
    return dict(
        seeds=list(result.seeds),
        probe_episodes=result.probe_episodes,
        steps=result.steps,
        solution_turns=result.solution_turns,
        max_first_observation_chars=result.max_first_observation_chars,
        probe_win_rate=result.probe_win_rate,
        probe_wins=result.probe_wins,
        feasible_bound=result.feasible_bound,
        privileged_only_seeds=result.privileged_only_seeds,
        feasibility_not_judged=result.feasibility_not_judged,
    )


def _validate_item(
    item: ValidationItem,
    pool: ss.SandboxPool,
    seeds: Sequence[int],
    mode: str = "strict",
    reuse_resets: bool = True,
) -> ValidationReport:
    """validate_source for one batch item; whatever goes wrong is that item's report, so one
    item (a bad skill name, a validator bug) never aborts the batch."""
    start = time.perf_counter()
    try:
        return validate_source(
            item.source,
            item.hint,
            skill=item.skill,
            max_turns=item.max_turns,
            pool=pool,
            env_id=item.env_id,
            seeds=seeds,
            mode=mode,
            reuse_resets=reuse_resets,
        )
    except Exception as exc:
        message = one_line(f"the validator failed: {type(exc).__name__}: {exc}")
        return ValidationReport(
            False,
            "validator_error",
            message,
            "structural",
            {},
            time.perf_counter() - start,
            item.env_id,
            infrastructure=True,
        )


def validate_many(
    items: Iterable[ValidationItem],
    *,
    workers: int = 2,
    progress: bool = True,
    config: ss.SandboxConfig | None = None,
    pool: ss.SandboxPool | None = None,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    mode: str = "strict",
    reuse_resets: bool = True,
) -> list[ValidationReport]:
    """Validate ``items`` ``workers`` at a time over one warm ``SandboxPool``; reports in input order.

    Without ``pool`` a pool of ``workers`` warm workers is opened for the call and closed after.
    ``mode``, ``reuse_resets``: as :func:`validate_source` (a compat pool is opened with numpy
    allowed).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    items = list(items)
    own_pool = pool is None
    if pool is None:
        if mode == "compat":
            config = se.compat_sandbox_config(config)
        pool = ss.SandboxPool(config, size=workers)
    try:
        with (
            ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix="spade-validate"
            ) as executor,
            tqdm(total=len(items), desc="validating", unit="env", disable=not progress) as bar,
        ):
            futures = [
                executor.submit(_validate_item, item, pool, seeds, mode, reuse_resets)
                for item in items
            ]
            for _done in as_completed(futures):
                bar.update(1)
            return [future.result() for future in futures]
    finally:
        if own_pool:
            pool.close()


def validation_summary(
    reports: Sequence[ValidationReport],
    skills: dict[str, str] | None = None,
    elapsed_s: float | None = None,
) -> dict[str, Any]:
    """The ``validation_summary.json`` dict: totals, rejections by reason and stage, per skill.

    Infrastructure failures are counted apart (``infrastructure_errors``) and never appear in
    ``by_reason``: they say nothing about the environment. ``skills`` maps env id to skill.
    """
    rejected = [r for r in reports if not r.valid and not r.infrastructure]
    skills = skills or {}
    summary: dict[str, Any] = {
        "total": len(reports),
        "valid": sum(r.valid for r in reports),
        "invalid": len(rejected),
        "infrastructure_errors": sum(r.infrastructure for r in reports),
        "by_reason": dict(sorted(Counter(r.reason for r in rejected).items())),
        "by_stage": dict(sorted(Counter(r.stage for r in rejected).items())),
        "infrastructure_by_reason": dict(
            sorted(Counter(r.reason for r in reports if r.infrastructure).items())
        ),
        "by_skill": dict(
            sorted(Counter(skills.get(r.env_id or "", "unknown") for r in reports).items())
        ),
        "valid_by_skill": dict(
            sorted(
                Counter(skills.get(r.env_id or "", "unknown") for r in reports if r.valid).items()
            )
        ),
        "validation_s": round(sum(r.wall_s for r in reports), 3),
    }
    if elapsed_s is not None:
        summary["elapsed_s"] = round(elapsed_s, 3)
    return summary


def corpus_items(corpus: se.Corpus) -> list[ValidationItem]:
    return [
        ValidationItem(
            corpus.sources[rec.id],
            rec.hint,
            rec.id,
            rec.skill,
            rec.max_turns or se.DEFAULT_MAX_TURNS,
        )
        for rec in corpus.records
    ]


def validate_corpus(
    corpus: se.Corpus,
    *,
    workers: int = 2,
    progress: bool = False,
    config: ss.SandboxConfig | None = None,
    pool: ss.SandboxPool | None = None,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    mode: str | None = None,
) -> tuple[list[ValidationReport], dict[str, Any]]:
    """Validate every record of ``corpus``; return the reports and the summary dict.
    ``mode`` defaults to the corpus's own (``compat`` for a released corpus).

    ``[r.to_dict() for r in reports]`` are the ``validation_manifest.jsonl`` rows and the
    summary is ``validation_summary.json`` (pass both to ``spade_envs.write_corpus``).
    """
    start = time.perf_counter()
    reports = validate_many(
        corpus_items(corpus),
        workers=workers,
        progress=progress,
        config=config,
        pool=pool,
        seeds=seeds,
        mode=mode or corpus.mode,
    )
    skills = {rec.id: rec.skill for rec in corpus.records}
    return reports, validation_summary(reports, skills, time.perf_counter() - start)
