"""The pure arithmetic of the designer rewards (no state, no configuration): regret, the
solve-rate plateau, micro learning progress, the variance bonus, centering and scaling. The
variants of :mod:`spade_train.core.rewards` are built from these."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence


def mean(xs: Sequence[float]) -> float:
    """The mean of ``xs`` (0 when empty)."""
    return sum(xs) / len(xs) if xs else 0.0


def regret(hinted: Sequence[float], unhinted: Sequence[float]) -> float:
    """Hint-based regret ``mean(R_hint) - mean(R_nohint)`` (0 when either side is empty)."""
    if not hinted or not unhinted:
        return 0.0
    return mean(hinted) - mean(unhinted)


def win_rate(returns: Sequence[float], threshold: float = 1.0) -> float:
    """Fraction of episodes whose return reached ``threshold`` (for logs; the rewards use the
    mean return, as upstream does)."""
    return mean([float(r >= threshold) for r in returns])


def plateau(rate: float, low: float = 0.4, high: float = 0.6, ramp: float = 0.25) -> float:
    """1 inside ``[low, high]``, falling linearly to 0 over ``ramp`` on either side."""
    if rate < low:
        return max(0.0, 1.0 - (low - rate) / ramp)
    if rate > high:
        return max(0.0, 1.0 - (rate - high) / ramp)
    return 1.0


def variance_bonus(returns: Sequence[float]) -> float:
    """``exp(-(var - 0.25)^2 / 0.02)``: largest when the plays split evenly between 0 and 1."""
    m = mean(returns)
    var = mean([(r - m) ** 2 for r in returns])
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
    return mean(early), mean(late)


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
        ys = [mean(window[o]) for o in offsets]
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
    means = {s: mean(v) for s, v in by_skill.items()}
    return [r - means[s] for r, s in zip(rewards, skills, strict=True)]
