"""Step 1: the designer writes environments (``group_size`` completions per prompt), each
parsed into source and hint (the hint from a separate pass unless ``hint_source: reply``).
Every record is a frozen :class:`~spade_train.steps.records.Design`; step 2 is
:mod:`spade_train.steps.validate`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import spade_corpus as sc
import spade_envs as se

from spade_train.backends.base import PolicyBackend
from spade_train.config import RunConfig
from spade_train.core import design as dz
from spade_train.core.pool import EnvPool, PoolEntry
from spade_train.core.scaffold import SCAFFOLD_PREFILL, SCAFFOLD_STOP, close_reply
from spade_train.core.skeleton import SKELETON_STOP, assemble
from spade_train.resources import Grounding, Progress
from spade_train.seeds import derive_seed
from spade_train.steps.records import Design
from spade_train.types import Message


def design_round(cfg: RunConfig, cycle: int) -> int:
    """The designer round a cycle belongs to (0 for cycles 1 .. ``regenerate_every``)."""
    return (cycle - 1) // cfg.designer.regenerate_every


def regenerates(cfg: RunConfig, cycle: int) -> bool:
    """Whether the designer writes a new set of environments at this cycle."""
    return (cycle - 1) % cfg.designer.regenerate_every == 0


def current_set(cfg: RunConfig, pool: EnvPool, cycle: int) -> list[PoolEntry]:
    """Between designer rounds: the environments the last round admitted that are still in
    the pool (upstream plays its game set again until the next regeneration)."""
    start = design_round(cfg, cycle) * cfg.designer.regenerate_every + 1
    return [e for e in pool if e.cycle_added == start and e.origin == "designer"]


def designer_prompts(
    cfg: RunConfig, cycle: int, memory: sc.EnvironmentMemory, grounding: Grounding
) -> tuple[list[list[Message]], list[str]]:
    """This round's designer prompts and their target skills (rotating through the skills
    once per designer round, as upstream's skills-per-regen window)."""
    d = cfg.designer
    prompts, skills = [], []
    for p in range(d.prompts_per_cycle):
        index = design_round(cfg, cycle) * d.prompts_per_cycle + p
        skill = d.skills[index % len(d.skills)]
        if d.grounding.enabled and d.grounding.mode == "document":
            snippets = [grounding.document(index=index, max_words=d.grounding.max_words).text]
        else:  # (no grounding: none)
            snippets = [s.text for s in grounding.sample(d.grounding.k, index=index)]
        shown = None
        if d.memory.enabled and len(memory):
            sample = memory.sample(
                d.memory.n_frontier,
                d.memory.n_easy,
                d.memory.n_hard,
                index=index,
                skill=skill if cfg.setting == "games" else None,
            )
            shown = {
                "frontier": sample.frontier,
                "too_easy": sample.too_easy,
                "too_hard": sample.too_hard,
            }
        prompts.append(
            dz.build_designer_messages(
                skill,
                setting=cfg.setting,
                grounding=snippets,
                grounding_kind=d.grounding.mode,
                memory=shown,
                max_turns=cfg.agent.max_turns,
                compact=d.compact,
                scaffold=d.scaffold,
                example_index=index // len(d.skills),
                skeleton=d.skeleton == "holes",
            )
        )
        skills.append(skill)
    return prompts, skills


def design(
    cfg: RunConfig,
    backend: PolicyBackend,
    cycle: int,
    memory: sc.EnvironmentMemory,
    grounding: Grounding,
    progress: Progress,
) -> list[Design]:
    """Step 1: ``group_size`` completions per prompt, parsed into source and hint."""
    d = cfg.designer
    prompts, skills = designer_prompts(cfg, cycle, memory, grounding)
    conversations = [m for m in prompts for _ in range(d.group_size)]
    task = progress.add_task(f"cycle {cycle}: design", total=len(conversations))
    params = d.sampling.to_params(derive_seed(cfg.seed, cycle, "design"))
    if d.scaffold:
        params = replace(params, stop=SKELETON_STOP if d.skeleton == "holes" else SCAFFOLD_STOP)
    generations = backend.generate(conversations, params)
    progress.update(task, completed=len(conversations))
    designs = []
    for i, gen in enumerate(generations):
        p, g = divmod(i, d.group_size)
        text = reply_text(cfg, conversations[i], gen.text)
        reply = Design(p, g, skills[p], text, gen, prompt=conversations[i])
        designs.append(parse_reply(reply, cfg))
    return finish(cfg, backend, cycle, designs)


def reply_text(cfg: RunConfig, conversation: Sequence[Message], generated: str) -> str:
    """A designer reply's whole text: with the scaffold, the prefill the prompt ended with
    and the policy's continuation (cut at a script entry point and closed); with the
    skeleton, the prefill (fence and template prefix), the hole and the template's suffix."""
    d = cfg.designer
    if not d.scaffold:
        return generated
    prefill = SCAFFOLD_PREFILL
    if conversation and conversation[-1].get("role") == "assistant":
        prefill = str(conversation[-1].get("content") or "")
    if d.skeleton == "holes":
        return assemble(prefill, generated)
    return prefill + close_reply(generated)


