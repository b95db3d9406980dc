"""Step 2: each design judged, over frozen records (a :class:`Design` and its :class:`Verdict`).

:func:`validate` runs the stages in this order, each optional but the first:

1. **sandbox validation** — every parsed design through spade-corpus's validator, in the
   sandbox (a warm pool or sandbox actors), ``validation.seeds`` seeds;
2. **reset gate** — an environment whose success criteria raise on the state ``reset`` builds,
   at every tested seed, is rejected (``reset_gate``); run in a fresh sandbox;
3. **LLM validator** — the policy or an OpenAI-compatible endpoint reads the code and answers
   ``\\boxed{yes|no}``; no is ``llm_validator_rejected``; errors accept (fail open), counted;
4. **retries** (``max_attempts``) — a failed slot is sampled again from the same prompt; only
   its last attempt is kept and trained, earlier ones are listed in the evidence's
   ``attempts``; **or repair turns** (``repair_turns``) — the failing report is shown to the
   designer, whose reply (inference only) is validated and gated again; a repaired environment
   replaces the slot's environment, while the trained completion stays the first reply;
   **budgets** — a generation round slower than ``generation_budget_s`` fails its attempts
   (``generation_timeout``); no round starts after ``cycle_budget_s`` (``budget_exhausted``);
5. **admission** — the valid environments enter the pool (one it already holds is a
   ``duplicate``), and each valid copy of a shipped game is marked (``copy_of``;
   :mod:`spade_train.steps.admit`).

:func:`self_judge` runs after play: the policy judges each new environment from its code and
one episode; a no costs the designer ``self_judge.penalty``. Each returns its metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import spade_corpus as sc
import spade_envs as se
import spade_sandbox as ss

from spade_train.backends.base import PolicyBackend
from spade_train.config import LLMValidatorConfig, RunConfig
from spade_train.core import hack_review, judges
from spade_train.core.pool import EnvPool, PoolEntry
from spade_train.core.scaffold import SCAFFOLD_STOP
from spade_train.core.skeleton import SKELETON_STOP
from spade_train.resources import QUIET, DesignValidator, Progress
from spade_train.seeds import derive_seed
from spade_train.steps import admit as s_admit
from spade_train.steps import design as s_design
from spade_train.steps.records import (
    Attempt,
    Design,
    Episode,
    PlayedEnv,
    Validated,
    Verdict,
)
from spade_train.types import Generation, Message, Metrics, SamplingParams

log = logging.getLogger("spade_train.pipeline")


@dataclass(frozen=True)
class Step2:
    """Step 2's output: every slot with its verdict, the environments that entered the pool,
    and the metrics (``design/*``)."""

    slots: list[Validated]
    new_envs: list[PoolEntry]
    metrics: Metrics


@dataclass(frozen=True)
class Judging:
    """What the stages of step 2 use besides the designs."""

    cfg: RunConfig
    backend: PolicyBackend
    cycle: int
    checker: DesignValidator
    sandbox_config: ss.SandboxConfig


def validate(
    ctx: Judging,
    designs: Sequence[Design],
    pool: EnvPool,
    progress: Progress,
    started: float,
) -> Step2:
    """Step 2 over the cycle's designs (see the module docstring); ``started`` is when the
    cycle began (``cycle_budget_s``)."""
    slots = check_in_sandbox(ctx, designs, progress)
    slots, metrics = refine(ctx, slots, started)
    slots, new_envs = s_admit.admit(ctx.cfg, slots, pool, ctx.cycle, ctx.sandbox_config)
    metrics.update(s_admit.design_metrics(slots))
    slots, new = s_admit.mark_copies(slots)
    metrics["design/new"] = new
    return Step2(slots, new_envs, metrics)


def check_in_sandbox(
    ctx: Judging, designs: Sequence[Design], progress: Progress
) -> list[Validated]:
    """Every parsed design validated in the sandbox; its report is its verdict's."""
    cfg = ctx.cfg
    todo = [i for i, x in enumerate(designs) if x.parsed]
    task = progress.add_task(f"cycle {ctx.cycle}: validate", total=max(1, len(todo)))
    skill_arg = se.TOOL_USE if cfg.setting == "tool-use" else None
    items = [
        sc.ValidationItem(
            x.source or "", x.hint or "", x.env_id, skill_arg or x.skill, cfg.agent.max_turns
        )
        for x in (designs[i] for i in todo)
    ]
    # Drawn per cycle from the run's seed: no fixed list the designer could learn; the run
    # stays reproducible, and each report records its seeds.
    seeds = se.draw_seeds(derive_seed(cfg.seed, "validation", ctx.cycle), cfg.validation.seeds)
    reports = ctx.checker.validate(items, seeds) if items else []
    progress.update(task, completed=max(1, len(todo)))
    by_index = dict(zip(todo, reports, strict=True))
    return [Validated(x, Verdict(report=by_index.get(i))) for i, x in enumerate(designs)]


# -- the gates ---------------------------------------------------------------------------------


def gate(ctx: Judging, slots: Sequence[Validated], turn: int = 0) -> tuple[list[Validated], int]:
    """The reset gate, then the LLM validator, on the slots the sandbox passed; the slots and
    how many validator calls failed (accepted: fail open)."""
    p = ctx.cfg.designer.pipeline
    out = list(slots)
    todo = [i for i, s in enumerate(out) if s.valid]
    if p.reset_gate.enabled and not (p.reset_gate.skip_first_cycle and ctx.cycle == 1):
        for i in todo:
            out[i] = _reset_gate(ctx, out[i])
    todo = [i for i in todo if out[i].valid]
    errors = 0
    if p.validator.enabled and todo:
        verdicts = ask_validator(ctx, [out[i] for i in todo], turn)
        for i, v in zip(todo, verdicts, strict=True):
            errors += v.status == "error"
            out[i] = _with_evidence(out[i], validator=v)
            if not v.accepted:
                out[i] = _reject(out[i], "llm_validator_rejected", v.text[:200])
    return out, errors


def _reset_gate(ctx: Judging, s: Validated) -> Validated:
    report = s.verdict.report
    class_name = (report.checks.get("class_name") if report else None) or ""
    p = ctx.cfg.designer.pipeline
    result = judges.reset_gate(
        s.env.source or "",
        class_name or s.env.class_name or "",
        ctx.cfg.agent.max_turns,
        p.reset_gate.seeds,
        ctx.sandbox_config,
    )
    s = _with_evidence(s, reset_gate=result)
    if result.rejected:
        s = _reject(s, "reset_gate", f"criteria raised at all {result.checked} seeds")
    return s


def _reject(s: Validated, code: str, message: str) -> Validated:
    return replace(s, verdict=replace(s.verdict, rejected=code, rejected_message=message))


def _with_evidence(
    s: Validated,
    *,
    reset_gate: judges.GateResult | None = None,
    validator: judges.Verdict | None = None,
    self_judge: judges.Verdict | None = None,
) -> Validated:
    ev = s.verdict.evidence
    ev = replace(
        ev,
        reset_gate=reset_gate or ev.reset_gate,
        validator=validator or ev.validator,
        self_judge=self_judge or ev.self_judge,
    )
    return replace(s, verdict=replace(s.verdict, evidence=ev))


def ask_validator(ctx: Judging, slots: Sequence[Validated], turn: int) -> list[judges.Verdict]:
    """One verdict per slot from the policy or the endpoint; errors become ``error``."""
    cfg = ctx.cfg
    v = cfg.designer.pipeline.validator
    convs = [_validator_conversation(cfg, s) for s in slots]
    if v.judge == "endpoint":
        return _ask_endpoint(v, convs)
    seed = derive_seed(cfg.seed, ctx.cycle, "validator", turn)
    return _ask_policy(
        ctx.backend, convs, SamplingParams(v.max_new_tokens, v.temperature, seed=seed)
    )


def _validator_conversation(cfg: RunConfig, s: Validated) -> list[Message]:
    prompt = cfg.designer.pipeline.validator.prompt
    d = s.env
    if prompt == "reward-hack":
        evidence = hack_review.evidence_lines(s.verdict.report)
        return hack_review.hack_review_messages(d.source or "", d.hint or "", evidence)
    return judges.validator_messages(d.source or "", cfg.setting, prompt)


def _ask_endpoint(v: LLMValidatorConfig, convs: list[list[Message]]) -> list[judges.Verdict]:
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


def _ask_policy(
    backend: PolicyBackend, convs: list[list[Message]], params: SamplingParams
) -> list[judges.Verdict]:
    try:
        texts = [g.text for g in backend.generate(convs, params)]
    except Exception as exc:  # noqa: BLE001 - a judge's failure accepts (fail open)
        return [judges.error_verdict(exc) for _ in convs]
    return [judges.parse_verdict(t) for t in texts]


# -- retries and repairs ----------------------------------------------------------------------


@dataclass
class _Counts:
    attempts: int
    repair_turns: int = 0
    validator_errors: int = 0


def refine(
    ctx: Judging, slots: Sequence[Validated], started: float
) -> tuple[list[Validated], Metrics]:
    """Gates, then retries or repairs; the slots and the metrics."""
    p = ctx.cfg.designer.pipeline
    out, errors = gate(ctx, slots)
    counts = _Counts(len(out), validator_errors=errors)
    history: dict[int, _Failed] = {}  # repair turns so far of each slot still failing
    rounds = p.repair_turns if p.repair_turns else p.max_attempts - 1
    for turn in range(1, rounds + 1):
        failing = [i for i, s in enumerate(out) if _fixable(s)]
        if not failing:
            break
        if time.perf_counter() - started >= p.cycle_budget_s:
            for i in failing:
                ev = replace(out[i].verdict.evidence, budget_exhausted=True)
                out[i] = replace(out[i], verdict=replace(out[i].verdict, evidence=ev))
            break
        if p.repair_turns:
            out = _repair_round(ctx, out, failing, turn, history, counts)
            counts.repair_turns += len(failing)
        else:
            out = _retry_round(ctx, out, failing, turn, counts)
            counts.attempts += len(failing)
    if counts.validator_errors:  # once per cycle, however many calls failed
        log.warning(
            "cycle %d: the LLM validator could not be asked %d time(s); those environments "
            "were accepted (fail open)",
            ctx.cycle,
            counts.validator_errors,
        )
    return out, {
        "design/attempts": counts.attempts,
        "design/repair_turns": counts.repair_turns,
        "design/repaired": sum(s.verdict.repaired_turn is not None for s in out),
        "design/budget_exhausted": sum(s.verdict.evidence.budget_exhausted for s in out),
        "design/validator_errors": counts.validator_errors,
    }


def _fixable(s: Validated) -> bool:
    report = s.verdict.report
    return not s.valid and not (report is not None and report.infrastructure)


def generate_replies(
    cfg: RunConfig, backend: PolicyBackend, convs: list[list[Message]], seed: int
) -> tuple[list[str], list[Generation], float]:
    """Designer replies for ``convs`` with the design step's sampling; the round's seconds."""
    params = cfg.designer.sampling.to_params(seed)
    scaffolded = bool(cfg.designer.scaffold and convs and convs[0][-1].get("role") == "assistant")
    if scaffolded:
        holes = cfg.designer.skeleton == "holes"
        params = replace(params, stop=SKELETON_STOP if holes else SCAFFOLD_STOP)
    t = time.perf_counter()
    gens = backend.generate(convs, params)
    texts = [
        s_design.reply_text(cfg, c, g.text) if scaffolded else g.text
        for c, g in zip(convs, gens, strict=True)
    ]
    return texts, list(gens), time.perf_counter() - t


def _judge_new(
    ctx: Judging, new: list[Design], slow: bool, turn: int, counts: _Counts
) -> list[Validated]:
    """Parse, hint, id, sandbox-validate and gate new replies (a slow round fails them)."""
    parsed = [s_design.parse_reply(d, ctx.cfg) for d in new]
    if slow:
        parsed = [
            replace(d, parse_error="generation_timeout", parse_message="generation round too slow")
            if d.parse_error is None
            else d
            for d in parsed
        ]
    ready = s_design.finish(ctx.cfg, ctx.backend, ctx.cycle, parsed)
    slots, errors = gate(ctx, check_in_sandbox(ctx, ready, QUIET), turn)
    counts.validator_errors += errors
    return slots


def _retry_round(
    ctx: Judging, slots: list[Validated], failing: list[int], turn: int, counts: _Counts
) -> list[Validated]:
    """Sample the failing slots again from their prompts; each slot keeps the new attempt."""
    cfg = ctx.cfg
    convs = [slots[i].design.prompt for i in failing]
    seed = derive_seed(cfg.seed, ctx.cycle, "design-retry", turn)
    texts, gens, wall_s = generate_replies(cfg, ctx.backend, convs, seed)
    new = []
    for i, text, gen in zip(failing, texts, gens, strict=True):
        old = slots[i].design
        new.append(
            Design(old.prompt_index, old.completion_index, old.skill, text, gen, prompt=old.prompt)
        )
    judged = _judge_new(ctx, new, wall_s > cfg.designer.pipeline.generation_budget_s, turn, counts)
    out = list(slots)
    for i, s in zip(failing, judged, strict=True):
        attempts = (*out[i].verdict.evidence.attempts, _summary(out[i]))
        ev = replace(s.verdict.evidence, attempts=attempts)
        out[i] = replace(s, verdict=replace(s.verdict, evidence=ev))
    return out


@dataclass(frozen=True)
class _Failed:
    """A slot's repair conversation so far and its last failure."""

    history: list[Message]
    reason: str | None
    message: str | None


def _repair_round(
    ctx: Judging,
    slots: list[Validated],
    failing: list[int],
    turn: int,
    history: dict[int, _Failed],
    counts: _Counts,
) -> list[Validated]:
    """Show each failing slot its report and ask for a fix (inference only). A fix that
    passes validation and the gates becomes the slot's environment; the trained completion
    stays the first reply."""
    cfg = ctx.cfg
    convs = [_repair_conversation(slots[i], history.get(i)) for i in failing]
    seed = derive_seed(cfg.seed, ctx.cycle, "design-repair", turn)
    texts, gens, wall_s = generate_replies(cfg, ctx.backend, convs, seed)
    fixes = []
    for i, conv, text, gen in zip(failing, convs, texts, gens, strict=True):
        old = slots[i].design
        fixes.append(
            Design(old.prompt_index, old.completion_index, old.skill, text, gen, prompt=conv)
        )
    judged = _judge_new(
        ctx, fixes, wall_s > cfg.designer.pipeline.generation_budget_s, turn, counts
    )
    out = list(slots)
    for i, fix in zip(failing, judged, strict=True):
        s = out[i]
        repairs = (*s.verdict.evidence.repairs, replace(_summary(fix), turn=turn))
        if not fix.valid:
            said = [*fix.design.prompt, {"role": "assistant", "content": fix.design.text}]
            history[i] = _Failed(said, fix.reason, fix.message)
            ev = replace(s.verdict.evidence, repairs=repairs)
            out[i] = replace(s, verdict=replace(s.verdict, evidence=ev))
            continue
        ev = replace(s.verdict.evidence, repairs=repairs, turn1=(s.reason, s.message))
        kept = Verdict(
            report=fix.verdict.report, repair=fix.design, repaired_turn=turn, evidence=ev
        )
        out[i] = replace(s, verdict=kept)
    return out


def _repair_conversation(s: Validated, failed: _Failed | None) -> list[Message]:
    """The slot's prompt, its first reply, then the failure (and any earlier repair turns)."""
    if failed is None:
        prompt = list(s.design.prompt)
        if prompt and prompt[-1].get("role") == "assistant":  # a scaffold prefill
            prompt = prompt[:-1]
        history = [*prompt, {"role": "assistant", "content": s.design.text}]
        return [*history, judges.repair_message(s.reason, s.message)]
    return [*failed.history, judges.repair_message(failed.reason, failed.message)]


def _summary(s: Validated) -> Attempt:
    return Attempt(s.reason, s.message, s.design.text[:2000])


# -- after play ---------------------------------------------------------------------------------


def self_judge(
    ctx: Judging,
    slots: Sequence[Validated],
    played: Sequence[PlayedEnv],
    episodes: Sequence[Episode],
) -> tuple[list[Validated], Metrics]:
    """The policy judges each valid slot's environment from its code and one episode (a
    terminated one if any); a no marks ``judged_invalid``. Errors accept (fail open)."""
    cfg = ctx.cfg
    j = cfg.designer.pipeline.self_judge
    if not j.enabled:
        return list(slots), {}
    index = {p.entry.env_id: k for k, p in enumerate(played)}
    todo, convs = [], []
    for n, s in enumerate(slots):
        k = index.get(s.env_id or "") if s.valid else None
        mine = [e for e in episodes if e.env_index == k] if k is not None else []
        if not mine:
            continue
        pick = next((e for e in mine if e.result.terminated), mine[0])
        todo.append(n)
        convs.append(judges.judge_messages(s.env.source or "", pick.result, j.max_turns_shown))
    params = SamplingParams(
        j.max_new_tokens, j.temperature, seed=derive_seed(cfg.seed, ctx.cycle, "judge")
    )
    verdicts = _ask_policy(ctx.backend, convs, params) if convs else []
    out = list(slots)
    for n, v in zip(todo, verdicts, strict=True):
        s = _with_evidence(out[n], self_judge=v)
        out[n] = replace(s, verdict=replace(s.verdict, judged_invalid=not v.accepted))
    return out, {
        "self_judge/judged": len(verdicts),
        "self_judge/no": sum(not v.accepted for v in verdicts),
        "self_judge/errors": sum(v.status == "error" for v in verdicts),
    }
