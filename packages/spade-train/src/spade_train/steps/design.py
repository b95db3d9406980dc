"""Steps 1–2: the designer writes environments, the sandbox validates them, the valid new ones
enter the pool (the fixed-procedural baseline draws its environments instead)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import spade_corpus as sc
import spade_envs as se
import spade_sandbox as ss

from spade_train.config import RunConfig
from spade_train.core import design as dz
from spade_train.core.pool import EnvPool, PoolEntry
from spade_train.core.scaffold import (
    SCAFFOLD_PREFILL,
    SCAFFOLD_STOP,
    close_reply,
    copies_of_references,
)
from spade_train.seeds import derive_seed
from spade_train.steps.records import Design
from spade_train.types import Message


def design_round(cfg: RunConfig, cycle: int) -> int:
    """The designer round a cycle belongs to (0 for cycles 1 .. ``regenerate_every``)."""
    return (cycle - 1) // cfg.designer.regenerate_every


def regenerates(cfg: RunConfig, cycle: int) -> bool:
    """Whether the designer writes a new set of environments at this cycle."""
    return cfg.mode == "spade" and (cycle - 1) % cfg.designer.regenerate_every == 0


def current_set(cfg: RunConfig, pool: EnvPool, cycle: int) -> list[PoolEntry]:
    """Between designer rounds: the environments the last round admitted that are still in
    the pool (upstream plays its game set again until the next regeneration)."""
    start = design_round(cfg, cycle) * cfg.designer.regenerate_every + 1
    return [e for e in pool if e.cycle_added == start and e.origin == "designer"]


def designer_prompts(
    cfg: RunConfig, cycle: int, memory: sc.EnvironmentMemory, grounding: Any
) -> tuple[list[list[Message]], list[str]]:
    """This round's designer prompts and their target skills (rotating through the skills
    once per designer round, as upstream's skills-per-regen window)."""
    d = cfg.designer
    prompts, skills = [], []
    for p in range(d.prompts_per_cycle):
        index = design_round(cfg, cycle) * d.prompts_per_cycle + p
        skill = d.skills[index % len(d.skills)]
        snippets = []
        if grounding is not None and d.grounding.mode == "document":
            snippets = [grounding.document(index=index, max_words=d.grounding.max_words).text]
        elif grounding is not None:
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
            )
        )
        skills.append(skill)
    return prompts, skills


def design(
    cfg: RunConfig,
    backend: Any,
    cycle: int,
    memory: sc.EnvironmentMemory,
    grounding: Any,
    progress: Any,
) -> list[Design]:
    """Step 1: ``group_size`` completions per prompt, parsed into source and hint."""
    d = cfg.designer
    prompts, skills = designer_prompts(cfg, cycle, memory, grounding)
    conversations = [m for m in prompts for _ in range(d.group_size)]
    task = progress.add_task(f"cycle {cycle}: design", total=len(conversations))
    params = d.sampling.to_params(derive_seed(cfg.seed, cycle, "design"))
    prefill = ""
    if d.scaffold:
        params = replace(params, stop=SCAFFOLD_STOP)
        prefill = SCAFFOLD_PREFILL
    generations = backend.generate(conversations, params)
    progress.update(task, completed=len(conversations))
    designs = []
    for i, gen in enumerate(generations):
        p, g = divmod(i, d.group_size)
        text = close_reply(gen.text) if d.scaffold else gen.text
        rec = Design(p, g, skills[p], prefill + text, gen, prompt=conversations[i])
        designs.append(parse_reply(rec, cfg))
    if d.hint_source != "reply":
        write_hints(cfg, backend, cycle, [x for x in designs if x.source is not None])
    for x in designs:
        if x.parsed:
            digest = se.sha256_text(x.source or "")[:10]
            x.env_id = f"c{cycle:04d}_p{x.prompt_index}_g{x.completion_index}_{digest}"
    return designs


def parse_reply(rec: Design, cfg: RunConfig) -> Design:
    """Set the source, class and hint of ``rec`` from its text (or its parse error)."""
    try:
        parsed = dz.parse_designer_output(rec.text, max_source_chars=cfg.designer.max_source_chars)
        rec.source, rec.class_name, rec.hint = parsed.source, parsed.class_name, parsed.hint
    except dz.DesignParseError as exc:
        if exc.code in ("missing_hint", "empty_hint") and cfg.designer.hint_source != "reply":
            rec.source = exc.source
        if rec.source is None:
            rec.parse_error, rec.parse_message = exc.code, exc.message
    return rec


def write_hints(cfg: RunConfig, backend: Any, cycle: int, designs: Sequence[Design]) -> None:
    """The separate hint pass over each design's code (by the policy or an endpoint; never
    trained), each hint tried ``hint_retries`` times; a design left without one is
    ``missing_hint``. A failed endpoint call never aborts the cycle."""
    d = cfg.designer
    todo = list(designs)
    for attempt in range(d.hint_retries):
        if not todo:
            return
        conversations = [dz.build_hint_messages(x.source or "", x.skill) for x in todo]
        if d.hint_source == "policy":
            params = replace(
                d.sampling.to_params(derive_seed(cfg.seed, cycle, "hint", attempt)),
                max_new_tokens=d.hint_max_new_tokens,
                temperature=d.hint_temperature,
            )
            texts: list[str | None] = [g.text for g in backend.generate(conversations, params)]
        else:
            texts = endpoint_complete(cfg, conversations)
        failed = []
        for x, text in zip(todo, texts, strict=True):
            try:
                x.hint = dz.parse_hint_output(text or "")
                x.parse_error = x.parse_message = None
            except dz.DesignParseError as exc:
                x.parse_error, x.parse_message = "missing_hint", f"hint pass: {exc.message}"
                failed.append(x)
        todo = failed
        if todo and d.hint_source == "endpoint" and attempt + 1 < d.hint_retries:
            time.sleep(min(8.0, 0.5 * 2**attempt))  # back off before asking again


