"""Exceptions of spade-eval: one root, each also the stdlib error it stands for."""


class SpadeEvalError(Exception):
    """Root of every spade-eval error."""


class EvalDataError(SpadeEvalError, FileNotFoundError):
    """A suite's data file is missing or unreadable; the message names it and how to get it."""


class EvalConfigError(SpadeEvalError, ValueError):
    """A config file or CLI argument is wrong; the message names the key and the fix."""


class ModelError(SpadeEvalError, RuntimeError):
    """The model endpoint or checkpoint failed after every retry."""


class SuiteSkipped(SpadeEvalError):
    """A suite cannot run in this setting (no endpoint, no user simulator); the message is the
    reason, reported under ``skipped`` in ``results.json``."""
