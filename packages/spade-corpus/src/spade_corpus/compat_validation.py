"""Validation in compat mode: environments written for the released SPADE code, judged as the
released code judged them (``validate_source(..., mode="compat")``).

No structural stage (the released loader had none): the source runs behind the released
namespace in spade-sandbox with numpy allowed (``spade_envs.compat_sandbox_config``), and
``spade_envs.check_env_compat`` plays it: the contract checks with the released reward range,
then ``solution()`` read as the released code reads it. A strategy-text ``solution()`` is not a
failure: ``checks["solution"]`` records ``unplayable`` and ``checks["playable"]`` is false.
Failures carry the same reason codes as strict mode.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import spade_envs as se
import spade_sandbox as ss

from .report import ValidationReport, classify, one_line


def validate_compat(
    source: str,
    *,
    max_turns: int,
    config: ss.SandboxConfig | None,
    pool: ss.SandboxPool | None,
    env_id: str | None,
    seeds: Sequence[int],
) -> ValidationReport:
    """One environment in compat mode; a ``ValidationReport``, never an exception for it."""
    start = time.perf_counter()
    checks: dict[str, Any] = {"mode": "compat"}

    def report(valid: bool, reason: str | None, message: str, **extra: Any) -> ValidationReport:
        checks["runtime_s"] = round(time.perf_counter() - start, 4)
        return ValidationReport(
            valid, reason, message, "runtime", checks, time.perf_counter() - start, env_id, **extra
        )

    if pool is None:
        config = se.compat_sandbox_config(config)
    try:
        factory = se.load_env(
            source, sandbox=True, sandbox_config=config, sandbox_pool=pool, mode="compat"
        )
        result = se.check_env_compat(factory, seeds=seeds, max_turns=max_turns)
    except se.SourceError as exc:  # found while picking the class, before anything runs
        text = str(exc)
        code = "syntax_error" if "syntax error" in text else "no_env_class"
        if "found" in text and "," in text.partition("found")[2]:
            code = "multiple_env_classes"
        return report(False, code, one_line(text))
    except se.ContractError as exc:
        fail = classify(exc.code, one_line(exc.message), exc.__cause__, exc.evidence)
        return report(
            False,
            fail.reason,
            fail.message,
            infrastructure=fail.infrastructure,
            sandbox_reason=fail.sandbox_reason,
            evidence=fail.evidence,
        )
    except ss.SandboxError as exc:
        fail = classify(None, one_line(f"an environment call raised {exc.message}"), exc)
        return report(
            False,
            fail.reason,
            fail.message,
            infrastructure=fail.infrastructure,
            sandbox_reason=fail.sandbox_reason,
            evidence=fail.evidence,
        )
    checks.update(
        seeds=list(result.check.seeds),
        steps=result.check.steps,
        solution=list(result.solutions),
        playable=result.playable,
    )
    played = "solution plays and wins" if result.playable else "solution() is unplayable"
    return report(True, None, f"passed in compat mode: {len(seeds)} seeds; {played}")