def endpoint_complete(
    cfg: RunConfig, conversations: Sequence[Sequence[Message]]
) -> list[str | None]:
    """One chat completion per conversation from the hint endpoint; ``None`` where the call
    failed (connection, timeout, HTTP error: retried by the caller, never raised)."""
    import os

    import httpx

    d = cfg.designer
    if not d.hint_endpoint:
        raise ValueError("designer.hint_source is 'endpoint' but designer.hint_endpoint is unset")
    key = os.environ.get(d.hint_api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    texts: list[str | None] = []
    with httpx.Client(
        base_url=d.hint_endpoint.rstrip("/"), timeout=d.hint_timeout_s, headers=headers
    ) as client:
        for messages in conversations:
            body = {
                "model": d.hint_model,
                "messages": list(messages),
                "temperature": d.hint_temperature,
            }
            try:
                r = client.post("/v1/chat/completions", json=body)
                r.raise_for_status()
                texts.append(r.json()["choices"][0]["message"]["content"] or "")
            except (httpx.HTTPError, KeyError, IndexError, ValueError):
                texts.append(None)
    return texts


def validate(
    cfg: RunConfig,
    designs: Sequence[Design],
    cycle: int,
    sandbox: Any,
    sandbox_config: ss.SandboxConfig,
    progress: Any,
) -> None:
    """Step 2: every parsed design validated in the sandbox; the report is set on it."""
    todo = [x for x in designs if x.parsed]
    task = progress.add_task(f"cycle {cycle}: validate", total=max(1, len(todo)))
    skill_arg = se.TOOL_USE if cfg.setting == "tool-use" else None
    items = [
        sc.ValidationItem(
            x.source or "", x.hint or "", x.env_id, skill_arg or x.skill, cfg.agent.max_turns
        )
        for x in todo
    ]
    seeds = tuple(range(cfg.validation.seeds))
    reports: list[sc.ValidationReport] = []
    if items and cfg.validation.executor == "ray":  # sandbox actors: same reports, same order
        reports = sandbox.validate_many(items, seeds=seeds, config=sandbox_config)
    elif items:
        workers = cfg.validation.workers
        reports = sc.validate_many(
            items, workers=workers, progress=False, pool=sandbox, seeds=seeds
        )
    progress.update(task, completed=max(1, len(todo)))
    for x, report in zip(todo, reports, strict=True):
        x.report = report


def mark_copies(designs: Sequence[Design]) -> int:
    """Mark each valid design that copies a scaffold example or a shipped corpus game
    (``copy_of``); returns how many valid designs are new."""
    valid = [x for x in designs if x.valid]
    copies = copies_of_references([(x.env_id or "", x.source or "") for x in valid])
    for x in valid:
        x.copy_of = copies.get(x.env_id or "")
    return sum(x.copy_of is None for x in valid)


def admit_designs(
    cfg: RunConfig,
    designs: Sequence[Design],
    pool: EnvPool,
    cycle: int,
    sandbox_config: ss.SandboxConfig,
) -> list[PoolEntry]:
    """Valid designs enter the pool (a source or id it already holds is a ``duplicate``)."""
    accepted = []
    for x in designs:
        if not x.valid or x.report is None:
            continue
        class_name = x.report.checks.get("class_name") or x.class_name or ""
        tools = None
        if cfg.setting == "tool-use":
            tools = read_tools(x.source or "", class_name, sandbox_config)
        entry = PoolEntry(
            env_id=x.env_id or "",
            source=x.source or "",
            class_name=class_name,
            hint=x.hint,
            skill=x.skill,
            max_turns=cfg.agent.max_turns,
            cycle_added=cycle,
            origin="designer",
            tools=tools,
        )
        if pool.add(entry) is not None:
            accepted.append(entry)
        else:
            x.mark_duplicate()
    return accepted


def read_tools(
    source: str, class_name: str, sandbox_config: ss.SandboxConfig
) -> list[dict[str, Any]] | None:
    """The declared tools of a validated tool-use environment (read in the sandbox: a
    sandboxed environment exposes no attributes to the runner)."""
    try:
        tools, _domain = sc.read_tools(source, class_name, sandbox_config)
    except se.ContractError:
        return None
    return [dict(t) for t in tools] if isinstance(tools, list) and tools else None


def procedural_envs(cfg: RunConfig, curriculum: Any, cycle: int) -> list[PoolEntry]:
    """The fixed-procedural baseline's environments for this cycle (not pooled)."""
    return [
        PoolEntry(
            env_id=f"c{cycle:04d}_proc{i}_{d.origin}",
            source=d.source,
            class_name=d.class_name,
            hint=d.hint,
            skill=d.skill,
            max_turns=cfg.agent.max_turns,
            cycle_added=cycle,
            origin=d.origin,
        )
        for i, d in enumerate(curriculum.propose(cfg.agent.envs_per_cycle))
    ]
