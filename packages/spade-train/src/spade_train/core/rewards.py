"""Designer rewards: every variant of the released SPADE code, behind one registry.

What the loop calls (batch level, so centering, scaling and masking see the whole batch)::

    scores = score_designers(outcomes, cfg.reward, state, n_agent_episodes=n)
    scores.rewards      # list[float | None]: one per outcome; None = masked (do not train it)
    designer_rewards(outcomes, cfg.reward, state, n_agent_episodes=n)  # == scores.rewards

- ``outcomes``: one :class:`EnvOutcome` per designer completion, in batch order.
- ``cfg``: :class:`spade_train.config.RewardConfig` (any object with its fields).
- ``state``: a :class:`RewardState` the loop keeps for the run (per-skill learning-potential
  trackers; checkpoint it with ``state_dict``). ``None`` = fresh trackers, not kept.
- ``n_agent_episodes``: agent episodes trained this cycle, for ``env_reward_scale: auto``
  (``min(n_agent / n_env * regeneration_interval, max_env_reward_scale)``; 1 when unknown).

Pipeline: an invalid completion gets ``invalid_penalty`` (``timeout_penalty`` when its
validation timed out), kept out of centering; with ``train_invalid`` false it is masked instead
(upstream, which keeps no sample of a design whose every attempt failed). Every valid one gets the variant's raw
signal; ``None`` masks it. Centered variants then subtract each skill's mean raw signal and
multiply by the env reward scale; uncentered ones keep the raw value.

Variants (``reward.designer``): ``regret`` (floored hint regret, play-time step timeout
-0.5, the released default for games), ``regret-pure`` (the paper's equation, uncentered),
``blend`` (plateau + capped regret + micro-LP - frontier, negative blends masked),
``solve-rate`` (the plateau alone: the paper's solve-rate control), ``micro-lp``,
``learning-potential`` (distance of the mean return from the skill's slow average) and
``solver-variance`` (that plus the variance bonus). Add one with
:func:`register_designer_reward` or the ``spade_train.designer_rewards`` entry-point group.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from spade_envs.plugins import Registry, RegistryError

from spade_train.core.learning_potential import LearningPotential

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

    designer: str
    invalid_penalty: float
    timeout_penalty: float
    parsed_invalid_penalty: float | None
    train_invalid: bool
    reason_penalties: Mapping[str, float] | None
    copy_reward: float | None
    per_skill_centering: bool | None
    env_reward_scale: float | str
    max_env_reward_scale: float
    regeneration_interval: int
    regret_weight: float
    regret_scale: float
    regret_floor: bool
    plateau_weight: float
    plateau_low: float
    plateau_high: float
    plateau_ramp: float
    micro_lp_weight: float
    micro_lp_scale: float
    micro_lp_signed: bool
    micro_lp_estimator: str
    frontier_weight: float
    frontier_scale: float
    lp_gamma_fast: float
    lp_gamma_slow: float


# -- pure pieces -------------------------------------------------------------------------------


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def regret(hinted: Sequence[float], unhinted: Sequence[float]) -> float:
    """Hint-based regret ``mean(R_hint) - mean(R_nohint)`` (0 when either side is empty)."""
    if not hinted or not unhinted:
        return 0.0
    return _mean(hinted) - _mean(unhinted)


def win_rate(returns: Sequence[float], threshold: float = 1.0) -> float:
    """Fraction of episodes whose return reached ``threshold`` (for logs; the rewards use the
    mean return, as upstream does)."""
    return _mean([float(r >= threshold) for r in returns])


def plateau(rate: float, low: float = 0.4, high: float = 0.6, ramp: float = 0.25) -> float:
    """1 inside ``[low, high]``, falling linearly to 0 over ``ramp`` on either side."""
    if rate < low:
        return max(0.0, 1.0 - (low - rate) / ramp)
    if rate > high:
        return max(0.0, 1.0 - (rate - high) / ramp)
    return 1.0


def variance_bonus(returns: Sequence[float]) -> float:
    """``exp(-(var - 0.25)^2 / 0.02)``: largest when the plays split evenly between 0 and 1."""
    m = _mean(returns)
    var = _mean([(r - m) ** 2 for r in returns])
    return math.exp(-((var - 0.25) ** 2) / (2 * 0.01))


def env_reward_scale(
    n_env: int, n_agent: int, regeneration_interval: int = 1, max_scale: float = 50.0
) -> float:
    """``min(n_agent / n_env * regeneration_interval, max_scale)``; 1 when a count is 0."""
    if n_env <= 0 or n_agent <= 0:
        return 1.0
    return min(n_agent / n_env * regeneration_interval, max_scale)


def early_late_means(window: Mapping[int, Sequence[float]]) -> tuple[float, float]:
    """Mean return over the early and late halves of the window's offsets (an odd middle
    offset counts as late)."""
    offsets = sorted(window)
    mid = len(offsets) // 2
    early = [r for o in offsets[:mid] for r in window[o]]
    late = [r for o in offsets[mid:] for r in window[o]]
    return _mean(early), _mean(late)


def _wls_slope(xs: Sequence[float], ys: Sequence[float], weights: Sequence[float]) -> float:
    # Least squares with weights w on the residuals (numpy.polyfit's w): minimizes sum (w r)^2.
    w2 = [w * w for w in weights]
    total = sum(w2)
    mx = sum(w * x for w, x in zip(w2, xs, strict=True)) / total
    my = sum(w * y for w, y in zip(w2, ys, strict=True)) / total
    sxy = sum(w * (x - mx) * (y - my) for w, x, y in zip(w2, xs, ys, strict=True))
    sxx = sum(w * (x - mx) ** 2 for w, x in zip(w2, xs, strict=True))
    return sxy / sxx if sxx > 0 else 0.0


def micro_lp(
    window: Mapping[int, Sequence[float]], *, slope: bool = True, signed: bool = True
) -> float:
    """How much the agent improved on a game over the window (0 with fewer than 2 offsets).

    ``slope``: weighted least-squares slope of the per-offset mean return (weights
    ``sqrt(plays)``) times ``offsets - 1``; else late-half minus early-half mean.
    ``signed=False`` floors it at 0.
    """
    offsets = sorted(window)
    if len(offsets) < 2:
        return 0.0
    if slope:
        ys = [_mean(window[o]) for o in offsets]
        ws = [math.sqrt(max(len(window[o]), 1)) for o in offsets]
        value = _wls_slope(list(range(len(offsets))), ys, ws) * (len(offsets) - 1)
    else:
        early, late = early_late_means(window)
        value = late - early
    return value if signed else max(0.0, value)


def frontier_penalty(rate: float) -> float:
    """``(rate - 0.5)^2``: distance from the most learnable solve rate."""
    return (rate - 0.5) ** 2


def center_per_skill(rewards: Sequence[float], skills: Sequence[str]) -> list[float]:
    """Each reward minus the mean reward of its skill in this batch."""
    if len(rewards) != len(skills):
        raise ValueError(f"{len(rewards)} rewards but {len(skills)} skills")
    by_skill: dict[str, list[float]] = defaultdict(list)
    for r, s in zip(rewards, skills, strict=True):
        by_skill[s].append(r)
    means = {s: _mean(v) for s, v in by_skill.items()}
    return [r - means[s] for r, s in zip(rewards, skills, strict=True)]


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
                self.tracker(skill).update(_mean(returns))

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

RawReward = Callable[[EnvOutcome, Any, RewardState], "float | None"]
"""``fn(outcome, cfg, state) -> raw signal`` for one valid completion; ``None`` masks it."""


@dataclass(frozen=True)
class DesignerReward:
    """A registered variant: its raw signal and whether the batch is centered per skill and
    scaled (``centered``), and whether it needs hint plays (``uses_hint``)."""

    name: str
    fn: RawReward
    centered: bool = True
    uses_hint: bool = False


def _skill(o: EnvOutcome) -> str:
    return o.skill or "unknown"


def _r_hint(o: EnvOutcome) -> float:
    return _mean([float(r) for r in o.hinted_returns])


def _regret_floored(o: EnvOutcome, cfg: Any, state: RewardState) -> float:
    if o.step_timeout:
        return STEP_TIMEOUT_PENALTY
    if not o.first_turn_valid or not o.hinted_returns:
        return 0.0  # no hint plays (the hint pass failed): no regret, as upstream per cycle
    return max(0.0, _r_hint(o) - _mean(o.window_returns()))


def _regret_pure(o: EnvOutcome, cfg: Any, state: RewardState) -> float:
    return regret(o.hinted_returns, o.window_returns())


def blend_value(o: EnvOutcome, cfg: Any) -> float:
    """The blend's raw value (before masking): see :func:`_blend`."""
    window = o.window()
    offsets = sorted(window)
    r_no_hint_0 = _mean(window[offsets[0]]) if offsets else 0.0
    regret_norm = (_r_hint(o) - r_no_hint_0) / cfg.regret_scale
    if cfg.regret_floor:
        regret_norm = min(1.0, max(0.0, regret_norm))
    lp = micro_lp(window, slope=cfg.micro_lp_estimator == "slope", signed=cfg.micro_lp_signed)
    rate = _mean(o.window_returns())
    flat = plateau(rate, cfg.plateau_low, cfg.plateau_high, cfg.plateau_ramp)
    return (
        cfg.regret_weight * regret_norm
        + cfg.micro_lp_weight * (lp / cfg.micro_lp_scale)
        + cfg.plateau_weight * flat
        - cfg.frontier_weight * (frontier_penalty(rate) / cfg.frontier_scale)
    )


