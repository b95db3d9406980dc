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
