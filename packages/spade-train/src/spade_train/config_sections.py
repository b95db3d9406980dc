"""The sections of a run configuration (each a strict pydantic model: unknown keys refused,
units in field names) other than the backend's (:mod:`spade_train.config_backend`) and the
designer's (:mod:`spade_train.config_designer`). :mod:`spade_train.config` assembles them into
``RunConfig``."""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from spade_train.config_backend import SamplingConfig
from spade_train.config_base import MAX_COUNT, MAX_TOKENS, Strict
from spade_train.core.reward_options import RewardOptions

DEFAULT_GENERATORS = (
    "basic_arithmetic",
    "chain_sum",
    "leg_counting",
    "number_sorting",
    "word_sorting",
    "letter_counting",
)


class ValidationConfig(Strict):
    seeds: int = Field(3, ge=1, le=MAX_COUNT)
    """How many seeds each design is validated on, drawn per cycle from the run's seed (more
    where the probe statistics are borderline)."""
    workers: int = Field(2, ge=1, le=MAX_COUNT)
    """Sandbox workers that validate designs (and play sandboxed environments) at once."""
    timeout_s: float = Field(10.0, gt=0.0)
    """The wall-clock limit of each call into a sandboxed environment."""
    sandbox: Literal["process", "docker"] = "process"
    """The sandbox backend: ``process`` (process isolation, rlimits, no network) or ``docker``."""
    executor: Literal["local", "ray"] = "local"
    """Where validation runs: a warm sandbox pool in this process, or sandbox worker actors on
    Ray (``spade_train.backends.ray.RaySandboxPool``, ``workers`` of them)."""


class AgentConfig(Strict):
    envs_per_cycle: int = Field(4, ge=1, le=MAX_COUNT)
    """Environments the agent plays per cycle: the new ones first, then pool draws up to this many.
    """
    episodes_per_env: int = Field(2, ge=1, le=MAX_COUNT)
    """Trained episodes per environment, without the hint (upstream's ``trajectories_per_game``)."""
    max_turns: int = Field(6, ge=1, le=MAX_COUNT)
    """The most turns of an episode (an environment's own limit applies when it is lower and
    ``respect_env_max_turns``)."""
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    """How the agent's replies are sampled."""
    concurrency: int = Field(64, ge=1, le=MAX_COUNT)
    """Episodes in flight at once; each round's batched generation is at most this big."""
    hint_plays_per_env: int = Field(2, ge=0, le=MAX_COUNT)
    """Episodes per environment played with the hint, on their own seeds (upstream's
    ``hint_plays_per_game``); they feed the designer's regret and are not trained unless
    ``train_hint_plays``. Played only in ``mode: spade`` with a reward that reads hints."""
    paired_hint_seeds: bool = False
    """Hint plays reuse the unhinted episodes' seeds (regret over the same instances)."""
    train_hint_plays: bool = False
    """Train the hinted episodes too (by default they only measure the designer's regret)."""
    batch_episodes: int | None = Field(None, ge=1, le=MAX_COUNT)
    """Trained episodes a cycle aims for: each of its environments plays
    ``ceil(batch_episodes / environments)`` (upstream's global batch over its games: 192 / 24
    = 8 in the games launchers); ``None``: ``episodes_per_env`` each."""
    scoring: Literal["strict", "upstream"] = "upstream"
    """How an episode is scored (spade-envs ``run_episodes``): ``upstream`` clips the return
    to [-1, 1] and scores an environment exception -1 (the released code); ``strict`` clips to
    [0, 1] and leaves failures unscored."""
    respect_env_max_turns: bool = False
    """Play an environment's own ``max_turns`` (capped at ``max_turns``), as upstream's
    ``--respect-game-max-turns``."""
    thinking: bool = False
    """The agent's replies may hold ``<think>…</think>``: stripped before the action is parsed
    and from the history (all sampled tokens are still trained once)."""
    turn_budget_s: float | None = Field(None, gt=0.0)
    """Longest one batched agent call may take; past it the round's episodes end as the
    agent's failure (``agent_error``), never the environment's. None: unbounded."""
    episode_budget_s: float | None = Field(None, gt=0.0)
    """Total agent time per episode (its rounds' calls, summed); past it, as above."""
    system_prompt: str | None = None
    """The agent's system message. None: spade-envs' ``DEFAULT_SYSTEM_PROMPT`` ("think
    briefly, then end your reply with your move", and the tool prompt in tool environments);
    ``""``: no system message. With ``answer_prefix`` the reply starts with the answer, so a
    prompt asking for the move alone fits it better."""
    answer_prefix: str = ""
    """Text every agent reply starts with, written by the runner, not the policy (e.g.
    ``\\boxed{`` for a policy too small to keep the answer format): the policy continues it,
    the transcripts show it, and its tokens are prompt tokens (never trained)."""
    env_workers: int = Field(8, ge=1, le=MAX_COUNT)
    """Threads that start, step and close a round's (sandboxed) environments at once."""
    executor: Literal["local", "ray"] = "local"
    """Where the played environments run: the warm sandbox pool of this process, or sandbox
    worker actors on Ray (the ``RaySandboxPool`` that ``validation.executor: ray`` uses too,
    ``validation.workers`` actors); generation stays with the policy backend."""