def _blend(o: EnvOutcome, cfg: Any, state: RewardState) -> float | None:
    # Regret is matched in time: hint plays vs the unhinted plays of offset 0. The solve rate
    # is the mean return over the whole window. A negative blend is masked, not trained.
    value = blend_value(o, cfg)
    return None if value < 0 else value


def _solve_rate(o: EnvOutcome, cfg: Any, state: RewardState) -> float:
    rate = _mean(o.window_returns())
    return plateau(rate, cfg.plateau_low, cfg.plateau_high, cfg.plateau_ramp)


def _micro_lp(o: EnvOutcome, cfg: Any, state: RewardState) -> float:
    return micro_lp(o.window(), slope=False, signed=False)


def _learning_potential(o: EnvOutcome, cfg: Any, state: RewardState, bonus: bool) -> float:
    if not o.first_turn_valid:
        return 0.0
    returns = o.window_returns()
    raw = abs(_mean(returns) - state.tracker(_skill(o)).baseline()) if returns else 0.0
    if bonus and len(returns) > 1:
        raw += variance_bonus(returns)
    return raw


def _from_entry_point(name: str, obj: object) -> DesignerReward:
    if isinstance(obj, DesignerReward):
        return DesignerReward(name, obj.fn, obj.centered, obj.uses_hint)
    if callable(obj):
        return DesignerReward(name, obj)
    raise RegistryError(f"entry point {name} ({ENTRY_POINT_GROUP}) is not a designer reward")


