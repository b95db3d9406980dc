"""The typed options of the built-in designer rewards (``reward.options`` in a recipe, checked
against the chosen variant's model when the recipe loads; :mod:`spade_train.core.rewards`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class RewardOptions(BaseModel):
    """A variant's own options (``reward.options``): strict (unknown keys refused), frozen.
    This base, with no field, is the model of every variant that has no option."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class SolveRateOptions(RewardOptions):
    """``solve-rate``: the plateau over the mean return (1 inside the band)."""

    plateau_low: float = Field(0.4, ge=0.0, le=1.0)
    """The lower edge of the band of mean returns where the plateau is 1."""
    plateau_high: float = Field(0.6, ge=0.0, le=1.0)
    """The upper edge of that band."""
    plateau_ramp: float = Field(0.25, gt=0.0)
    """How far outside the band the plateau falls linearly to 0."""

    @model_validator(mode="after")
    def _band(self) -> SolveRateOptions:
        if self.plateau_low > self.plateau_high:
            raise ValueError("plateau_low must not exceed plateau_high")
        return self


class BlendOptions(SolveRateOptions):
    """``blend``: ``plateau_weight * plateau + regret_weight * capped regret + micro_lp_weight *
    micro-LP - frontier_weight * frontier penalty`` (the released launchers' defaults)."""

    regret_weight: float = Field(0.4, ge=0.0)
    """Weight of the normalized hint regret."""
    regret_scale: float = Field(0.15, gt=0.0)
    """The regret is divided by this before weighting."""
    regret_floor: bool = True
    """Clip ``regret / regret_scale`` into ``[0, 1]``."""
    plateau_weight: float = Field(0.6, ge=0.0)
    """Weight of the solve-rate plateau."""
    micro_lp_weight: float = Field(0.0, ge=0.0)
    """Weight of the micro learning progress over the reward-delay window."""
    micro_lp_scale: float = Field(0.10, gt=0.0)
    """The micro learning progress is divided by this before weighting."""
    micro_lp_signed: bool = True
    """Keep a negative micro learning progress (False: floor it at 0)."""
    micro_lp_estimator: Literal["slope", "halves"] = "slope"
    """``slope``: weighted least-squares slope over the window; ``halves``: late minus early."""
    frontier_weight: float = Field(0.0, ge=0.0)
    """Weight of the penalty ``(rate - 0.5)^2 / frontier_scale``."""
    frontier_scale: float = Field(0.08, gt=0.0)
    """The frontier penalty is divided by this before weighting."""