def finish(
    cfg: RunConfig, backend: PolicyBackend, cycle: int, designs: Sequence[Design]
) -> list[Design]:
    """Parsed replies completed: the hint pass (unless ``hint_source: reply``), then an
    environment id for each design that parsed."""
    out = list(designs)
    if cfg.designer.hint_source != "reply":
        todo = [i for i, x in enumerate(out) if x.parsed]
        hinted = write_hints(cfg, backend, cycle, [out[i] for i in todo])
        for i, x in zip(todo, hinted, strict=True):
            out[i] = x
    return [with_env_id(x, cycle) for x in out]


def with_env_id(x: Design, cycle: int) -> Design:
    """The design with its environment id, when it parsed."""
    if not x.parsed:
        return x
    digest = se.sha256_text(x.source or "")[:10]
    return replace(x, env_id=f"c{cycle:04d}_p{x.prompt_index}_g{x.completion_index}_{digest}")


def parse_reply(rec: Design, cfg: RunConfig) -> Design:
    """``rec`` with the source, class and hint of its text (or its parse error)."""
    try:
        parsed = dz.parse_designer_output(rec.text, max_source_chars=cfg.designer.max_source_chars)
    except dz.DesignParseError as exc:
        source = None
        if exc.code in ("missing_hint", "empty_hint") and cfg.designer.hint_source != "reply":
            source = exc.source
        if source is None:
            return replace(rec, parse_error=exc.code, parse_message=exc.message)
        return replace(rec, source=source)
    return replace(rec, source=parsed.source, class_name=parsed.class_name, hint=parsed.hint)


def write_hints(
    cfg: RunConfig, backend: PolicyBackend | None, cycle: int, designs: Sequence[Design]
) -> list[Design]:
    """The designs with the hints of a separate pass over each one's code (by the policy or
    an endpoint; never trained), each hint tried ``hint_retries`` times; a design left without
    one is ``missing_hint``. A failed endpoint call never aborts the cycle. (``backend`` may
    be None when the hints come from an endpoint, whose transport retries are the SDK's.)"""
    d = cfg.designer
    out = list(designs)
    todo = list(range(len(out)))
    for attempt in range(d.hint_retries):
        if not todo:
            break
        conversations = [dz.build_hint_messages(out[i].source or "", out[i].skill) for i in todo]
        texts: list[str | se.EndpointError | None]
        if d.hint_source == "policy":
            params = replace(
                d.sampling.to_params(derive_seed(cfg.seed, cycle, "hint", attempt)),
                max_new_tokens=d.hint_max_new_tokens,
                temperature=d.hint_temperature,
            )
            assert backend is not None, "the policy's hint pass needs the policy"
            texts = [g.text for g in backend.generate(conversations, params)]
        else:
            texts = list(endpoint_complete(cfg, conversations))
        failed = []
        for i, text in zip(todo, texts, strict=True):
            hint, problem = _hint_of(text)
            if hint is None:
                message = f"hint pass: {problem}"
                out[i] = replace(out[i], parse_error="missing_hint", parse_message=message)
                failed.append(i)
            else:
                out[i] = replace(out[i], hint=hint, parse_error=None, parse_message=None)
        todo = failed
    return out


def _hint_of(text: str | se.EndpointError | None) -> tuple[str | None, str | None]:
    """The hint in a hint pass's reply, or None and why there is none."""
    if isinstance(text, se.EndpointError):
        return None, f"endpoint: {text}"
    try:
        return dz.parse_hint_output(text or ""), None
    except dz.DesignParseError as exc:
        return None, exc.message


def endpoint_complete(
    cfg: RunConfig, conversations: Sequence[Sequence[Message]]
) -> list[str | se.EndpointError]:
    """One chat completion per conversation from the hint endpoint (``designer.hint_endpoint``:
    the server root or its ``/v1``); an :class:`spade_envs.EndpointError` where the call failed
    after the SDK's retries (connection, timeout, HTTP error: asked again by the caller, never
    raised)."""
    d = cfg.designer
    if not d.hint_endpoint:
        raise ValueError("designer.hint_source is 'endpoint' but designer.hint_endpoint is unset")
    try:
        endpoint = se.Endpoint(
            d.hint_endpoint,
            d.hint_model or "default",
            api_key_env=d.hint_api_key_env,
            timeout_s=d.hint_timeout_s,
        )
    except se.EndpointError as exc:
        return [exc for _ in conversations]
    with endpoint:
        return endpoint.try_many(conversations, temperature=d.hint_temperature)