DESIGNER_REWARDS: Registry[DesignerReward] = Registry(
    "designer reward", entry_points=ENTRY_POINT_GROUP, convert=_from_entry_point
)
"""Every designer reward by name (spade-envs' one registry)."""


def register_designer_reward(
    name: str, fn: RawReward, *, centered: bool = True, uses_hint: bool = False
) -> DesignerReward:
    """Register a designer reward under ``name``; a name already taken is refused
    (:class:`spade_envs.RegistryError`)."""
    return DESIGNER_REWARDS.register(name, DesignerReward(name, fn, centered, uses_hint))


def designer_reward_names() -> list[str]:
    """Every registered variant, sorted (entry points included)."""
    return sorted(DESIGNER_REWARDS.names())


def get_designer_reward(name: str) -> DesignerReward:
    return DESIGNER_REWARDS.get(name)


register_designer_reward("regret", _regret_floored, uses_hint=True)
register_designer_reward("regret-pure", _regret_pure, centered=False, uses_hint=True)
register_designer_reward("blend", _blend, uses_hint=True)
register_designer_reward("solve-rate", _solve_rate)
register_designer_reward("micro-lp", _micro_lp)
register_designer_reward(
    "learning-potential", lambda o, c, s: _learning_potential(o, c, s, bonus=False)
)
register_designer_reward(
    "solver-variance", lambda o, c, s: _learning_potential(o, c, s, bonus=True)
)


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
    cfg: Any,
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
    state = state if state is not None else RewardState(cfg.lp_gamma_fast, cfg.lp_gamma_slow)
    tracked = _skill_returns(outcomes) if skill_returns is None else skill_returns
    if update_trackers_first:
        state.update(tracked)
    raw: list[float | None] = []
    fixed: list[bool] = []  # a penalty or the copy reward: neither centered nor scaled
    for o in outcomes:
        if not o.valid and not getattr(cfg, "train_invalid", True):
            fixed.append(True)  # upstream: a slot whose attempts all failed is not trained
            raw.append(None)
            continue
        value = _fixed_reward(o, cfg)
        fixed.append(value is not None)
        if value is None:
            value = spec.fn(o, cfg, state)
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
    if centered and kept:
        values = [float(raw[i]) for i in kept]  # type: ignore[arg-type]
        centered_values = center_per_skill(values, [_skill(outcomes[i]) for i in kept])
        for i, v in zip(kept, centered_values, strict=True):
            rewards[i] = v * scale
    valid_raw = [float(raw[i]) for i in kept]  # type: ignore[arg-type]
    metrics = {
        "designer/raw_mean": _mean(valid_raw),
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
    return DesignerScores(rewards, raw, scale, metrics)


def _fixed_reward(o: EnvOutcome, cfg: Any) -> float | None:
    """The reward of an outcome the variant does not score: an invalid design's penalty
    (its reason's entry in ``reason_penalties``, else ``parsed_invalid_penalty`` when its reply
    held a complete program and that is set), a copied design's ``copy_reward`` when set; None
    for the rest."""
    if not o.valid:
        if o.timed_out:
            return float(cfg.timeout_penalty)
        by_reason = getattr(cfg, "reason_penalties", None) or {}
        if o.reason in by_reason:
            return float(by_reason[o.reason])
        parsed = getattr(cfg, "parsed_invalid_penalty", None)
        return float(parsed if o.parsed and parsed is not None else cfg.invalid_penalty)
    copied = getattr(cfg, "copy_reward", None)
    if o.copy_of is not None and copied is not None:
        return float(copied)
    return None


def designer_rewards(
    outcomes: Sequence[EnvOutcome],
    cfg: Any,
    state: RewardState | None = None,
    *,
    n_agent_episodes: int | None = None,
    skill_returns: Mapping[str, Sequence[float]] | None = None,
) -> list[float | None]:
    """The rewards of :func:`score_designers` (``None`` = masked)."""
    return score_designers(
        outcomes, cfg, state, n_agent_episodes=n_agent_episodes, skill_returns=skill_returns
    ).rewards


def designer_reward(outcome: EnvOutcome, cfg: Any) -> float:
    """One completion scored alone (no centering, no trackers): the variant's raw signal,
    0 where it would be masked. Kept for callers that score items one by one."""
    fixed = _fixed_reward(outcome, cfg)
    if fixed is not None:
        return fixed
    value = get_designer_reward(cfg.designer).fn(
        outcome, cfg, RewardState(cfg.lp_gamma_fast, cfg.lp_gamma_slow)
    )
    return 0.0 if value is None else float(value)
