"""The self-play run: cycles of :func:`spade_train.cycle.run_cycle`, checkpoints, resume.

:class:`SelfPlay` holds the resources (policy backend, sandboxes, loggers), the run state
(:class:`~spade_train.cycle.RunState`) and checkpointing; the algorithm itself is the six step
functions that :mod:`spade_train.cycle` calls. The baselines reuse it: ``mode: fixed-static``
skips design and trains the agent on a static corpus (the released GPT-5.5 one, run in
compatibility mode); ``mode: fixed-rlve`` plays RLVE's environments with RLVE's sliding-window
difficulty (:mod:`spade_train.core.rlve_source`); ``mode: fixed-procedural`` replaces the
designer by hand-written procedural generators (a dependency-free CPU smoke baseline).

Everything a cycle produces is written to the run directory (see :mod:`spade_train.rundir`);
every ``checkpoint.every`` cycles (and after the last) a checkpoint (policy, optimizer, RNG
states, pool, memory, counters) is committed atomically, so ``spade resume`` continues exactly
where the last one left off.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import spade_corpus as sc
import spade_envs as se
import spade_sandbox as ss

from spade_train.backends.base import PolicyBackend, submit_train_step
from spade_train.backends.registry import make_backend
from spade_train.cold_start import policy_model
from spade_train.config import RunConfig, dump_config
from spade_train.core.learning_potential import GameBaselines
from spade_train.core.pool import EnvPool, PoolEntry
from spade_train.cycle import (
    Resources,
    grounding_sampler,
    initial_state,
    rng_from_json,
    rng_to_json,
    run_cycle,
)
from spade_train.errors import RecipeError, RunDirError
from spade_train.plots import write_plots
from spade_train.progress import StageProgress, summary_line
from spade_train.rundir import RunDir, atomic_write_json
from spade_train.types import SamplingParams, TrainSample

STAGES = ("design", "validate", "play", "update")


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
        self.show_progress = cfg.logging.progress if progress is None else progress
        self.log = log or (lambda _msg: None)
        limits = ss.Limits(call_wall_s=cfg.validation.timeout_s)
        sandbox_config = ss.SandboxConfig(backend=cfg.validation.sandbox, limits=limits)
        if cfg.mode == "fixed-static":  # no designer output here: a released corpus may use numpy
            sandbox_config = se.compat_sandbox_config(sandbox_config)
        self.res = Resources(
            cfg=cfg,
            backend=backend,
            sandbox=None,
            ray_sandbox=None,
            sandbox_config=sandbox_config,
            run=RunDir(run_dir).create(),
            grounding=grounding_sampler(cfg),
        )
        self._own_backend = backend is None  # made here, so closed here
        self._backend_closed = False
        self.state = initial_state(cfg)
        self.writers: list[Any] = []
        # overlap: the last cycle's metrics row and batch, whose update runs beside the next
        # cycle (``wait`` is set once it is submitted)
        self.pending: _Pending | None = None

    @property
    def backend(self) -> Any:
        return self.res.backend

    @property
    def run(self) -> RunDir:
        return self.res.run

    @property
    def cycle(self) -> int:
        return self.state.cycle

    # -- resources --------------------------------------------------------------------------
    def _open(self) -> None:
        cfg = self.cfg
        if self.res.backend is None or self._backend_closed:
            self._backend_closed = False
            self.log(f"loading policy {cfg.backend.model} ({cfg.backend.name} backend)")
            kwargs = cfg.backend.backend_kwargs(cfg.seed)
            kwargs["model"] = policy_model(cfg, self.log, self.show_progress)  # the warm-up's
            self.res.backend = make_backend(cfg.backend.name, **kwargs)
        if self.res.sandbox is None and cfg.mode != "fixed-rlve":  # RLVE runs in this process
            self.res.sandbox = ss.SandboxPool(self.res.sandbox_config, size=cfg.validation.workers)
        on_ray = "ray" in (cfg.validation.executor, cfg.agent.executor)
        if on_ray and self.res.ray_sandbox is None:
            from spade_train.backends.ray_sandbox import RaySandboxPool

            self.res.ray_sandbox = RaySandboxPool(
                num_workers=cfg.validation.workers,
                call_timeout_s=60.0 + 20.0 * cfg.validation.timeout_s,
                sandbox_config=self.res.sandbox_config,
            )
        if cfg.logging.wandb or cfg.logging.tensorboard:
            from spade_train.loggers import open_loggers

            self.writers = open_loggers(cfg, self.run.root)

    def close(self) -> None:
        for name in ("sandbox", "ray_sandbox"):
            if getattr(self.res, name) is not None:
                getattr(self.res, name).close()
                setattr(self.res, name, None)
        for writer in self.writers:
            writer.close()
        self.writers = []
        if self._own_backend and self.res.backend is not None and not self._backend_closed:
            self.res.backend.close()  # kept as an attribute (inspectable); reopened by _open
            self._backend_closed = True

    def seed_pool_from_corpus(self) -> int:
        """Put the static corpus's environments (split ``fixed.split``) into the pool."""
        corpus = se.load_corpus(self._corpus_path())
        compat = corpus.mode == "compat"  # written for the released code: run as it ran them
        added = 0
        for rec in corpus.records:
            if rec.split != self.cfg.fixed.split:
                continue
            source = se.compat_source(corpus.source(rec.id)) if compat else corpus.source(rec.id)
            tools = rec.extra.get("tools") if self.cfg.setting == "tool-use" else None
            if self.cfg.setting == "tool-use" and compat and not tools:
                from spade_train.steps.design import read_tools  # a ToolUseBaseEnv subclass's

                name = se.find_env_class(source, rec.class_name)
                tools = read_tools(source, name, self.res.sandbox_config)
            entry = PoolEntry(
                env_id=rec.id,
                source=source,
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
            added += self.state.pool.add(entry) is not None
        return added

    def _corpus_path(self) -> Path:
        name = self.cfg.fixed.corpus
        if name == "example" and self.cfg.setting == "tool-use":
            return Path(se.tool_use_corpus_path())
        if "${" in name:
            raise FileNotFoundError(corpus_missing(name))
        try:  # a shipped corpus's name (example, starter, tool_use) or a path
            return Path(se.resolve_corpus_path(name))
        except se.CorpusError as exc:
            raise FileNotFoundError(corpus_missing(name)) from exc

    # -- the run ----------------------------------------------------------------------------
    def train(self) -> list[dict[str, Any]]:
        """Run (or continue) until ``cycles`` cycles are done; returns all metrics rows."""
        self._open()
        try:
            if self.cycle == 0:
                self.run.config.write_text(dump_config(self.cfg), encoding="utf-8")
                if self.cfg.mode in ("spade", "fixed-static"):
                    n = self.seed_pool_from_corpus()
                    self.log(f"pool seeded with {n} environments from {self._corpus_path()}")
            with StageProgress(self.show_progress) as progress:
                if self.pending is not None and self.pending.wait is None:
                    self._submit_pending()  # resumed with an update still to run
                while self.cycle < self.cfg.cycles:
                    self._one_cycle(progress)
        finally:
            self.close()
        return self.run.read_metrics()

    def _one_cycle(self, progress: Any) -> None:
        overlap = self.cfg.overlap
        row, batch = run_cycle(self.res, self.state, self.cycle + 1, progress, train=not overlap)
        self.state.cycle += 1
        last = self.cycle == self.cfg.cycles
        if not overlap:
            row.update(self._evaluate(row["cycle"]))
            self.run.append_metrics(row)
            self._maybe_checkpoint(last)
            self._report([row])
            return
        # overlap: finish the previous cycle's update, checkpoint, start this one's
        done = [self._join_pending(progress)] if self.pending is not None else []
        self.pending = _Pending(row, batch)
        if last:  # the last update is waited for
            self._submit_pending()
            done.append(self._join_pending(progress))
        for r in done:
            r.update(self._evaluate(r["cycle"]))
            self.run.append_metrics(r)
        self._maybe_checkpoint(last)
        if self.pending is not None:
            self._submit_pending()
        self._report(done)

    def _evaluate(self, cycle: int) -> dict[str, Any]:
        """``eval.every``: spade-eval on the policy after this cycle's update. Its records go
        to ``eval/cycle_NNNN/``, so a run resumed before its checkpoint redoes only what is
        missing there, and the row (written after it) never repeats or skips an evaluation."""
        fixed = self._fixed_model_eval(cycle)
        e = self.cfg.eval
        if not e.every or cycle % e.every:
            return fixed
        try:
            import spade_eval as sev
        except ImportError:
            raise RecipeError(
                "eval.every: spade-eval is not installed; "
                "pip install 'spade-train[eval]' (or set eval.every=0)"
            ) from None
        out = self.run.root / "eval" / self.run.cycle_name(cycle)
        t = time.perf_counter()
        metrics: dict[str, Any] = sev.evaluate_policy(
            self.backend,
            e.config,
            out,
            params_factory=SamplingParams,
            suites=e.suites,
            limit=e.limit,
        )
        metrics["time/eval_s"] = round(time.perf_counter() - t, 3)
        return {**metrics, **fixed}

    def _fixed_model_eval(self, cycle: int) -> dict[str, Any]:
        """``eval.fixed_model``: a fixed model plays the latest designer round's environments."""
        f = self.cfg.eval.fixed_model
        if not f.every or cycle % f.every or self.cfg.mode != "spade":
            return {}
        from spade_train.core import fixed_eval
        from spade_train.steps.design import current_set
        from spade_train.steps.play import sandboxed

        key = os.environ.get(f.api_key_env)
        if not key:
            self.log(f"fixed-model evaluation skipped: {f.api_key_env} is not set")
            return {"fixed_eval/skipped": 1.0}
        endpoint = se.OpenAIChatAgent(
            f.endpoint, f.model, api_key=key, temperature=f.temperature,
            max_tokens=f.max_new_tokens, timeout_s=f.timeout_s,
        )  # fmt: skip
        t = time.perf_counter()
        games = fixed_eval.play_games(
            current_set(self.cfg, self.state.pool, cycle),
            sandboxed(self.res.sandbox),
            fixed_eval.FrameAgent(endpoint, concurrency=f.concurrency),
            plays=f.plays_per_game or self.cfg.agent.episodes_per_env,
            max_turns=self.cfg.agent.max_turns,
            seed=self.cfg.seed,
            cycle=cycle,
        )
        plays = sum(g.plays for g in games)
        if plays and sum(g.errors for g in games) == plays:  # the model never answered
            return {"fixed_eval/error": 1.0}
        metrics = fixed_eval.difficulty_metrics(games)
        metrics["time/fixed_eval_s"] = round(time.perf_counter() - t, 3)
        return metrics

    def _maybe_checkpoint(self, last: bool) -> None:
        if last or self.cycle % self.cfg.checkpoint.every == 0:
            self.checkpoint()

    def _report(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            write_plots(self.run.read_metrics(), self.run.plots)
        for row in rows:
            for writer in self.writers:
                writer.log(row, int(row["cycle"]))
            self.log(summary_line(row))

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

    # -- checkpoints ------------------------------------------------------------------------
    def checkpoint(self) -> Path:
        tmp = self.run.begin_checkpoint(self.state.cycle)
        try:
            return self._write_checkpoint(tmp)
        except (OSError, RuntimeError) as exc:
            full = disk_full(exc, tmp.parent)  # judged before the half-written files go
            shutil.rmtree(tmp, ignore_errors=True)
            if not full:
                raise
            raise RunDirError(
                f"cycle {self.state.cycle}'s checkpoint did not fit on the disk of "
                f"{self.run.root} ({exc}); free some space (old runs, "
                "checkpoint.keep=1) and continue with `spade resume "
                f"{self.run.root}`"
            ) from None

    def _write_checkpoint(self, tmp: Path) -> Path:
        st = self.state
        self.backend.save(tmp / "policy")
        st.memory.save(tmp / "memory.json")
        state = {
            "cycle": st.cycle,
            "rng": rng_to_json(st.rng.getstate()),
            "pool": st.pool.state_dict(),
            "delayed": st.delayed.state_dict(),
            "reward_state": st.reward_state.state_dict(),
            "baselines": st.baselines.state_dict(),
            "curriculum": st.curriculum.state_dict() if st.curriculum else None,
            "pending": None,
        }
        if self.pending is not None:  # overlap: the update not run yet, and its cycle's row
            state["pending"] = {
                "row": self.pending.row,
                "batch": [asdict(b) for b in self.pending.batch],
            }
        atomic_write_json(tmp / "state.json", state)
        final = self.run.commit_checkpoint(tmp, st.cycle, self.cfg.checkpoint.keep)
        atomic_write_json(self.run.root / "pool.json", state["pool"])
        st.memory.save(self.run.root / "memory.json")
        return final

    def restore(self, path: Path) -> None:
        self._open()
        data = json.loads((path / "state.json").read_text())
        self.backend.load(path / "policy")
        st = self.state
        st.memory = sc.EnvironmentMemory.load(path / "memory.json")
        st.cycle = int(data["cycle"])
        st.rng.setstate(rng_from_json(data["rng"]))
        st.pool = EnvPool.from_state_dict(data["pool"])
        st.delayed.load_state_dict(data["delayed"])
        st.reward_state.load_state_dict(data["reward_state"])
        st.baselines = GameBaselines.from_state(data["baselines"])
        if st.curriculum is not None and data.get("curriculum") is not None:
            st.curriculum.load_state_dict(data["curriculum"])
        self.pending = None
        if data.get("pending") is not None:
            pending = data["pending"]
            self.pending = _Pending(pending["row"], [TrainSample(**b) for b in pending["batch"]])
        # a pending cycle's row is written again once its update finishes
        self.run.truncate_metrics(self.cycle - (self.pending is not None))


@dataclass
class _Pending:
    """Overlap mode: a cycle's metrics row and batch whose update has not been waited for."""

    row: dict[str, Any]
    batch: list[TrainSample]
    wait: Callable[[], dict[str, float]] | None = None


def disk_full(exc: BaseException, where: Path) -> bool:
    """Whether a failed write ran out of space: ENOSPC/EDQUOT, or an error from a writer that
    hides the errno (torch's zip writer) while less than 64 MiB is left at ``where``."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    try:
        return shutil.disk_usage(where).free < 64 * 2**20
    except OSError:
        return False


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
