"""Designer rewards: every variant of the released SPADE code, behind one registry.

What the loop calls (batch level, so centering, scaling and masking see the whole batch)::

    scores = score_designers(outcomes, cfg.reward, state, n_agent_episodes=n)
    scores.rewards      # list[float | None]: one per outcome; None = masked (do not train it)
    designer_rewards(outcomes, cfg.reward, state, n_agent_episodes=n)  # == scores.rewards

- ``outcomes``: one :class:`EnvOutcome` per designer completion, in batch order.
- ``cfg``: :class:`RewardSettings`, the fields of :class:`spade_train.config.RewardConfig`
  that are read here, the variant's own options among them (``variant_options()``).
- ``state``: a :class:`RewardState` the loop keeps for the run (per-skill learning-potential
  trackers; checkpoint it with ``state_dict``). ``None`` = fresh trackers, not kept.
- ``n_agent_episodes``: agent episodes trained this cycle, for ``env_reward_scale: auto``
  (``min(n_agent / n_env * regeneration_interval, max_env_reward_scale)``; 1 when unknown).

Pipeline: an invalid completion gets ``invalid_penalty`` (``timeout_penalty`` when its
validation timed out), kept out of centering; with ``train_invalid`` false it is masked instead
(upstream, which keeps no sample of a design whose every attempt failed). Every valid one gets the variant's raw
signal; ``None`` masks it. Centered variants then subtract each skill's mean raw signal and
multiply by the env reward scale; uncentered ones keep the raw value.

Variants (``reward.designer``), each with the typed model of its own options
(``reward.options``; :class:`RewardOptions` when it has none): ``regret`` (floored hint
regret, play-time step timeout -0.5, the released default for games), ``regret-pure`` (the
paper's equation, uncentered), ``blend`` (plateau + capped regret + micro-LP - frontier,
negative blends masked; :class:`BlendOptions`), ``solve-rate`` (the plateau alone: the paper's
solve-rate control; :class:`SolveRateOptions`), ``micro-lp``, ``learning-potential`` (distance
of the mean return from the skill's slow average) and ``solver-variance`` (that plus the
variance bonus). Add one with :func:`register_designer_reward` or the
``spade_train.designer_rewards`` entry-point group. The arithmetic they share is
:mod:`spade_train.core.reward_math`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from spade_envs.plugins import Registry, RegistryError

from spade_train.core.learning_potential import LearningPotential
from spade_train.core.reward_math import (
    center_per_skill,
    early_late_means,  # noqa: F401  (public here too)
    env_reward_scale,
    frontier_penalty,
    mean,
    micro_lp,
    plateau,
    regret,
    variance_bonus,
    win_rate,  # noqa: F401  (public here too)
)
from spade_train.core.reward_options import BlendOptions, RewardOptions, SolveRateOptions

STEP_TIMEOUT_PENALTY = -0.5
"""Raw designer reward of a game whose ``step`` timed out during play (``regret`` variant)."""
ENTRY_POINT_GROUP = "spade_train.designer_rewards"


@dataclass(frozen=True)
class EnvOutcome:
    """What one designer completion produced.

    ``unhinted_returns``: the agent's returns without the hint this cycle; ``hinted_returns``:
    the hint plays' returns. ``returns_by_offset`` (delayed rewards) holds the unhinted returns
    per cycle offset since the completion (0 = its own cycle); when ``None`` the window is
    ``{0: unhinted_returns}``. ``step_timeout``: the environment's ``step`` timed out while
    the agent played it. ``first_turn_valid``: false when the code needed a repair turn.
    """

    valid: bool
    reason: str | None = None
    hinted_returns: Sequence[float] = field(default_factory=tuple)
    unhinted_returns: Sequence[float] = field(default_factory=tuple)
    skill: str | None = None
    timed_out: bool = False
    step_timeout: bool = False
    first_turn_valid: bool = True
    returns_by_offset: Mapping[int, Sequence[float]] | None = None
    env_id: str | None = None
    parsed: bool = True
    """The reply held a complete program (an invalid one was rejected by the validator, not
    by the reply's parse)."""
    copy_of: str | None = None
    """A valid design that is an exact or near copy of a shipped game: that game's id."""

    def window(self) -> dict[int, list[float]]:
        if self.returns_by_offset is None:
            return {0: [float(r) for r in self.unhinted_returns]}
        return {int(k): [float(r) for r in v] for k, v in self.returns_by_offset.items()}

    def window_returns(self) -> list[float]:
        w = self.window()
        return [r for k in sorted(w) for r in w[k]]


class RewardSettings(Protocol):
    """The fields of :class:`spade_train.config.RewardConfig` read here."""

    @property
    def designer(self) -> str: ...
    @property
    def invalid_penalty(self) -> float: ...
    @property
    def timeout_penalty(self) -> float: ...
    @property
    def parsed_invalid_penalty(self) -> float | None: ...
    @property
    def train_invalid(self) -> bool: ...
    @property
    def reason_penalties(self) -> Mapping[str, float] | None: ...
    @property
    def copy_reward(self) -> float | None: ...
    @property
    def per_skill_centering(self) -> bool | None: ...
    @property
    def env_reward_scale(self) -> float | str: ...
    @property
    def max_env_reward_scale(self) -> float: ...
    @property
    def regeneration_interval(self) -> int: ...
    @property
    def lp_gamma_fast(self) -> float: ...
    @property
    def lp_gamma_slow(self) -> float: ...

    def variant_options(self) -> RewardOptions:
        """The variant's options as its typed model."""
        ...


# -- run state ---------------------------------------------------------------------------------


@dataclass
class RewardState:
    """What the designer rewards carry across cycles: one learning-potential tracker per skill."""

    gamma_fast: float = 0.98
    gamma_slow: float = 0.85
    trackers: dict[str, LearningPotential] = field(default_factory=dict)

    def tracker(self, skill: str) -> LearningPotential:
        if skill not in self.trackers:
            self.trackers[skill] = LearningPotential(self.gamma_fast, self.gamma_slow)
        return self.trackers[skill]

    def update(self, skill_returns: Mapping[str, Sequence[float]]) -> None:
        """Fold each skill's mean return into its tracker (skills without returns skipped)."""
        for skill, returns in skill_returns.items():
            if returns:
                self.tracker(skill).update(mean(returns))

    def state_dict(self) -> dict[str, Any]:
        return {
            "gamma_fast": self.gamma_fast,
            "gamma_slow": self.gamma_slow,
            "trackers": {s: t.state_dict() for s, t in self.trackers.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.gamma_fast, self.gamma_slow = float(state["gamma_fast"]), float(state["gamma_slow"])
        self.trackers = {s: LearningPotential.from_state(t) for s, t in state["trackers"].items()}


# -- the variants ------------------------------------------------------------------------------

RawReward = Callable[[EnvOutcome, RewardOptions, RewardState], "float | None"]
"""``fn(outcome, options, state) -> raw signal`` for one valid completion (``options``: the
variant's typed options); ``None`` masks it."""
OptionsT = TypeVar("OptionsT", bound=RewardOptions)


@dataclass(frozen=True)
class DesignerReward:
    """A registered variant: its raw signal, the model of its options, whether the batch is
    centered per skill and scaled (``centered``), and whether it needs hint plays
    (``uses_hint``)."""

    name: str
    fn: RawReward
    centered: bool = True
    uses_hint: bool = False
    options: type[RewardOptions] = RewardOptions


def _skill(o: EnvOutcome) -> str:
    return o.skill or "unknown"


def _r_hint(o: EnvOutcome) -> float:
    return mean([float(r) for r in o.hinted_returns])


def _typed(options: RewardOptions, model: type[OptionsT]) -> OptionsT:
    if not isinstance(options, model):
        raise TypeError(f"expected {model.__name__}, got {type(options).__name__}")
    return options


def _regret_floored(o: EnvOutcome, options: RewardOptions, state: RewardState) -> float:
    if o.step_timeout:
        return STEP_TIMEOUT_PENALTY
    if not o.first_turn_valid or not o.hinted_returns:
        return 0.0  # no hint plays (the hint pass failed): no regret, as upstream per cycle
    return max(0.0, _r_hint(o) - mean(o.window_returns()))


def _regret_pure(o: EnvOutcome, options: RewardOptions, state: RewardState) -> float:
    return regret(o.hinted_returns, o.window_returns())


def blend_value(o: EnvOutcome, options: BlendOptions) -> float:
    """The blend's raw value (before masking): see :func:`_blend`."""
    b = options
    window = o.window()
    offsets = sorted(window)
    r_no_hint_0 = mean(window[offsets[0]]) if offsets else 0.0
    regret_norm = (_r_hint(o) - r_no_hint_0) / b.regret_scale
    if b.regret_floor:
        regret_norm = min(1.0, max(0.0, regret_norm))
    lp = micro_lp(window, slope=b.micro_lp_estimator == "slope", signed=b.micro_lp_signed)
    rate = mean(o.window_returns())
    flat = plateau(rate, b.plateau_low, b.plateau_high, b.plateau_ramp)
    return (
        b.regret_weight * regret_norm
        + b.micro_lp_weight * (lp / b.micro_lp_scale)
        + b.plateau_weight * flat
        - b.frontier_weight * (frontier_penalty(rate) / b.frontier_scale)
    )


def _blend(o: EnvOutcome, options: RewardOptions, state: RewardState) -> float | None:
    # Regret is matched in time: hint plays vs the unhinted plays of offset 0. The solve rate
    # is the mean return over the whole window. A negative blend is masked, not trained.
    value = blend_value(o, _typed(options, BlendOptions))
    return None if value < 0 else value


def _solve_rate(o: EnvOutcome, options: RewardOptions, state: RewardState) -> float:
    s = _typed(options, SolveRateOptions)
    return plateau(mean(o.window_returns()), s.plateau_low, s.plateau_high, s.plateau_ramp)


def _micro_lp(o: EnvOutcome, options: RewardOptions, state: RewardState) -> float:
    return micro_lp(o.window(), slope=False, signed=False)


def _learning_potential(o: EnvOutcome, state: RewardState, bonus: bool) -> float:
    if not o.first_turn_valid:
        return 0.0
    returns = o.window_returns()
    raw = abs(mean(returns) - state.tracker(_skill(o)).baseline()) if returns else 0.0
    if bonus and len(returns) > 1:
        raw += variance_bonus(returns)
    return raw


def _lp(o: EnvOutcome, options: RewardOptions, state: RewardState) -> float:
    return _learning_potential(o, state, bonus=False)


def _lp_variance(o: EnvOutcome, options: RewardOptions, state: RewardState) -> float:
    return _learning_potential(o, state, bonus=True)


def _from_entry_point(name: str, obj: object) -> DesignerReward:
    if isinstance(obj, DesignerReward):
        return DesignerReward(name, obj.fn, obj.centered, obj.uses_hint, obj.options)
    if callable(obj):
        return DesignerReward(name, obj)
    raise RegistryError(f"entry point {name} ({ENTRY_POINT_GROUP}) is not a designer reward")


DESIGNER_REWARDS: Registry[DesignerReward] = Registry(
    "designer reward", entry_points=ENTRY_POINT_GROUP, convert=_from_entry_point
)
"""Every designer reward by name (spade-envs' one registry)."""


def register_designer_reward(
    name: str,
    fn: RawReward,
    *,
    centered: bool = True,
    uses_hint: bool = False,
    options: type[RewardOptions] = RewardOptions,
) -> DesignerReward:
    """Register a designer reward under ``name`` with the model of its options; a name
    already taken is refused (:class:`spade_envs.RegistryError`)."""
    return DESIGNER_REWARDS.register(name, DesignerReward(name, fn, centered, uses_hint, options))


def designer_reward_names() -> list[str]:
    """Every registered variant, sorted (entry points included)."""
    return sorted(DESIGNER_REWARDS.names())


def get_designer_reward(name: str) -> DesignerReward:
    return DESIGNER_REWARDS.get(name)


register_designer_reward("regret", _regret_floored, uses_hint=True)
register_designer_reward("regret-pure", _regret_pure, centered=False, uses_hint=True)
register_designer_reward("blend", _blend, uses_hint=True, options=BlendOptions)
register_designer_reward("solve-rate", _solve_rate, options=SolveRateOptions)
register_designer_reward("micro-lp", _micro_lp)
register_designer_reward("learning-potential", _lp)
register_designer_reward("solver-variance", _lp_variance)


# -- the batch entry point ---------------------------------------------------------------------


@dataclass
class DesignerScores:
    """The designer rewards of one batch. ``rewards[i]`` is ``None`` when masked; ``raw[i]``
    is the variant's signal before centering (the penalty for invalid completions)."""

    rewards: list[float | None]
    raw: list[float | None]
    scale: float
    metrics: dict[str, float]


def _skill_returns(outcomes: Sequence[EnvOutcome]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for o in outcomes:
        if o.valid:
            out[_skill(o)].extend(o.window_returns())
    return out


def score_designers(
    outcomes: Sequence[EnvOutcome],
    cfg: RewardSettings,
    state: RewardState | None = None,
    *,
    n_agent_episodes: int | None = None,
    update_trackers_first: bool = False,
    skill_returns: Mapping[str, Sequence[float]] | None = None,
) -> DesignerScores:
    """Designer rewards of a batch (see the module docstring).

    The skill trackers in ``state`` take each skill's mean unhinted return once per call:
    after the raw signals are read (as upstream's per-cycle path), or before them with
    ``update_trackers_first`` (upstream's delayed recompute, which the delayed queue uses).
    ``skill_returns``: the returns the trackers take (upstream: every unhinted play of the
    cycle, pool replays included); default the outcomes' own returns.
    """
    spec = get_designer_reward(cfg.designer)
    options = cfg.variant_options()
    state = state if state is not None else RewardState(cfg.lp_gamma_fast, cfg.lp_gamma_slow)
    tracked = _skill_returns(outcomes) if skill_returns is None else skill_returns
    if update_trackers_first:
        state.update(tracked)
    raw: list[float | None] = []
    fixed: list[bool] = []  # a penalty or the copy reward: neither centered nor scaled
    for o in outcomes:
        if not o.valid and not cfg.train_invalid:
            fixed.append(True)  # upstream: a slot whose attempts all failed is not trained
            raw.append(None)
            continue
        value = _fixed_reward(o, cfg)
        fixed.append(value is not None)
        if value is None:
            value = spec.fn(o, options, state)
        raw.append(None if value is None else float(value))
    if not update_trackers_first:
        state.update(tracked)
    n_env = sum(o.valid for o in outcomes)
    if cfg.env_reward_scale == "auto":
        scale = env_reward_scale(
            n_env, n_agent_episodes or 0, cfg.regeneration_interval, cfg.max_env_reward_scale
        )
    else:
        scale = float(cfg.env_reward_scale)
    centered = spec.centered if cfg.per_skill_centering is None else cfg.per_skill_centering
    rewards: list[float | None] = list(raw)
    kept = [i for i, o in enumerate(outcomes) if not fixed[i] and raw[i] is not None]
    kept_raw = [float(v) for i in kept if (v := raw[i]) is not None]
    if centered and kept:
        centered_values = center_per_skill(kept_raw, [_skill(outcomes[i]) for i in kept])
        for i, v in zip(kept, centered_values, strict=True):
            rewards[i] = v * scale
    metrics = _batch_metrics(outcomes, raw, kept_raw, scale, n_env, state)
    return DesignerScores(rewards, raw, scale, metrics)


def _batch_metrics(
    outcomes: Sequence[EnvOutcome],
    raw: Sequence[float | None],
    kept_raw: Sequence[float],
    scale: float,
    n_env: int,
    state: RewardState,
) -> dict[str, float]:
    metrics = {
        "designer/raw_mean": mean(kept_raw),
        "designer/masked_frac": (
            sum(o.valid and raw[i] is None for i, o in enumerate(outcomes)) / n_env
            if n_env
            else 0.0
        ),
        "designer/scale": scale,
        "designer/step_timeout_frac": (
            sum(o.valid and o.step_timeout for o in outcomes) / n_env if n_env else 0.0
        ),
    }
    for skill, tracker in state.trackers.items():
        metrics[f"designer/skill_{skill}/baseline"] = tracker.baseline()
        metrics[f"designer/skill_{skill}/signed_lp"] = tracker.signed_potential()
    return metrics


def _fixed_reward(o: EnvOutcome, cfg: RewardSettings) -> float | None:
    """The reward of an outcome the variant does not score: an invalid design's penalty
    (its reason's entry in ``reason_penalties``, or its family's: ``probe_wins`` for
    ``probe_wins:common``; else ``parsed_invalid_penalty`` when its reply
    held a complete program and that is set), a copied design's ``copy_reward`` when set; None
    for the rest."""
    if not o.valid:
        if o.timed_out:
            return float(cfg.timeout_penalty)
        by_reason = cfg.reason_penalties or {}
        # A named reason ("probe_wins:common") falls back to its family ("probe_wins").
        for key in (o.reason, (o.reason or "").partition(":")[0]) if o.reason else ():
            if key in by_reason:
                return float(by_reason[key])
        parsed = cfg.parsed_invalid_penalty
        return float(parsed if o.parsed and parsed is not None else cfg.invalid_penalty)
    if o.copy_of is not None and cfg.copy_reward is not None:
        return float(cfg.copy_reward)
    return None


def designer_rewards(
    outcomes: Sequence[EnvOutcome],
    cfg: RewardSettings,
    state: RewardState | None = None,
    *,
    n_agent_episodes: int | None = None,
    skill_returns: Mapping[str, Sequence[float]] | None = None,
) -> list[float | None]:
    """The rewards of :func:`score_designers` (``None`` = masked)."""
    return score_designers(
        outcomes, cfg, state, n_agent_episodes=n_agent_episodes, skill_returns=skill_returns
    ).rewards


def designer_reward(outcome: EnvOutcome, cfg: RewardSettings) -> float:
    """One completion scored alone (no centering, no trackers): the variant's raw signal,
    0 where it would be masked. Kept for callers that score items one by one."""
    fixed = _fixed_reward(outcome, cfg)
    if fixed is not None:
        return fixed
    value = get_designer_reward(cfg.designer).fn(
        outcome, cfg.variant_options(), RewardState(cfg.lp_gamma_fast, cfg.lp_gamma_slow)
    )
    return 0.0 if value is None else float(value)