class RewardConfig(Strict):
    """The designer's reward (``spade_train.core.rewards``). Defaults are the released
    launchers' values (paper runs). The chosen variant's own settings are ``options``, checked
    against its typed model (``blend``: ``BlendOptions``; ``solve-rate``: ``SolveRateOptions``;
    the others have none); they may also be written flat (``reward.plateau_weight: 0.6``), and
    a key of another variant is refused with one line."""

    designer: str = "regret"
    """A registered designer reward: regret, regret-pure, blend, solve-rate, micro-lp,
    learning-potential, solver-variance, or one added through the registry."""
    invalid_penalty: float = -1.0
    """The raw reward of a design that failed (parse, validation or a pipeline stage)."""
    timeout_penalty: float = -0.5
    """The raw reward of a design whose validation or generation timed out."""
    train_invalid: bool = True
    """``False``: an invalid design is masked, never trained (upstream: a design slot whose
    every attempt failed leaves no designer sample, so no penalty reaches the policy; the paper
    recipes). ``True``: it is trained with ``invalid_penalty`` (or the penalties below)."""
    parsed_invalid_penalty: float | None = None
    """The penalty of an invalid design whose reply held a complete program (rejected by the
    validator, not by the reply's parse: a crash, a failed check, a duplicate). None: the
    ``invalid_penalty`` (upstream). Set above it, a cycle whose designs all fail still ranks a
    complete program over a reply that never closed its code."""
    reason_penalties: dict[str, float] | None = None
    """Penalties by rejection reason (``design/reasons`` codes: ``duplicate``,
    ``solution_fails``, ...), taking precedence over ``parsed_invalid_penalty`` and
    ``invalid_penalty`` for the reasons listed (not over ``timeout_penalty``). None: one
    penalty for every reason (upstream). Ranks what a small designer writes further: a program
    that ran every episode but failed a quality check above one that crashed, a repeat of an
    earlier design of the run below both."""
    copy_reward: float | None = None
    """The raw reward of a valid design that is an exact or near copy of a shipped game or
    scaffold example (``copy_of`` in the design records), in place of the variant's signal
    (neither centered nor scaled, like the penalties). None: scored like any other
    (upstream, which has no such check)."""
    per_skill_centering: bool | None = None
    """Center each skill's raw rewards and multiply by ``env_reward_scale``; ``None`` = the
    variant's own choice (every upstream variant centers; ``regret-pure`` does not)."""
    env_reward_scale: float | Literal["auto"] = "auto"
    """``auto``: ``min(agent episodes / designer items * regeneration_interval, max)``."""
    max_env_reward_scale: float = Field(50.0, gt=0.0)
    """The largest ``env_reward_scale`` that ``auto`` gives."""
    regeneration_interval: int = Field(1, ge=1, le=MAX_COUNT)
    """Cycles between designer rounds, for ``env_reward_scale: auto``; unless set, it follows
    ``designer.regenerate_every``."""
    lp_gamma_fast: float = Field(0.98, gt=0.0, le=1.0)
    """Decay of each skill's fast average of mean returns (the learning-potential trackers,
    read by ``learning-potential`` and ``solver-variance`` and logged for every variant)."""
    lp_gamma_slow: float = Field(0.85, gt=0.0, le=1.0)
    """Decay of each skill's slow average (the baseline of ``learning-potential``)."""
    delay_cycles: int = Field(0, ge=0, le=MAX_COUNT)
    """Train each designer item ``delay_cycles`` cycles after it was made, its reward
    recomputed from the plays of its environment over that window; pending items are flushed
    at the last cycle (``spade_train.core.delayed_rewards``)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The variant's own options (``spade_train.core.reward_options``), checked against its
    model; a key of another variant is refused."""

    @model_validator(mode="before")
    @classmethod
    def _flat_options(cls, data: object) -> object:
        """Variant options written flat (``reward.plateau_weight``) move into ``options``."""
        if not isinstance(data, dict):
            return data
        from spade_train.core.rewards import DESIGNER_REWARDS

        designer = data.get("designer", cls.model_fields["designer"].default)
        if designer not in DESIGNER_REWARDS:
            return data  # the designer field's own check names the mistake
        mine = DESIGNER_REWARDS.get(designer).options.model_fields
        flat = [k for k in data if k not in cls.model_fields]
        moved = {k: data[k] for k in flat if k in mine}
        for key in flat:
            if key not in mine and (owners := _variants_with(key)):
                raise ValueError(
                    f"{key}: an option of {', '.join(owners)}, not of the {designer} designer "
                    f"reward; remove it (or set reward.designer)"
                )
        if not moved:
            return data
        rest = {k: v for k, v in data.items() if k not in moved}
        return {**rest, "options": {**moved, **dict(data.get("options") or {})}}

    @field_validator("designer")
    @classmethod
    def _designer(cls, v: str) -> str:
        from spade_train.core.rewards import DESIGNER_REWARDS

        if v not in DESIGNER_REWARDS:
            raise ValueError(str(DESIGNER_REWARDS.unknown(v)))
        return v

    @field_validator("reason_penalties")
    @classmethod
    def _reasons(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        import spade_corpus as sc

        from spade_train.core.design import PARSE_REASON_CODES
        from spade_train.reasons import PIPELINE_REASONS

        known = sorted(
            {*sc.VALIDATION_REASONS, *PARSE_REASON_CODES, *PIPELINE_REASONS, "duplicate"}
        )
        for code in v or {}:
            if code not in known:
                near = difflib.get_close_matches(code, known, n=1)
                tip = f" (did you mean {near[0]}?)" if near else ""
                raise ValueError(
                    f"unknown rejection reason {code!r}{tip}; see design/reasons codes"
                )
        return v

    @model_validator(mode="after")
    def _ranges(self) -> RewardConfig:
        if self.lp_gamma_fast <= self.lp_gamma_slow:
            raise ValueError("lp_gamma_fast must be greater than lp_gamma_slow")
        self.variant_options()
        return self

    def variant_options(self) -> RewardOptions:
        """``options`` as the variant's typed model; ValueError naming the key otherwise."""
        from spade_train.core.rewards import DESIGNER_REWARDS

        model = DESIGNER_REWARDS.get(self.designer).options
        try:
            return model.model_validate(self.options)
        except ValidationError as exc:
            err = exc.errors()[0]
            path = ".".join(["options", *(str(p) for p in err["loc"])])
            if err["type"] == "extra_forbidden":
                owners = _variants_with(str(err["loc"][-1]))
                where = f" (an option of {', '.join(owners)})" if owners else ""
                raise ValueError(
                    f"{path}: not an option of the {self.designer} reward{where}"
                ) from None
            msg = str(err["msg"]).removeprefix("Value error, ")
            shown = "" if err["type"] == "value_error" else f" (got {err.get('input')!r})"
            raise ValueError(f"{path}: {msg}{shown}") from None


def _variants_with(key: str) -> list[str]:
    """The registered designer rewards that have an option called ``key``."""
    from spade_train.core.rewards import DESIGNER_REWARDS

    return [
        n for n in DESIGNER_REWARDS.names() if key in DESIGNER_REWARDS.get(n).options.model_fields
    ]


class AdvantageConfig(Strict):
    """Agent and designer advantages (``spade_train.core.advantages``)."""

    agent: str = "grpo"
    """A registered agent advantage estimator (``spade_train.core.advantages.AGENT_ADVANTAGES``):
    grpo: per-game z-score of the returns (the paper launchers); ema-baseline: return minus an
    exponential average of the game's past mean returns (upstream's default)."""
    game_baseline_decay: float = Field(0.5, gt=0.0, lt=1.0)
    """``ema-baseline``: the decay of each game's average of past mean returns."""
    role_normalization: bool = True
    """Rescale each role's advantages to zero mean and unit deviation over the joint batch (so
    neither role's reward scale dominates)."""
    group_std_norm: bool = True
    """Divide each group's centered rewards by the group's standard deviation (GRPO); false:
    centering only (the paper launchers' ``--disable-grpo-std-normalization``)."""
    eps: float = Field(1e-6, gt=0.0)
    """Added to standard deviations before dividing (a group with a smaller one gets advantage 0).
    """
    compact_filter: bool = False
    """Train nothing of episodes cut off by the turn limit (loss mask zeroed)."""
    mask_malformed_tool_calls: bool = False
    """Train nothing of a tool-use reply that tried a call but could not be parsed."""

    @field_validator("agent")
    @classmethod
    def _agent(cls, v: str) -> str:
        from spade_train.core.advantages import AGENT_ADVANTAGES

        if v not in AGENT_ADVANTAGES:
            raise ValueError(str(AGENT_ADVANTAGES.unknown(v)))
        return v


class PoolConfig(Strict):
    capacity: int = Field(512, ge=1, le=MAX_COUNT)
    """The most environments the pool holds (the oldest leave first)."""
    retire_win_rate: float = Field(0.9, ge=0.0, le=1.0)
    """An environment whose unhinted win rate reaches this is retired (too easy to teach anything).
    """
    min_plays: int = Field(4, ge=1, le=MAX_COUNT)
    """Unhinted episodes an environment must have before it can be retired."""
    sampling: Literal["uniform", "frontier"] = "frontier"
    """How pool draws are weighted: ``uniform``, or ``frontier`` (games won about half the time, and
    those with regret, drawn more often)."""


class FixedConfig(Strict):
    corpus: str = "example"
    """A corpus directory, or ``example`` for the corpus shipped with spade-envs."""
    split: str = "train"
    """The corpus split that seeds the pool (``train``; ``heldout`` is for ``eval.heldout``)."""
    generators: list[str] = Field(default_factory=lambda: list(DEFAULT_GENERATORS))
    """``fixed-procedural``: the procedural generators played, in turn
    (``spade_train.core.procedural.generator_names()``)."""
    target_win_rate: tuple[float, float] = (0.3, 0.7)
    """``fixed-procedural``: the band of unhinted win rates each generator's level is kept in
    (raised above it, lowered below)."""


class RlveConfig(Strict):
    """``mode: fixed-rlve``: RLVE's environments (``pip install 'spade-train[rlve]'``) with the
    sliding-window difficulty of the released launchers (see ``spade_train.core.rlve_source``)."""

    envs: str | list[str] = "official16"
    """``official16``, ``all`` (every RLVE identifier) or a list of identifiers."""
    tau_acc: float = Field(0.9, ge=0.0, le=1.0)
    """The success rate at the window's top difficulty that moves the window up."""
    tau_num: int = Field(128, ge=1, le=MAX_COUNT)
    """How many plays at the top difficulty are judged at once (then the counters reset)."""
    d_delta: int = Field(4, ge=1, le=MAX_COUNT)
    """The widest the difficulty window gets (``high - low``)."""
    max_difficulty: int = Field(20, ge=0, le=MAX_COUNT)
    """The highest difficulty the window reaches."""
    same_problem: bool = True
    """All episodes of an environment in a cycle play one generated problem (one GRPO group)."""
    attempts: int = Field(1, ge=1, le=MAX_COUNT)
    """Answers allowed per episode (1: single turn, as upstream)."""
    reward: Literal["accuracy", "score"] = "accuracy"
    """``accuracy``: 1 when RLVE's verifier passes the answer, else 0 (upstream); ``score``:
    RLVE's own score in [-1, 1]."""

    @field_validator("envs")
    @classmethod
    def _envs(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, str) and v not in ("official16", "all"):
            raise ValueError(f"{v!r} is not an environment set; use official16, all or a list")
        if isinstance(v, list) and not v:
            raise ValueError("the list is empty; name at least one RLVE identifier")
        return v


class LoggingConfig(Strict):
    wandb: bool = False
    """Log every cycle's scalar metrics to Weights & Biases (``pip install 'spade-train[wandb]'``;
    ``WANDB_API_KEY``)."""
    tensorboard: bool = False
    """Log every cycle's scalar metrics for TensorBoard (under the run directory)."""
    transcripts_per_cycle: int = Field(8, ge=0, le=MAX_COUNT)
    """How many of a cycle's episodes are written to ``transcripts/`` (0: none)."""
    progress: bool = True
    """Show a progress bar per cycle stage (``spade train`` in a terminal)."""


class FixedModelEvalConfig(Strict):
    """A fixed chat model plays the latest designer round's environments every ``every``
    cycles; its pass rate per game measures their difficulty (``fixed_eval/*`` metrics,
    :mod:`spade_train.core.fixed_eval`; upstream's fixed-model evaluation). Never trained."""

    every: int = Field(0, ge=0, le=MAX_COUNT)
    """Cycles between evaluations (0: never; upstream's Tinker launchers: 16)."""
    endpoint: str = "https://api.openai.com/v1"
    """An OpenAI-compatible server: its root or its ``/v1`` (:class:`spade_envs.Endpoint`'s one
    convention)."""
    model: str = "gpt-5-mini"
    """The model the server is asked for."""
    api_key_env: str = "OPENAI_API_KEY"
    """The variable holding the key; unset, the evaluation is skipped with a warning (as
    upstream's Tinker trainer) and ``fixed_eval/skipped`` is 1."""
    plays_per_game: int | None = Field(None, ge=1, le=MAX_COUNT)
    """``None``: ``agent.episodes_per_env`` (upstream: its trajectories per game)."""
    temperature: float = Field(0.7, ge=0.0)
    """Sampling temperature of the fixed model."""
    max_new_tokens: int = Field(16384, ge=1, le=MAX_TOKENS)
    """The most tokens of one of its replies."""
    concurrency: int = Field(128, ge=1, le=MAX_COUNT)
    """Its calls in flight at once."""
    timeout_s: float = Field(120.0, gt=0.0)
    """Per call to the server."""


class EvalConfig(Strict):
    """In-loop evaluation: spade-eval on the policy being trained, through the same backend
    (no second copy of the model), every ``every`` cycles; ``eval/*`` metrics join the row."""

    every: int = Field(0, ge=0, le=MAX_COUNT)
    """Evaluate after every N-th cycle (and never when 0, the default)."""
    config: str = "quick"
    """A spade-eval config: a shipped name (quick, inloop, paper, …) or a YAML path."""
    suites: list[str] | None = None
    """Only these suites of the config (None: all of them)."""
    limit: int | None = Field(None, ge=1, le=MAX_COUNT)
    """At most this many items per suite (a quick signal on a small machine)."""
    heldout: str | None = None
    """A game corpus (``starter``, ``example`` or a corpus path) whose ``heldout`` split the
    agent plays after every ``heldout_every`` cycles, with and without each game's hint, the
    same number of episodes as in training; never trained. ``heldout/*`` metrics."""
    heldout_every: int = Field(1, ge=1, le=MAX_COUNT)
    """Play the held-out games after every N-th cycle."""
    heldout_hints: bool = True
    """Also play each held-out game's hinted episodes where the run plays hinted ones (a spade
    run whose designer reward reads them). False: the held-out games are played without hints
    only, the same episodes and episode seeds in every mode (``spade experiment`` sets it)."""
    fixed_model: FixedModelEvalConfig = Field(default_factory=FixedModelEvalConfig)
    """A fixed model's difficulty evaluation of the designer's environments."""


class CheckpointConfig(Strict):
    every: int = Field(1, ge=1, le=MAX_COUNT)
    """Checkpoint after every N-th cycle (and always after the last)."""
    keep: int = Field(2, ge=1, le=MAX_COUNT)
    """How many checkpoints stay on disk (the oldest are removed)."""


class ColdStartConfig(Strict):
    """A brief supervised warm-up of the policy before the first cycle
    (:mod:`spade_train.cold_start`); the warmed model is cached by everything that shapes it."""

    enabled: bool = False
    """Warm the policy up before the first cycle (only with a scaffolded designer in ``mode:
    spade``, unless ``every_mode``; see ``RunConfig.cold_start_applies``)."""
    every_mode: bool = False
    """Warm up in the fixed modes too (they never design, but a comparison of modes then starts
    every arm from the same weights; ``spade experiment`` sets it)."""
    epochs: int = Field(2, ge=1, le=MAX_COUNT)
    """Passes over the warm-up's examples."""
    lr: float = Field(3e-5, gt=0.0)
    """The warm-up's learning rate."""
    seed: int = Field(0, ge=0)
    """The warm-up's own seed (its sample order), not the run's: runs with other seeds share
    one cached warm-up, as they would share a released checkpoint."""
