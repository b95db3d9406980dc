"""Exceptions of spade-envs: one root, each also the standard error it stands for.

Every exception pickles (so Ray and multiprocessing can carry it) and has a one-line message
that names the problem and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "SpadeEnvsError",
    "ContractError",
    "Evidence",
    "EVIDENCE_CHARS",
    "SourceError",
    "CorpusError",
    "ChecksumError",
    "SandboxUnavailableError",
    "GemUnavailableError",
    "RlveUnavailableError",
    "HubUnavailableError",
    "FetchError",
    "RegistryError",
    "EndpointError",
    "EndpointUnavailableError",
]


class SpadeEnvsError(Exception):
    """Root of every error raised by spade-envs."""


@dataclass(frozen=True)
class Evidence:
    """What a rejection saw: the ``probe`` (policy or check) that showed it, the ``seed`` it
    was played on (None when it holds across seeds) and an ``excerpt`` of the observation,
    action or text at fault (at most :data:`EVIDENCE_CHARS` characters).

    Plain data, so a designer-side feedback prompt or a person can read why."""

    probe: str
    seed: int | None
    excerpt: str

    @classmethod
    def of(cls, probe: str, seed: int | None, text: str, around: str = "") -> Evidence:
        """Evidence whose excerpt is ``text`` cut to the window around ``around`` (when found)."""
        start = max(text.find(around) - EVIDENCE_CHARS // 2, 0) if around else 0
        excerpt = " ".join(text[start : start + EVIDENCE_CHARS].split())
        return cls(probe, seed, excerpt)

    def to_dict(self) -> dict[str, str | int | None]:
        """JSON data: ``{"probe", "seed", "excerpt"}``."""
        return {"probe": self.probe, "seed": self.seed, "excerpt": self.excerpt}


#: The longest excerpt an :class:`Evidence` keeps.
EVIDENCE_CHARS = 160


class ContractError(SpadeEnvsError, TypeError):
    """An environment breaks the contract of :mod:`spade_envs.core`.

    ``code`` is a short stable reason code (e.g. ``reset_return_type``) that validators record.
    """

    def __init__(self, code: str, message: str, evidence: Evidence | None = None):
        super().__init__(code, message, evidence)
        self.code = code
        self.message = message
        self.evidence = evidence

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


class EndpointError(SpadeEnvsError, RuntimeError):
    """A call to an OpenAI-compatible endpoint failed for good (:class:`spade_envs.Endpoint`):
    refused, timed out or answered 429/5xx through every retry, answered another HTTP error, or
    returned something that is not a chat completion. The message is one line naming the URL
    and the cause."""


class EndpointUnavailableError(SpadeEnvsError, ImportError):
    """An OpenAI-compatible endpoint was asked for but the ``openai`` SDK is not installed
    (``pip install 'spade-envs[endpoint]'``)."""
