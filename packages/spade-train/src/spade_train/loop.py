"""The self-play loop: design → validate → play → reward → advantage → update, cycle after cycle.

:class:`SelfPlay` runs the six steps of DESIGN.md against any :class:`PolicyBackend`. The
baselines reuse it: ``mode: fixed-static`` skips design and trains the agent on the static
corpus; ``mode: fixed-procedural`` replaces the designer by hand-written procedural generators
whose difficulty follows the agent's win rate (a dependency-free CPU smoke baseline);
``mode: fixed-rlve`` plays RLVE's environments with RLVE's sliding-window difficulty
(:mod:`spade_train.core.rlve_source`).

Everything a cycle produces is written to the run directory (see :mod:`spade_train.rundir`);
after each cycle a checkpoint (policy, optimizer, RNG states, pool, memory, counters) is
committed atomically, so ``spade resume`` continues exactly where the last one left off.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import spade_corpus as sc
import spade_envs as se
import spade_sandbox as ss

from spade_train.backends.base import PolicyBackend, make_backend, submit_train_step
from spade_train.config import RunConfig, dump_config
from spade_train.core import advantages as adv
from spade_train.core import design as dz
from spade_train.core import rewards as rw
from spade_train.core.pool import EnvPool, PoolEntry
from spade_train.play import PolicyAgent, episode_samples, samples_from_generations
from spade_train.plots import write_plots
from spade_train.rundir import RunDir, atomic_write_json, write_jsonl
from spade_train.types import Generation, SamplingParams, TrainSample

STAGES = ("design", "validate", "play", "update")


def _seed(*parts: Any) -> int:
    """A 31-bit seed derived from ``parts`` (stable across processes and Python versions)."""
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


@dataclass
class DesignRecord:
    """One designer completion and what became of it."""

    prompt_index: int
    completion_index: int
    skill: str
    text: str
    generation: Generation
    env_id: str | None = None
    source: str | None = None
    class_name: str | None = None
    hint: str | None = None
    parse_error: str | None = None
    parse_message: str | None = None
    report: dict[str, Any] | None = None

    @property
    def valid(self) -> bool:
        return bool(self.report and self.report.get("valid"))

    @property
    def reason(self) -> str | None:
        if self.parse_error:
            return self.parse_error
        return None if self.report is None else self.report.get("reason")

    def to_row(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt_index,
            "completion": self.completion_index,
            "skill": self.skill,
            "env_id": self.env_id,
            "valid": self.valid,
            "reason": self.reason,
            "parse_message": self.parse_message,
            "hint": self.hint,
            "text": self.text,
            "report": self.report,
            "completion_tokens": len(self.generation.completion_ids),
        }


@dataclass
class PlayedEnv:
    entry: PoolEntry
    hinted: list[float] = field(default_factory=list)
    unhinted: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class SelfPlay:
    """One training run. ``backend`` may be given (tests); otherwise it is made from the config."""

    def __init__(
        self,
        cfg: RunConfig,
        run_dir: str | Path,
        backend: PolicyBackend | None = None,
        *,
        progress: bool | None = None,
        log: Callable[[str], None] | None = None,
    ):
        self.cfg = cfg
        if cfg.mode == "fixed-static":
            self._corpus_path()  # a missing corpus is one line, before anything is created
        self.run = RunDir(run_dir).create()
        self.show_progress = cfg.logging.progress if progress is None else progress
        self.log = log or (lambda _msg: None)
        self.backend = backend
        self._own_backend = backend is None  # made here, so closed here
        self._backend_closed = False
        self.cycle = 0
        self.rng = random.Random(cfg.seed)
        self.pool = EnvPool(
            capacity=cfg.pool.capacity,
            retire_win_rate=cfg.pool.retire_win_rate,
            min_plays=cfg.pool.min_plays,
            sampling=cfg.pool.sampling,
            seed=cfg.seed,
        )
        self.memory = sc.EnvironmentMemory(capacity=cfg.designer.memory.capacity)
        self.delayed = rw.DelayedRewards(cfg.reward.delay_cycles)
        self.curriculum = None
        if cfg.mode == "fixed-procedural":
            from spade_train.core.procedural import ProceduralCurriculum

            self.curriculum = ProceduralCurriculum(
                cfg.fixed.generators, target=tuple(cfg.fixed.target_win_rate), seed=cfg.seed
            )
        elif cfg.mode == "fixed-rlve":
            from spade_train.core.rlve_source import RlveSource

            self.curriculum = RlveSource(cfg.rlve, seed=cfg.seed, max_turns=cfg.agent.max_turns)
        self.grounding = None
        if cfg.mode == "spade" and cfg.designer.grounding.enabled:
            self.grounding = sc.GroundingSampler(
                cfg.designer.grounding.corpus_file,
                field=cfg.designer.grounding.field,
                max_chars=cfg.designer.grounding.max_chars,
                min_chars=min(80, cfg.designer.grounding.max_chars),
                seed=cfg.seed,
            )
        limits = ss.Limits(call_wall_s=cfg.validation.timeout_s)
        self.sandbox_config = ss.SandboxConfig(backend=cfg.validation.sandbox, limits=limits)
        if cfg.mode == "fixed-static":  # no designer output here: a released corpus may use numpy
            self.sandbox_config = se.compat_sandbox_config(self.sandbox_config)
        self.sandbox = None
        self.ray_sandbox: Any = None
        self.writers: list[Any] = []
        # overlap: the last cycle's metrics row and batch, whose update runs beside the next
        # cycle (``wait`` is set once it is submitted)
        self.pending: _Pending | None = None
        self._batch: list[TrainSample] = []

    # -- setup ------------------------------------------------------------------------------
    def _open(self) -> None:
        if self.backend is None or self._backend_closed:
            self._backend_closed = False
            self.log(f"loading policy {self.cfg.backend.model} ({self.cfg.backend.name} backend)")
            self.backend = make_backend(
                self.cfg.backend.name, **self.cfg.backend.backend_kwargs(self.cfg.seed)
            )
        if self.sandbox is None and self.cfg.mode != "fixed-rlve":  # RLVE runs in this process
            self.sandbox = ss.SandboxPool(self.sandbox_config, size=self.cfg.validation.workers)
        on_ray = "ray" in (self.cfg.validation.executor, self.cfg.agent.executor)
        if on_ray and self.ray_sandbox is None:
            from spade_train.backends.ray import RaySandboxPool

            self.ray_sandbox = RaySandboxPool(
                num_workers=self.cfg.validation.workers,
                call_timeout_s=60.0 + 20.0 * self.cfg.validation.timeout_s,
                sandbox_config=self.sandbox_config,
            )
        if self.cfg.logging.wandb or self.cfg.logging.tensorboard:
            from spade_train.loggers import open_loggers

            self.writers = open_loggers(self.cfg, self.run.root)

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        if self.ray_sandbox is not None:
            self.ray_sandbox.close()
            self.ray_sandbox = None
        for writer in self.writers:
            writer.close()
        self.writers = []
        if self._own_backend and self.backend is not None and not self._backend_closed:
            self.backend.close()  # kept as an attribute (inspectable); reopened by _open
            self._backend_closed = True

    def seed_pool_from_corpus(self) -> int:
        """Put the static corpus's environments (split ``fixed.split``) into the pool."""
        path = self._corpus_path()
        corpus = se.load_corpus(path)
        compat = corpus.mode == "compat"  # written for the released code: run as it ran them
        added = 0
        for rec in corpus.records:
            if rec.split != self.cfg.fixed.split:
                continue
            tools = rec.extra.get("tools") if self.cfg.setting == "tool-use" else None
            entry = PoolEntry(
                env_id=rec.id,
                source=se.compat_source(corpus.source(rec.id)) if compat else corpus.source(rec.id),
                class_name=rec.class_name,
                hint=rec.hint,
                # tool-use environments are grouped by domain (their skill is "ToolUse")
                skill=str(rec.extra.get("domain") or rec.skill) if tools else rec.skill,
                # released games keep their own designed turn limit, within the agent's budget
                max_turns=min(
                    (se.designed_max_turns(corpus.source(rec.id)) if compat else None)
                    or rec.max_turns,
                    self.cfg.agent.max_turns,
                ),
                cycle_added=0,
                origin=rec.origin,
                tools=tools,
            )
            added += self.pool.add(entry) is not None
        return added

    def _corpus_path(self) -> Path:
        name = self.cfg.fixed.corpus
        if name == "example":
            if self.cfg.setting == "tool-use":
                return Path(se.tool_use_corpus_path())
            return Path(se.example_corpus_path())
        if "${" in name or not Path(name).exists():
            raise FileNotFoundError(corpus_missing(name))
        return Path(name)

    # -- the cycle --------------------------------------------------------------------------
    def train(self) -> list[dict[str, Any]]:
        """Run (or continue) until ``cycles`` cycles are done; returns all metrics rows."""
        self._open()
        try:
            if self.cycle == 0:
                self.run.config.write_text(dump_config(self.cfg), encoding="utf-8")
                if self.cfg.mode in ("spade", "fixed-static"):
                    n = self.seed_pool_from_corpus()
                    self.log(f"pool seeded with {n} environments from {self._corpus_path()}")
            with _Progress(self.show_progress) as progress:
                if self.pending is not None and self.pending.wait is None:
                    self._submit_pending()  # resumed with an update still to run
                while self.cycle < self.cfg.cycles:
                    row = self.run_cycle(self.cycle + 1, progress)
                    self.cycle += 1
                    if not self.cfg.overlap:
                        self.run.append_metrics(row)
                        self.checkpoint()
                        self._report([row])
                        continue
                    # overlap: finish the previous cycle's update, checkpoint, start this one's
                    done = [self._join_pending(progress)] if self.pending is not None else []
                    self.pending = _Pending(row, self._batch)
                    if self.cycle == self.cfg.cycles:  # the last update is waited for
                        self._submit_pending()
                        done.append(self._join_pending(progress))
                    for r in done:
                        self.run.append_metrics(r)
                    self.checkpoint()
                    if self.pending is not None:
                        self._submit_pending()
                    self._report(done)
        finally:
            self.close()
        return self.run.read_metrics()

    def _report(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            write_plots(self.run.read_metrics(), self.run.plots)
        for row in rows:
            for writer in self.writers:
                writer.log(row, int(row["cycle"]))
            self.log(_summary_line(row))

    def _submit_pending(self) -> None:
        pending = self.pending
        assert pending is not None
        if pending.batch:
            pending.wait = submit_train_step(self.backend, pending.batch)
        else:
            pending.wait = lambda: {}  # nothing to train this cycle

    def _join_pending(self, progress: Any) -> dict[str, Any]:
        """Wait for the pending update, publish its weights; its cycle's finished row."""
        pending = self.pending
        assert pending is not None and pending.wait is not None
        row = pending.row
        task = progress.add_task(f"cycle {row['cycle']}: update (overlapped)", total=1)
        t = time.perf_counter()
        metrics = pending.wait()
        if pending.batch:
            self.backend.publish_weights()
            row.update({f"train/{k}": v for k, v in metrics.items()})
        row["time/update_wait_s"] = round(time.perf_counter() - t, 3)
        progress.update(task, completed=1)
        self.pending = None
        return row

    def run_cycle(self, cycle: int, progress: Any) -> dict[str, Any]:
        cfg = self.cfg
        started = time.perf_counter()
        times: dict[str, float] = {}
        row: dict[str, Any] = {"cycle": cycle}

        # 1-2. design and validate ---------------------------------------------------------
        t = time.perf_counter()
        designs: list[DesignRecord] = []
        new_envs: list[PoolEntry] = []
        if cfg.mode == "spade":
            designs = self.design(cycle, progress)
            times["design_s"] = time.perf_counter() - t
            t = time.perf_counter()
            new_envs = self.validate(cycle, designs, progress)
            times["validate_s"] = time.perf_counter() - t
            reasons = Counter(d.reason for d in designs if not d.valid)
            row.update(
                {
                    "design/completions": len(designs),
                    "design/parsed": sum(d.parse_error is None for d in designs),
                    "design/valid": sum(d.valid for d in designs),
                    "design/validity_rate": sum(d.valid for d in designs) / max(1, len(designs)),
                    "design/reasons": dict(sorted(reasons.items(), key=lambda kv: str(kv[0]))),
                }
            )
            write_jsonl(
                self.run.designs / f"{self.run.cycle_name(cycle)}.jsonl",
                [d.to_row() for d in designs],
            )
        elif cfg.mode == "fixed-procedural":
            new_envs = self.procedural_envs(cycle)
            times["design_s"] = time.perf_counter() - t
        elif cfg.mode == "fixed-rlve":
            new_envs = self.curriculum.propose(cycle, cfg.agent.envs_per_cycle)
            times["design_s"] = time.perf_counter() - t

        # 3. play ---------------------------------------------------------------------------
        t = time.perf_counter()
        to_play = list(new_envs)
        room = max(0, cfg.agent.envs_per_cycle - len(to_play))
        if room and cfg.mode not in ("fixed-procedural", "fixed-rlve"):
            taken = {e.env_id for e in to_play}
            drawn = self.pool.sample(room + len(taken), self.rng)
            to_play += [e for e in drawn if e.env_id not in taken][:room]
        played, agent_rewards = self.play(cycle, to_play, progress)
        times["play_s"] = time.perf_counter() - t
        hinted = [r for p in played for r in p.hinted]
        unhinted = [r for p in played for r in p.unhinted]
        row.update(
            {
                "play/envs": len(played),
                "play/episodes": len(hinted) + len(unhinted),
                "play/return_hint": _mean(hinted),
                "play/return_nohint": _mean(unhinted),
                "play/errors": sum(len(p.errors) for p in played),
            }
        )

        # 4. rewards ------------------------------------------------------------------------
        by_id = {p.entry.env_id: p for p in played}
        designer_samples, designer_rewards, designer_groups, skills = [], [], [], []
        regrets = []
        for d in designs:
            p = by_id.get(d.env_id) if d.valid else None
            outcome = rw.EnvOutcome(
                valid=p is not None,
                reason=d.reason,
                hinted_returns=p.hinted if p else [],
                unhinted_returns=p.unhinted if p else [],
                skill=d.skill,
                timed_out=bool(d.reason and "timeout" in d.reason),
            )
            if p is not None:
                regrets.append(rw.regret(p.hinted, p.unhinted))
            designer_rewards.append(rw.designer_reward(outcome, cfg.reward))
            skills.append(d.skill if p is not None else None)
            designer_groups.append((cycle, d.prompt_index))
            designer_samples.append(
                samples_from_generations([d.generation], 0.0, "designer", {"cycle": cycle})
            )
        if cfg.reward.per_skill_centering and designer_rewards:
            designer_rewards = _center_valid(designer_rewards, skills)
        row["reward/regret_mean"] = _mean(regrets)
        row["reward/designer_mean"] = _mean(designer_rewards)
        self.delayed.push(
            cycle,
            [
                {"samples": [asdict(s) for s in ss_], "reward": r, "group": list(g)}
                for ss_, r, g in zip(
                    designer_samples, designer_rewards, designer_groups, strict=True
                )
            ],
        )
        ready = self.delayed.pop_ready(cycle)

        # 5. advantages (joint batch, per role) ----------------------------------------------
        rewards: list[float] = []
        groups: list[Any] = []
        roles: list[str] = []
        owners: list[tuple[str, int]] = []
        for i, (_samples, reward, group) in enumerate(agent_rewards):
            rewards.append(reward)
            groups.append(group)
            roles.append("agent")
            owners.append(("agent", i))
        for i, item in enumerate(ready):
            rewards.append(float(item["reward"]))
            groups.append(tuple(item["group"]))
            roles.append("designer")
            owners.append(("designer", i))
        advantages = (
            adv.compute_advantages(rewards, groups, roles, cfg.advantage) if rewards else []
        )
        batch: list[TrainSample] = []
        for (role, i), a in zip(owners, advantages, strict=True):
            if role == "agent":
                batch += [_with_advantage(s, a) for s in agent_rewards[i][0]]
            else:
                batch += [_with_advantage(TrainSample(**s), a) for s in ready[i]["samples"]]
        for role in ("agent", "designer"):
            values = [a for a, r in zip(advantages, roles, strict=True) if r == role]
            row[f"adv/{role}_std"] = _std(values)
            row[f"adv/{role}_n"] = len(values)

        # 6. update -------------------------------------------------------------------------
        t = time.perf_counter()
        if cfg.overlap:
            self._batch = batch  # trained beside the next cycle (see train)
        else:
            task = progress.add_task(f"cycle {cycle}: update", total=1)
            if batch:
                metrics = self.backend.train_step(batch)
                self.backend.publish_weights()
                row.update({f"train/{k}": v for k, v in metrics.items()})
            progress.update(task, completed=1)
            times["update_s"] = time.perf_counter() - t
        row["train/samples"] = len(batch)

        # pool and memory ---------------------------------------------------------------------
        for p in played:
            self.pool.record(p.entry.env_id, p.hinted, p.unhinted, cycle)
            win = _mean([float(r >= 1.0) for r in p.unhinted])
            entry = sc.MemoryEntry(
                env_id=p.entry.env_id,
                skill=p.entry.skill,
                code_excerpt=sc.code_excerpt(p.entry.source),
                win_rate=min(1.0, max(0.0, win)),
                regret=rw.regret(p.hinted, p.unhinted),
                cycle=cycle,
                hint=p.entry.hint,
            )
            if p.entry.env_id in self.memory:
                self.memory.update(
                    entry.env_id, win_rate=entry.win_rate, regret=entry.regret, cycle=cycle
                )
            else:
                self.memory.add(entry)
            if self.curriculum is not None:
                self.curriculum.observe(p.entry, p.unhinted)
        retired = self.pool.retire_saturated()
        row.update(
            {
                "pool/size": len(self.pool),
                "pool/added": len(new_envs),
                "pool/retired": len(retired),
                "pool/skills": dict(sorted(self.pool.skill_counts().items())),
                "memory/size": len(self.memory),
            }
        )
        if cfg.mode == "fixed-rlve":
            row.update(self.curriculum.metrics())
        row.update({f"time/{k}": round(v, 3) for k, v in times.items()})
        row["time/cycle_s"] = round(time.perf_counter() - started, 3)
        return row

    # -- step 1: design ---------------------------------------------------------------------
    def design(self, cycle: int, progress: Any) -> list[DesignRecord]:
        cfg = self.cfg.designer
        prompts = []
        skills = []
        for p in range(cfg.prompts_per_cycle):
            index = (cycle - 1) * cfg.prompts_per_cycle + p
            skill = cfg.skills[index % len(cfg.skills)]
            grounding = []
            if self.grounding is not None:
                grounding = [s.text for s in self.grounding.sample(cfg.grounding.k, index=index)]
            memory = None
            if cfg.memory.enabled and len(self.memory):
                sample = self.memory.sample(
                    cfg.memory.n_frontier,
                    cfg.memory.n_easy,
                    cfg.memory.n_hard,
                    index=index,
                    skill=skill if self.cfg.setting == "games" else None,
                )
                memory = {
                    "frontier": sample.frontier,
                    "too_easy": sample.too_easy,
                    "too_hard": sample.too_hard,
                }
            prompts.append(
                dz.build_designer_messages(
                    skill,
                    setting=self.cfg.setting,
                    grounding=grounding,
                    memory=memory,
                    max_turns=self.cfg.agent.max_turns,
                    compact=cfg.compact,
                    scaffold=cfg.scaffold,
                )
            )
            skills.append(skill)
        conversations = [m for m in prompts for _ in range(cfg.group_size)]
        task = progress.add_task(f"cycle {cycle}: design", total=len(conversations))
        params = cfg.sampling.to_params(_seed(self.cfg.seed, cycle, "design"))
        prefill = ""
        if cfg.scaffold:
            params = replace(params, stop=dz.SCAFFOLD_STOP)
            prefill = dz.SCAFFOLD_PREFILL
        generations = self.backend.generate(conversations, params)
        progress.update(task, completed=len(conversations))
        records = []
        for i, gen in enumerate(generations):
            p, g = divmod(i, cfg.group_size)
            text = prefill + gen.text
            rec = DesignRecord(p, g, skills[p], text, gen)
            try:
                parsed = dz.parse_designer_output(text, max_source_chars=cfg.max_source_chars)
                rec.source, rec.class_name, rec.hint = parsed.source, parsed.class_name, parsed.hint
            except dz.DesignParseError as exc:
                if exc.code in ("missing_hint", "empty_hint") and cfg.hint_source != "reply":
                    rec.source = getattr(exc, "source", None)
                if rec.source is None:
                    rec.parse_error, rec.parse_message = exc.code, exc.message
            records.append(rec)
        if cfg.hint_source != "reply":
            self._write_hints(cycle, [r for r in records if r.source is not None])
        for rec in records:
            if rec.source is not None and rec.parse_error is None:
                digest = se.sha256_text(rec.source)[:10]
                rec.env_id = f"c{cycle:04d}_p{rec.prompt_index}_g{rec.completion_index}_{digest}"
        return records

    def _write_hints(self, cycle: int, records: Sequence[DesignRecord]) -> None:
        """The separate hint-writing pass (by the policy, or by an external endpoint)."""
        if not records:
            return
        cfg = self.cfg.designer
        conversations = [dz.build_hint_messages(r.source, r.skill) for r in records]
        if cfg.hint_source == "policy":
            params = cfg.sampling.to_params(_seed(self.cfg.seed, cycle, "hint"))
            params = replace(params, max_new_tokens=cfg.hint_max_new_tokens)
            texts = [g.text for g in self.backend.generate(conversations, params)]
        else:
            texts = _endpoint_complete(cfg.hint_endpoint, cfg.hint_model, conversations)
        for rec, text in zip(records, texts, strict=True):
            try:
                rec.hint = dz.parse_hint_output(text)
            except dz.DesignParseError as exc:
                rec.parse_error, rec.parse_message = exc.code, exc.message

    # -- step 2: validate -------------------------------------------------------------------
    def validate(
        self, cycle: int, designs: Sequence[DesignRecord], progress: Any
    ) -> list[PoolEntry]:
        todo = [d for d in designs if d.parse_error is None and d.source is not None]
        task = progress.add_task(f"cycle {cycle}: validate", total=max(1, len(todo)))
        skill_arg = se.TOOL_USE if self.cfg.setting == "tool-use" else None
        items = [
            sc.ValidationItem(
                d.source, d.hint or "", d.env_id, skill_arg or d.skill, self.cfg.agent.max_turns
            )
            for d in todo
        ]
        seeds = tuple(range(self.cfg.validation.seeds))
        if not items:
            reports = []
        elif self.cfg.validation.executor == "ray":  # sandbox actors, same reports and order
            reports = self.ray_sandbox.validate_many(items, seeds=seeds, config=self.sandbox_config)
        else:
            reports = sc.validate_many(
                items,
                workers=self.cfg.validation.workers,
                progress=False,
                pool=self.sandbox,
                seeds=seeds,
            )
        progress.update(task, completed=max(1, len(todo)))
        accepted = []
        for d, report in zip(todo, reports, strict=True):
            d.report = report.to_dict()
            if report.valid:
                tools = None
                if skill_arg is not None:
                    tools = self._read_tools(
                        d.source, report.checks.get("class_name") or d.class_name
                    )
                entry = PoolEntry(
                    env_id=d.env_id,
                    source=d.source,
                    class_name=report.checks.get("class_name") or d.class_name,
                    hint=d.hint,
                    skill=d.skill,
                    max_turns=self.cfg.agent.max_turns,
                    cycle_added=cycle,
                    origin="designer",
                    tools=tools,
                )
                if self.pool.add(entry) is not None:
                    accepted.append(entry)
                else:
                    d.report = {**d.report, "valid": False, "reason": "duplicate"}
        return accepted

    def _read_tools(self, source: str, class_name: str) -> list[dict[str, Any]] | None:
        """The declared tools of a validated tool-use environment (read in the sandbox: a
        sandboxed environment exposes no attributes to the runner)."""
        try:
            tools, _domain = sc.read_tools(source, class_name, self.sandbox_config)
        except se.ContractError:
            return None
        return [dict(t) for t in tools] if isinstance(tools, list) and tools else None

    def procedural_envs(self, cycle: int) -> list[PoolEntry]:
        designs = self.curriculum.propose(self.cfg.agent.envs_per_cycle)
        entries = []
        for i, d in enumerate(designs):
            entries.append(
                PoolEntry(
                    env_id=f"c{cycle:04d}_proc{i}_{d.origin}",
                    source=d.source,
                    class_name=d.class_name,
                    hint=d.hint,
                    skill=d.skill,
                    max_turns=self.cfg.agent.max_turns,
                    cycle_added=cycle,
                    origin=d.origin,
                )
            )
        return entries

    # -- step 3: play -----------------------------------------------------------------------
    def play(self, cycle: int, envs: Sequence[PoolEntry], progress: Any):
        cfg = self.cfg.agent
        specs, owners = [], []
        pool = self.ray_sandbox if cfg.executor == "ray" else self.sandbox
        rlve = self.cfg.mode == "fixed-rlve"  # trusted package code, run in this process
        for k, entry in enumerate(envs):
            if rlve:
                factory = self.curriculum.factory(entry)
            else:
                factory = se.SandboxedFactory(
                    entry.source, entry.class_name, pool=pool, origin=entry.env_id
                )
            for j in range(cfg.episodes_per_env):
                seed = _seed(self.cfg.seed, cycle, "episode", k, j)
                # no hint (RLVE, released corpora): a hinted episode would be a plain repeat
                for hinted in (False, True) if entry.hint else (False,):
                    specs.append(
                        se.EpisodeSpec(
                            factory,
                            seed=seed,
                            hint=entry.hint if hinted else None,
                            env_id=entry.env_id,
                            max_turns=min(entry.max_turns, cfg.max_turns),
                            tools=entry.tools,
                        )
                    )
                    owners.append((k, hinted))
        task = progress.add_task(f"cycle {cycle}: play", total=max(1, len(specs)))
        base = _seed(self.cfg.seed, cycle, "agent")

        def params_for(call: int) -> SamplingParams:
            return cfg.sampling.to_params((base + call) & 0x7FFFFFFF)

        agent = PolicyAgent(self.backend, params_for)
        results = (
            se.run_episodes(
                specs,
                agent,
                on_turn=lambda done, total: progress.update(task, completed=done),
                concurrency=self.cfg.agent.concurrency,
                workers=self.cfg.agent.env_workers,
            )
            if specs
            else []
        )
        progress.update(task, completed=max(1, len(specs)))
        played = [PlayedEnv(e) for e in envs]
        agent_rewards = []
        keep = self.cfg.logging.transcripts_per_cycle
        out = self.run.transcripts / self.run.cycle_name(cycle)
        for n, (result, (k, hinted)) in enumerate(zip(results, owners, strict=True)):
            p = played[k]
            (p.hinted if hinted else p.unhinted).append(result.episode_return)
            if result.error is not None:
                p.errors.append(f"{result.error.boundary}: {result.error.kind}")
            samples = episode_samples(
                agent, result, 0.0, {"env_id": p.entry.env_id, "hinted": hinted}
            )
            group = (p.entry.env_id, hinted)
            agent_rewards.append((samples, result.episode_return, group))
            if n < keep:
                tag = "hint" if hinted else "nohint"
                se.write_transcript(result, out / f"{n:03d}_{_safe(p.entry.env_id)}_{tag}.json")
        return played, agent_rewards

    # -- checkpoints ------------------------------------------------------------------------
    def checkpoint(self) -> Path:
        tmp = self.run.begin_checkpoint(self.cycle)
        self.backend.save(tmp / "policy")
        self.memory.save(tmp / "memory.json")
        state = {
            "cycle": self.cycle,
            "rng": _rng_to_json(self.rng.getstate()),
            "pool": self.pool.state_dict(),
            "delayed": self.delayed.state_dict(),
            "curriculum": self.curriculum.state_dict() if self.curriculum else None,
            "pending": None,
        }
        if self.pending is not None:  # overlap: the update not run yet, and its cycle's row
            state["pending"] = {
                "row": self.pending.row,
                "batch": [asdict(b) for b in self.pending.batch],
            }
        atomic_write_json(tmp / "state.json", state)
        final = self.run.commit_checkpoint(tmp, self.cycle, self.cfg.checkpoint.keep)
        atomic_write_json(self.run.root / "pool.json", state["pool"])
        self.memory.save(self.run.root / "memory.json")
        return final

    def restore(self, path: Path) -> None:
        self._open()
        state = json.loads((path / "state.json").read_text())
        self.backend.load(path / "policy")
        self.memory = sc.EnvironmentMemory.load(path / "memory.json")
        self.cycle = int(state["cycle"])
        self.rng.setstate(_rng_from_json(state["rng"]))
        self.pool = EnvPool.from_state_dict(state["pool"])
        self.delayed.load_state_dict(state["delayed"])
        if self.curriculum is not None and state.get("curriculum") is not None:
            self.curriculum.load_state_dict(state["curriculum"])
        self.pending = None
        if state.get("pending") is not None:
            pending = state["pending"]
            self.pending = _Pending(pending["row"], [TrainSample(**b) for b in pending["batch"]])
        # a pending cycle's row is written again once its update finishes
        self.run.truncate_metrics(self.cycle - (self.pending is not None))


@dataclass
class _Pending:
    """Overlap mode: a cycle's metrics row and batch whose update has not been waited for."""

    row: dict[str, Any]
    batch: list[TrainSample]
    wait: Callable[[], dict[str, float]] | None = None


class _Progress:
    """A rich progress display per cycle stage; silent (but counting) when not a terminal."""

    def __init__(self, enabled: bool = True) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self._progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=False,
            disable=not enabled,
        )

    def __enter__(self):
        self._progress.__enter__()
        return self._progress

    def __exit__(self, *exc):
        return self._progress.__exit__(*exc)


