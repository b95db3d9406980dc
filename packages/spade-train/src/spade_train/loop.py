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
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import spade_corpus as sc
import spade_envs as se
import spade_sandbox as ss

from spade_train.backends.base import PolicyBackend, submit_train_step
from spade_train.backends.registry import make_backend
from spade_train.cold_start import policy_model
from spade_train.config import RunConfig, dump_config
from spade_train.core.learning_potential import GameBaselines
from spade_train.core.pool import EnvPool
from spade_train.cycle import initial_state, rng_from_json, rng_to_json, run_cycle
from spade_train.errors import RecipeError, RunDirError
from spade_train.loggers import TensorBoardLogger, WandbLogger, open_loggers
from spade_train.plots import write_plots
from spade_train.progress import StageProgress, summary_line
from spade_train.resources import Resources, open_resources
from spade_train.rundir import RunDir, atomic_write_json
from spade_train.sources import corpus_missing, make_source, seed_pool_from_corpus
from spade_train.types import JSON, Metrics, SamplingParams, TrainSample

__all__ = ["SelfPlay", "corpus_missing", "disk_full", "resume_run", "start_run"]

STAGES = ("design", "validate", "play", "update")


class SelfPlay:
    """One training run. ``backend`` may be given (tests); otherwise it is made from the config
    when the run starts and closed when it stops."""

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
        self.source = make_source(cfg)  # a missing corpus is one line, before anything exists
        self.show_progress = cfg.logging.progress if progress is None else progress
        self.log = log or (lambda _msg: None)
        limits = ss.Limits(call_wall_s=cfg.validation.timeout_s)
        base = ss.SandboxConfig(backend=cfg.validation.sandbox, limits=limits)
        self.sandbox_config = self.source.sandbox_config(base)
        self.run = RunDir(run_dir).create()
        self.grounding = self.source.grounding()
        self.given_backend = backend
        self.state = initial_state(cfg, self.source)
        self.res: Resources | None = None
        """The resources of the run while it trains (kept, closed, once it stopped)."""
        self.policy_checkpoint: Path | None = None
        """A restored checkpoint's policy, loaded when the run starts."""
        # overlap: the last cycle's metrics row and batch, whose update runs beside the next
        # cycle (``wait`` is set once it is submitted)
        self.pending: _Pending | None = None
        self.writers: list[WandbLogger | TensorBoardLogger] = []
        self.stop_requested: Callable[[], bool] = lambda: False
        """Asked before each cycle: True stops the run there as Ctrl-C would (the CLI sets it
        from its SIGINT latch, since a KeyboardInterrupt raised inside a garbage-collection
        callback is swallowed by Python)."""

    @property
    def backend(self) -> PolicyBackend | None:
        return self.res.backend if self.res is not None else self.given_backend

    @property
    def cycle(self) -> int:
        return self.state.cycle

    # -- resources --------------------------------------------------------------------------
    def _make_backend(self) -> PolicyBackend:
        cfg = self.cfg
        self.log(f"loading policy {cfg.backend.model} ({cfg.backend.name} backend)")
        kwargs = cfg.backend.backend_kwargs(cfg.seed)
        kwargs["model"] = policy_model(cfg, self.log, self.show_progress)  # the warm-up's
        return make_backend(cfg.backend.name, **kwargs)

    @contextmanager
    def _opened(self) -> Iterator[Resources]:
        """The run's resources and loggers, open while the run trains."""
        with ExitStack() as stack:
            res = stack.enter_context(
                open_resources(
                    self.cfg,
                    self.run,
                    backend=self.given_backend,
                    make_backend=self._make_backend,
                    sandbox_config=self.sandbox_config,
                    sandbox_pool=self.source.sandbox_pool,
                    grounding=self.grounding,
                    progress=lambda: StageProgress(self.show_progress),
                )
            )
            self.res = res
            if self.cfg.logging.wandb or self.cfg.logging.tensorboard:
                for writer in open_loggers(self.cfg, self.run.root):
                    self.writers.append(writer)
                    stack.callback(writer.close)
            try:
                yield res
            finally:
                self.writers = []

    def seed_pool_from_corpus(self) -> int:
        """Put the static corpus's environments (split ``fixed.split``) into the pool."""
        return seed_pool_from_corpus(self.cfg, self.state.pool, self.sandbox_config)[0]

    # -- the run ----------------------------------------------------------------------------
    def train(self) -> list[Metrics]:
        """Run (or continue) until ``cycles`` cycles are done; returns all metrics rows."""
        with self._opened() as res:
            if self.policy_checkpoint is not None:
                res.backend.load(self.policy_checkpoint)
                self.policy_checkpoint = None
            if self.cycle == 0:
                self.run.config.write_text(dump_config(self.cfg), encoding="utf-8")
                seeded = self.source.seed_pool(self.state.pool, self.sandbox_config)
                if seeded is not None:
                    self.log(f"pool seeded with {seeded[0]} environments from {seeded[1]}")
            if self.pending is not None and self.pending.wait is None:
                self._submit_pending(res)  # resumed with an update still to run
            while self.cycle < self.cfg.cycles:
                if self.stop_requested():
                    raise KeyboardInterrupt
                self._one_cycle(res)
        return self.run.read_metrics()

    def _one_cycle(self, res: Resources) -> None:
        overlap = self.cfg.overlap
        row, batch = run_cycle(res, self.state, self.cycle + 1, train=not overlap)
        self.state.cycle += 1
        last = self.cycle == self.cfg.cycles
        if not overlap:
            row.update(self._evaluate(res, self.cycle))
            self.run.append_metrics(row)
            self._maybe_checkpoint(res, last)
            self._report([row])
            return
        # overlap: finish the previous cycle's update, checkpoint, start this one's
        done = [self._join_pending(res)] if self.pending is not None else []
        self.pending = _Pending(self.cycle, row, batch)
        if last:  # the last update is waited for
            self._submit_pending(res)
            done.append(self._join_pending(res))
        for cycle, r in done:
            r.update(self._evaluate(res, cycle))
            self.run.append_metrics(r)
        self._maybe_checkpoint(res, last)
        if self.pending is not None:
            self._submit_pending(res)
        self._report([r for _, r in done])

    def _evaluate(self, res: Resources, cycle: int) -> Metrics:
        """``eval.every``: spade-eval on the policy after this cycle's update. Its records go
        to ``eval/cycle_NNNN/``, so a run resumed before its checkpoint redoes only what is
        missing there, and the row (written after it) never repeats or skips an evaluation."""
        fixed = self._fixed_model_eval(res, cycle)
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
        metrics: Metrics = dict(
            sev.evaluate_policy(
                res.backend,
                e.config,
                out,
                params_factory=SamplingParams,
                suites=e.suites,
                limit=e.limit,
            )
        )
        metrics["time/eval_s"] = round(time.perf_counter() - t, 3)
        return {**metrics, **fixed}

    def _fixed_model_eval(self, res: Resources, cycle: int) -> Metrics:
        """``eval.fixed_model``: a fixed model plays the latest designer round's environments."""
        f = self.cfg.eval.fixed_model
        games = (
            None
            if not f.every or cycle % f.every
            else self.source.latest_round(self.state.pool, cycle)
        )
        if games is None:  # not this cycle, or a source without a designer
            return {}
        from spade_train.core import fixed_eval

        key = os.environ.get(f.api_key_env)
        if not key:
            self.log(f"fixed-model evaluation skipped: {f.api_key_env} is not set")
            return {"fixed_eval/skipped": 1.0}
        endpoint = se.OpenAIChatAgent(
            f.endpoint, f.model, api_key=key, temperature=f.temperature,
            max_tokens=f.max_new_tokens, timeout_s=f.timeout_s,
        )  # fmt: skip
        t = time.perf_counter()
        played = fixed_eval.play_games(
            games,
            res.local,
            fixed_eval.FrameAgent(endpoint, concurrency=f.concurrency),
            plays=f.plays_per_game or self.cfg.agent.episodes_per_env,
            max_turns=self.cfg.agent.max_turns,
            seed=self.cfg.seed,
            cycle=cycle,
        )
        plays = sum(g.plays for g in played)
        if plays and sum(g.errors for g in played) == plays:  # the model never answered
            return {"fixed_eval/error": 1.0}
        metrics: Metrics = dict(fixed_eval.difficulty_metrics(played))
        metrics["time/fixed_eval_s"] = round(time.perf_counter() - t, 3)
        return metrics

    def _maybe_checkpoint(self, res: Resources, last: bool) -> None:
        if last or self.cycle % self.cfg.checkpoint.every == 0:
            self.checkpoint(res)

    def _report(self, rows: Sequence[Metrics]) -> None:
        if rows:
            write_plots(self.run.read_metrics(), self.run.plots)
        for row in rows:
            for writer in self.writers:
                writer.log(row, _cycle_of(row))
            self.log(summary_line(row))

    def _submit_pending(self, res: Resources) -> None:
        pending = self.pending
        assert pending is not None
        if pending.batch:
            pending.wait = submit_train_step(res.backend, pending.batch)
        else:
            pending.wait = lambda: {}  # nothing to train this cycle

    def _join_pending(self, res: Resources) -> tuple[int, Metrics]:
        """Wait for the pending update, publish its weights; its cycle and finished row."""
        pending = self.pending
        assert pending is not None and pending.wait is not None
        row = pending.row
        task = res.progress.add_task(f"cycle {pending.cycle}: update (overlapped)", total=1)
        t = time.perf_counter()
        metrics = pending.wait()
        if pending.batch:
            res.backend.publish_weights()
            row.update({f"train/{k}": v for k, v in metrics.items()})
        row["time/update_wait_s"] = round(time.perf_counter() - t, 3)
        res.progress.update(task, completed=1)
        self.pending = None
        return pending.cycle, row

    # -- checkpoints ------------------------------------------------------------------------
    def checkpoint(self, res: Resources) -> Path:
        tmp = self.run.begin_checkpoint(self.state.cycle)
        try:
            return self._write_checkpoint(res, tmp)
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

    def _write_checkpoint(self, res: Resources, tmp: Path) -> Path:
        st = self.state
        res.backend.save(tmp / "policy")
        st.memory.save(tmp / "memory.json")
        state: dict[str, JSON] = {
            "cycle": st.cycle,
            "rng": rng_to_json(st.rng.getstate()),
            "pool": st.pool.state_dict(),
            "delayed": st.delayed.state_dict(),
            "reward_state": st.reward_state.state_dict(),
            "baselines": st.baselines.state_dict(),
            "curriculum": st.source.state_dict(),
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
        """Continue from the checkpoint ``path``: the state now, the policy when the run
        starts (:meth:`train`)."""
        data = json.loads((path / "state.json").read_text())
        self.policy_checkpoint = path / "policy"
        st = self.state
        st.memory = sc.EnvironmentMemory.load(path / "memory.json")
        st.cycle = int(data["cycle"])
        st.rng.setstate(rng_from_json(data["rng"]))
        st.pool = EnvPool.from_state_dict(data["pool"])
        st.delayed.load_state_dict(data["delayed"])
        st.reward_state.load_state_dict(data["reward_state"])
        st.baselines = GameBaselines.from_state(data["baselines"])
        if data.get("curriculum") is not None:
            st.source.load_state_dict(data["curriculum"])
        self.pending = None
        if data.get("pending") is not None:
            pending = data["pending"]
            batch = [TrainSample(**b) for b in pending["batch"]]
            self.pending = _Pending(int(pending["row"]["cycle"]), pending["row"], batch)
        # a pending cycle's row is written again once its update finishes
        self.run.truncate_metrics(self.cycle - (self.pending is not None))


def _cycle_of(row: Metrics) -> int:
    cycle = row["cycle"]
    assert isinstance(cycle, int)
    return cycle


@dataclass
class _Pending:
    """Overlap mode: a cycle's metrics row and batch whose update has not been waited for."""

    cycle: int
    row: Metrics
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


def start_run(
    cfg: RunConfig,
    run_dir: str | Path,
    backend: PolicyBackend | None = None,
    *,
    progress: bool | None = None,
    log: Callable[[str], None] | None = None,
) -> SelfPlay:
    """A new run in ``run_dir`` (must be empty or absent)."""
    root = Path(run_dir)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(
            f"run directory {root} is not empty; use `spade resume {root}` or choose another"
        )
    return SelfPlay(cfg, root, backend, progress=progress, log=log)


def resume_run(
    run_dir: str | Path,
    backend: PolicyBackend | None = None,
    *,
    progress: bool | None = None,
    log: Callable[[str], None] | None = None,
) -> SelfPlay:
    """Reopen ``run_dir`` at its latest checkpoint (or from the start if it has none)."""
    from spade_train.config import load_recipe

    run = RunDir(run_dir)
    if not run.config.exists():
        raise FileNotFoundError(f"{run.root} has no config.yaml; is it a spade run directory?")
    cfg = load_recipe(str(run.config))
    loop = SelfPlay(cfg, run.root, backend, progress=progress, log=log)
    latest = run.latest_checkpoint()
    if latest is not None:
        loop.restore(latest)
    else:
        run.truncate_metrics(0)
    return loop
