"""The base of every run-configuration model: strict (unknown keys refused), assignments
checked, each field's docstring its description (what ``spade train --help-config`` and the
docs' config reference show), and the bounds shared by the sections."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

MAX_COUNT = 1_000_000
"""The largest count a recipe may give (cycles, prompts, episodes, workers, items…): a typo
such as ``cycles=99999999999999999999999`` is refused at load instead of running for ever."""
MAX_TOKENS = 1_048_576
"""The largest token budget a recipe may give (a context of a million tokens)."""


class Strict(BaseModel):
    """A config section: unknown keys refused, assignments validated, docstrings described."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, use_attribute_docstrings=True
    )