def _with_advantage(sample: TrainSample, advantage: float) -> TrainSample:
    return TrainSample(
        sample.input_ids,
        sample.loss_mask,
        sample.old_logprobs,
        float(advantage),
        sample.role,
        sample.meta,
    )


def _center_valid(rewards: list[float], skills: list[str | None]) -> list[float]:
    valid = [i for i, s in enumerate(skills) if s is not None]
    centered = rw.center_per_skill([rewards[i] for i in valid], [skills[i] for i in valid])
    out = list(rewards)
    for i, value in zip(valid, centered, strict=True):
        out[i] = value
    return out


def _endpoint_complete(url: str | None, model: str | None, conversations) -> list[str]:
    import httpx

    if not url:
        raise ValueError("designer.hint_source is 'endpoint' but designer.hint_endpoint is unset")
    texts = []
    with httpx.Client(base_url=url.rstrip("/"), timeout=120) as client:
        for messages in conversations:
            r = client.post("/v1/chat/completions", json={"model": model, "messages": messages})
            r.raise_for_status()
            texts.append(r.json()["choices"][0]["message"]["content"] or "")
    return texts


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _std(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / len(xs)) ** 0.5


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:60]


def _rng_to_json(state: tuple) -> list:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def _rng_from_json(data: list) -> tuple:
    return (data[0], tuple(data[1]), data[2])


