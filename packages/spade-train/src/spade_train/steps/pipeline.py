"""Step 2 continued: the designer pipeline after the sandbox validator (``designer.pipeline``).

:func:`refine` runs on the cycle's validated designs, in this order, each stage optional:

1. **reset gate** — an environment whose success criteria raise on the state ``reset`` builds,
   at every tested seed, is rejected (``reset_gate``); run in a fresh sandbox;
2. **LLM validator** — the policy or an OpenAI-compatible endpoint reads the code and answers
   ``\\boxed{yes|no}``; no is ``llm_validator_rejected``; errors accept (fail open), counted;
3. **retries** (``max_attempts``) — a failed slot is sampled again from the same prompt; only
   its last attempt is kept and trained, earlier ones are listed in ``pipeline.attempts``;
   **or repair turns** (``repair_turns``) — the failing report is shown to the designer, whose
   reply (inference only) is validated and gated again; a repaired environment replaces the
   slot's environment, while the trained completion stays the first reply;
4. **budgets** — a generation round slower than ``generation_budget_s`` fails its attempts
   (``generation_timeout``); no round starts after ``cycle_budget_s``
   (``pipeline.budget_exhausted``).

:func:`self_judge` runs after play: the policy judges each new environment from its code and
one episode; a no costs the designer ``self_judge.penalty``. Each function returns its metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import spade_envs as se
import spade_sandbox as ss

from spade_train.config import RunConfig
from spade_train.core import judges
from spade_train.core.scaffold import SCAFFOLD_PREFILL, SCAFFOLD_STOP, close_reply
from spade_train.seeds import derive_seed
from spade_train.steps import design as s_design
from spade_train.steps.records import Design, Episode, PlayedEnv
from spade_train.types import Message, SamplingParams

log = logging.getLogger("spade_train.pipeline")


def refine(
    cfg: RunConfig,
    backend: Any,
    designs: list[Design],
    cycle: int,
    sandbox: Any,
    sandbox_config: ss.SandboxConfig,
    progress: Any,
    started: float,
) -> dict[str, Any]:
    """Gates, then retries or repairs, over ``designs`` (replaced in place); the metrics."""
    p = cfg.designer.pipeline
    stats = {"attempts": len(designs), "repair_turns": 0, "validator_errors": 0}
    gate(cfg, backend, designs, cycle, sandbox_config, stats)
    rounds = p.repair_turns if p.repair_turns else p.max_attempts - 1
    for turn in range(1, rounds + 1):
        failing = [i for i, d in enumerate(designs) if _fixable(d)]
        if not failing:
            break
        if time.perf_counter() - started >= p.cycle_budget_s:
            for i in failing:
                designs[i].pipeline["budget_exhausted"] = True
            break
        ctx = _Round(cfg, backend, cycle, turn, sandbox, sandbox_config, stats)
        if p.repair_turns:
            _repair_round(ctx, designs, failing)
            stats["repair_turns"] += len(failing)
        else:
            _retry_round(ctx, designs, failing)
            stats["attempts"] += len(failing)
    for d in designs:
        for key in [k for k in d.pipeline if k.startswith("_")]:
            del d.pipeline[key]
    if stats["validator_errors"]:  # once per cycle, however many calls failed
        log.warning(
            "cycle %d: the LLM validator could not be asked %d time(s); those environments "
            "were accepted (fail open)",
            cycle,
            stats["validator_errors"],
        )
    return {
        "design/attempts": stats["attempts"],
        "design/repair_turns": stats["repair_turns"],
        "design/repaired": sum(d.repaired_turn is not None for d in designs),
        "design/budget_exhausted": sum(bool(d.pipeline.get("budget_exhausted")) for d in designs),
        "design/validator_errors": stats["validator_errors"],
    }


def _fixable(d: Design) -> bool:
    return not d.valid and not (d.report is not None and d.report.infrastructure)


def gate(
    cfg: RunConfig,
    backend: Any,
    designs: Sequence[Design],
    cycle: int,
    sandbox_config: ss.SandboxConfig,
    stats: dict[str, int],
    turn: int = 0,
) -> None:
    """The reset gate, then the LLM validator, on the designs the sandbox passed."""
    p = cfg.designer.pipeline
    todo = [d for d in designs if d.valid]
    if p.reset_gate.enabled and not (p.reset_gate.skip_first_cycle and cycle == 1):
        for d in todo:
            class_name = (d.report.checks.get("class_name") if d.report else None) or ""
            result = judges.reset_gate(
                d.source or "",
                class_name or d.class_name or "",
                cfg.agent.max_turns,
                p.reset_gate.seeds,
                sandbox_config,
            )
            d.pipeline["reset_gate"] = result.to_dict()
            if result.rejected:
                _reject(d, "reset_gate", f"criteria raised at all {result.checked} seeds")
    todo = [d for d in todo if d.valid]
    if p.validator.enabled and todo:
        verdicts = ask_validator(cfg, backend, todo, cycle, turn)
        for d, v in zip(todo, verdicts, strict=True):
            d.pipeline["validator"] = v.to_dict()
            stats["validator_errors"] += v.status == "error"
            if not v.accepted:
                _reject(d, "llm_validator_rejected", v.text[:200])


def _reject(d: Design, code: str, message: str) -> None:
    d.rejected, d.rejected_message = code, message


def ask_validator(
    cfg: RunConfig, backend: Any, designs: Sequence[Design], cycle: int, turn: int
) -> list[judges.Verdict]:
    """One verdict per design from the policy or the endpoint; errors become ``error``."""
    v = cfg.designer.pipeline.validator
    convs = [judges.validator_messages(d.source or "", cfg.setting, v.prompt) for d in designs]
    seed = derive_seed(cfg.seed, cycle, "validator", turn)
    return _ask(
        backend, convs, v.judge, v, SamplingParams(v.max_new_tokens, v.temperature, seed=seed)
    )


def _ask(
    backend: Any, convs: list[list[Message]], judge: str, v: Any, params: SamplingParams
) -> list[judges.Verdict]:
    if judge == "endpoint":
        if not v.endpoint:
            err = ValueError("designer.pipeline.validator.endpoint is unset")
            return [judges.error_verdict(err) for _ in convs]
        replies = judges.endpoint_replies(
            v.endpoint,
            v.model,
            convs,
            api_key_env=v.api_key_env,
            temperature=v.temperature,
            max_tokens=v.max_new_tokens,
            timeout_s=v.timeout_s,
        )
        return [
            judges.error_verdict(r) if isinstance(r, BaseException) else judges.parse_verdict(r)
            for r in replies
        ]
    try:
        texts = [g.text for g in backend.generate(convs, params)]
    except Exception as exc:  # noqa: BLE001 - a judge's failure accepts (fail open)
        return [judges.error_verdict(exc) for _ in convs]
    return [judges.parse_verdict(t) for t in texts]


@dataclass
class _Round:
    """What one retry or repair round needs."""

    cfg: RunConfig
    backend: Any
    cycle: int
    turn: int
    sandbox: Any
    sandbox_config: ss.SandboxConfig
    stats: dict[str, int]


def _generate(
    cfg: RunConfig, backend: Any, convs: list[list[Message]], seed: int
) -> tuple[list[str], list[Any], float]:
    """Designer replies for ``convs`` with the design step's sampling; the round's seconds."""
    params = cfg.designer.sampling.to_params(seed)
    scaffolded = bool(cfg.designer.scaffold and convs and convs[0][-1].get("role") == "assistant")
    if scaffolded:
        params = replace(params, stop=SCAFFOLD_STOP)
    t = time.perf_counter()
    gens = backend.generate(convs, params)
    texts = [SCAFFOLD_PREFILL + close_reply(g.text) if scaffolded else g.text for g in gens]
    return texts, list(gens), time.perf_counter() - t


def _validate_new(ctx: _Round, new: list[Design], slow: bool) -> None:
    """Parse, hint, id, sandbox-validate and gate new replies (a slow round fails them)."""
    cfg, backend, cycle = ctx.cfg, ctx.backend, ctx.cycle
    for d in new:
        s_design.parse_reply(d, cfg)
        if slow and d.parse_error is None:
            d.parse_error, d.parse_message = "generation_timeout", "generation round too slow"
    if cfg.designer.hint_source != "reply":
        s_design.write_hints(cfg, backend, cycle, [d for d in new if d.parsed])
    for d in new:
        if d.parsed:
            digest = se.sha256_text(d.source or "")[:10]
            d.env_id = f"c{cycle:04d}_p{d.prompt_index}_g{d.completion_index}_{digest}"
    s_design.validate(cfg, new, cycle, ctx.sandbox, ctx.sandbox_config, _Quiet())
    gate(cfg, backend, new, cycle, ctx.sandbox_config, ctx.stats, ctx.turn)


def _retry_round(ctx: _Round, designs: list[Design], failing: list[int]) -> None:
    """Sample the failing slots again from their prompts; each slot keeps the new attempt."""
    convs = [designs[i].prompt for i in failing]
    seed = derive_seed(ctx.cfg.seed, ctx.cycle, "design-retry", ctx.turn)
    texts, gens, wall_s = _generate(ctx.cfg, ctx.backend, convs, seed)
    new = []
    for i, text, gen in zip(failing, texts, gens, strict=True):
        old = designs[i]
        d = Design(old.prompt_index, old.completion_index, old.skill, text, gen, prompt=old.prompt)
        d.pipeline["attempts"] = [*old.pipeline.get("attempts", []), _summary(old)]
        new.append(d)
        designs[i] = d
    _validate_new(ctx, new, wall_s > ctx.cfg.designer.pipeline.generation_budget_s)


def _repair_round(ctx: _Round, designs: list[Design], failing: list[int]) -> None:
    """Show each failing design its report and ask for a fix (inference only). A fix that
    passes validation and the gates becomes the slot's environment; the trained completion
    stays the first reply."""
    convs = [_repair_conversation(designs[i]) for i in failing]
    seed = derive_seed(ctx.cfg.seed, ctx.cycle, "design-repair", ctx.turn)
    texts, gens, wall_s = _generate(ctx.cfg, ctx.backend, convs, seed)
    fixes = []
    for i, conv, text, gen in zip(failing, convs, texts, gens, strict=True):
        old = designs[i]
        fixes.append(
            Design(old.prompt_index, old.completion_index, old.skill, text, gen, prompt=conv)
        )
    _validate_new(ctx, fixes, wall_s > ctx.cfg.designer.pipeline.generation_budget_s)
    for i, fix in zip(failing, fixes, strict=True):
        d = designs[i]
        d.pipeline.setdefault("repairs", []).append({**_summary(fix), "turn": ctx.turn})
        if not fix.valid:
            d.pipeline["_history"] = [*fix.prompt, {"role": "assistant", "content": fix.text}]
            d.pipeline["_last_failure"] = (fix.reason, _message(fix))
            continue
        d.pipeline["turn1"] = {"reason": d.reason, "message": _message(d)}
        d.source, d.class_name, d.hint, d.env_id = fix.source, fix.class_name, fix.hint, fix.env_id
        d.report, d.rejected, d.rejected_message = fix.report, None, None
        d.parse_error = d.parse_message = None
        d.repaired_turn = ctx.turn


def _repair_conversation(d: Design) -> list[Message]:
    """The design's prompt, its first reply, then the failure (and any earlier repair turns)."""
    history = d.pipeline.get("_history")
    reason, message = d.pipeline.get("_last_failure", (d.reason, _message(d)))
    if history is None:
        prompt = [m for m in d.prompt]
        if prompt and prompt[-1].get("role") == "assistant":  # a scaffold prefill
            prompt = prompt[:-1]
        history = [*prompt, {"role": "assistant", "content": d.text}]
    return [*history, judges.repair_message(reason, message)]


