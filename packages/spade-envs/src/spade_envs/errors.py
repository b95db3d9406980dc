"""Exceptions of spade-envs: one root, each also the standard error it stands for.

Every exception pickles (so Ray and multiprocessing can carry it) and has a one-line message
that names the problem and the fix.
"""

from __future__ import annotations

__all__ = [
    "SpadeEnvsError",
    "ContractError",
    "SourceError",
    "CorpusError",
    "ChecksumError",
    "SandboxUnavailableError",
    "GemUnavailableError",
    "RlveUnavailableError",
    "HubUnavailableError",
    "FetchError",
    "RegistryError",
]


class SpadeEnvsError(Exception):
    """Root of every error raised by spade-envs."""


class ContractError(SpadeEnvsError, TypeError):
    """An environment breaks the contract of :mod:`spade_envs.core`.

    ``code`` is a short stable reason code (e.g. ``reset_return_type``) that validators record.
    """

    def __init__(self, code: str, message: str):
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class SourceError(SpadeEnvsError, ValueError):
    """Environment source cannot be loaded (syntax error, no or several ``*Env`` classes)."""


class CorpusError(SpadeEnvsError, ValueError):
    """A corpus is malformed: missing file or field, invalid JSON, duplicate id."""


class ChecksumError(CorpusError):
    """A corpus file's SHA-256 does not match its manifest or ``checksums.sha256``."""


class SandboxUnavailableError(SpadeEnvsError, ImportError):
    """Sandboxed loading was asked for but spade-sandbox is not installed."""


class AgentTimeout(SpadeEnvsError, TimeoutError):
    """The agent took longer than its per-turn or per-episode budget (``run_episodes``'
    ``agent_turn_s`` / ``agent_episode_s``): the agent's failure, never the environment's."""


class GemUnavailableError(SpadeEnvsError, ImportError):
    """A GEM environment was asked for but ``gem-llm`` is not installed."""


class RlveUnavailableError(SpadeEnvsError, ImportError):
    """An RLVE environment was asked for but ``rlve-gym`` is not installed."""


class HubUnavailableError(SpadeEnvsError, ImportError):
    """A download was asked for but ``huggingface_hub`` is not installed."""


class FetchError(SpadeEnvsError, OSError):
    """Downloading a released corpus failed (network, HTTP or a missing file); running the
    same command again resumes it."""


class RegistryError(SpadeEnvsError, ValueError):
    """A name registered twice, looked up but never registered, or an entry point that does
    not hold what its registry takes (:class:`spade_envs.plugins.Registry`, the one registry
    every SPADE package uses: rewards, advantage estimators, backends, environment sources,
    evaluation suites)."""