def _summary_line(row: dict[str, Any]) -> str:
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    return (
        f"cycle {row['cycle']}: valid {f(row.get('design/valid'))}/"
        f"{f(row.get('design/completions'))}  return hint {f(row.get('play/return_hint'))} "
        f"nohint {f(row.get('play/return_nohint'))}  regret {f(row.get('reward/regret_mean'))}  "
        f"loss {f(row.get('train/loss'))}  pool {row.get('pool/size')}  "
        f"{f(row.get('time/cycle_s'))} s"
    )


def corpus_missing(name: str) -> str:
    """The one line said when ``fixed.corpus`` names no corpus (``$CORPUS_DIR`` unset)."""
    what = "CORPUS_DIR is not set" if "${" in name else f"{name} does not exist"
    return (
        f"fixed.corpus: {what}; download the released corpus with "
        "`uv run spade-envs fetch --out DIR` and set CORPUS_DIR=DIR "
        "(or fixed.corpus=example for the 60-game example corpus)"
    )


def start_run(cfg: RunConfig, run_dir: str | Path, **kwargs: Any) -> SelfPlay:
    """A new run in ``run_dir`` (must be empty or absent)."""
    root = Path(run_dir)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(
            f"run directory {root} is not empty; use `spade resume {root}` or choose another"
        )
    return SelfPlay(cfg, root, **kwargs)


def resume_run(run_dir: str | Path, **kwargs: Any) -> SelfPlay:
    """Reopen ``run_dir`` at its latest checkpoint (or from the start if it has none)."""
    from spade_train.config import load_recipe

    run = RunDir(run_dir)
    if not run.config.exists():
        raise FileNotFoundError(f"{run.root} has no config.yaml; is it a spade run directory?")
    cfg = load_recipe(str(run.config))
    loop = SelfPlay(cfg, run.root, **kwargs)
    latest = run.latest_checkpoint()
    if latest is not None:
        loop.restore(latest)
    else:
        run.truncate_metrics(0)
    return loop