def _message(d: Design) -> str | None:
    if d.parse_error:
        return d.parse_message
    if d.rejected:
        return d.rejected_message
    return None if d.report is None else d.report.message


def _summary(d: Design) -> dict[str, Any]:
    return {"reason": d.reason, "message": _message(d), "text": d.text[:2000]}


class _Quiet:
    """A progress sink for the pipeline's inner validation (the cycle shows one bar)."""

    def add_task(self, *args: Any, **kwargs: Any) -> int:
        return 0

    def update(self, *args: Any, **kwargs: Any) -> None:
        return None


def self_judge(
    cfg: RunConfig,
    backend: Any,
    designs: Sequence[Design],
    played: Sequence[PlayedEnv],
    episodes: Sequence[Episode],
    cycle: int,
) -> dict[str, Any]:
    """The policy judges each valid design's environment from its code and one episode
    (a terminated one if any); a no marks ``judged_invalid``. Errors accept (fail open)."""
    j = cfg.designer.pipeline.self_judge
    if not j.enabled:
        return {}
    index = {p.entry.env_id: k for k, p in enumerate(played)}
    todo, convs = [], []
    for d in designs:
        k = index.get(d.env_id or "") if d.valid else None
        mine = [e for e in episodes if e.env_index == k] if k is not None else []
        if not mine:
            continue
        pick = next((e for e in mine if e.result.terminated), mine[0])
        todo.append(d)
        convs.append(judges.judge_messages(d.source or "", pick.result, j.max_turns_shown))
    params = SamplingParams(
        j.max_new_tokens, j.temperature, seed=derive_seed(cfg.seed, cycle, "judge")
    )
    verdicts = _ask(backend, convs, "policy", j, params) if convs else []
    for d, v in zip(todo, verdicts, strict=True):
        d.pipeline["self_judge"] = v.to_dict()
        d.judged_invalid = not v.accepted
    return {
        "self_judge/judged": len(verdicts),
        "self_judge/no": sum(not v.accepted for v in verdicts),
        "self_judge/errors": sum(v.status == "error" for v in verdicts),
    }
