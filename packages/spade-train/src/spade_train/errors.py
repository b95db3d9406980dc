"""Every error spade-train raises on purpose, under one root.

Each class also inherits the standard-library error it stands for, so callers that catch
``ValueError`` or ``RuntimeError`` keep working, and each pickles by its arguments (Ray carries
them between processes). The messages are one line naming the problem and the fix.
"""

from __future__ import annotations

from spade_envs.plugins import RegistryError as _RegistryError


class SpadeTrainError(Exception):
    """Root of spade-train's errors."""


class RecipeError(SpadeTrainError, ValueError):
    """A recipe or override is wrong; the message names the key path and what is allowed."""


class BackendError(SpadeTrainError, RuntimeError):
    """A backend could not be created or used; the message names the problem and the fix."""


class PlacementError(BackendError):
    """The Ray cluster cannot hold a recipe's placement; the message says what is missing."""


class RolloutError(BackendError):
    """One rollout request failed on the inference side (SGLang); ``kind`` names how.

    Raised per request, so a caller can keep the rest of a batch: ``aborted`` (the server
    aborted it: a pause for a weight update, a restart), ``prompt_too_long`` (the prompt does not
    fit the server's context), ``stale_weights`` (answered with weights older than the last
    publish), ``timeout`` (no answer within the time sized to its length), ``server`` (the
    server is unreachable or answered an error).
    """

    kind = "server"

    def __init__(self, message: str, rid: str | None = None) -> None:
        super().__init__(message, rid)
        self.message, self.rid = message, rid

    def __str__(self) -> str:
        return self.message


class GenerationAborted(RolloutError):
    """The server aborted the request before it finished (``finish_reason`` abort)."""

    kind = "aborted"


class PromptTooLong(RolloutError):
    """The prompt plus the requested tokens do not fit the server's context length."""

    kind = "prompt_too_long"


class StaleWeights(RolloutError):
    """The answer came from weights older than the version the backend last published."""

    kind = "stale_weights"


class RolloutTimeout(RolloutError):
    """No answer within the request's time limit (sized to its requested length)."""

    kind = "timeout"


BALANCED_STOP_UNSUPPORTED = (
    "sampling.balanced_stop is implemented by the local backend only, not by {backend}; "
    "set it false (stop strings then end a reply at their first occurrence)"
)


class RunDirError(SpadeTrainError, RuntimeError):
    """A run directory is missing or not usable; the message says what to do."""


class ModelError(SpadeTrainError, RuntimeError):
    """A model spec cannot be resolved; the message names it and the fix."""


RegistryError = _RegistryError
"""A name registered twice, or looked up but never registered: the one error of every
registry (backends, designer rewards, advantage estimators, environment sources), spade-envs'
:class:`spade_envs.RegistryError` (a ``ValueError``)."""


class UserError(SpadeTrainError):
    """A command-line mistake, reported by the ``spade`` CLI as one line."""
