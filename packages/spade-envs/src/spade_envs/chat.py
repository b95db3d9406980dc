"""Chat-format episodes: observations as user turns, agent replies as assistant turns.

Message layout: an optional system message, then the first observation as a user message (with
the privileged hint appended as ``"\\n\\nHINT: {hint}"`` when given, the way the released
environments expect), then alternating assistant replies and user observations.

Action format: the runner extracts the action from an agent reply as

1. the content of the LAST ``<action>…</action>`` tag, else
2. the LAST ``\\boxed{…}`` expression (braces balanced; passed on with its ``\\boxed`` wrapper,
   since cognitive-game environments read it themselves), else
3. the content of the LAST fenced code block.

A reply with none of these is *malformed*. ``on_malformed="forward"`` (default) passes the
whole reply to the environment, which answers with its own format message; ``"reprompt"`` does
not step the environment, appends :data:`FORMAT_REMINDER` as the next observation and counts
the turn with reward 0. Either way the turn is recorded with ``malformed=True``.

The runner stops after ``max_turns`` agent turns (truncated) even if the environment does not.
An exception from the environment or the agent ends that episode only: it is recorded in
``EpisodeResult.error`` with the boundary it came from.

Scoring (``run_episodes(scoring=...)``): ``"strict"`` (default) clips the return to
``RETURN_BOUNDS`` ``[0, 1]`` and never scores an error (return 0). ``"upstream"`` is what the
released SPADE training code does: the return is clipped to ``[-1, 1]`` and an environment or
sandbox failure (an exception in ``reset``/``step``, a step past its time limit) scores -1;
agent and infrastructure failures stay unscored in both. ``EpisodeResult.step_timeout`` marks
an environment that ran past its time limit (the designer is penalized for it).
"""

from __future__ import annotations

import collections
import json
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, Protocol, cast

from .actions import ParsedAction, parse_action
from .corpus_files import atomic_write_text
from .episode import EpisodeError, EpisodeResult, EpisodeSpec, Message, TurnRecord
from .episode_state import (
    DEFAULT_SYSTEM_PROMPT,
    FORMAT_REMINDER,
    TOOL_SYSTEM_PROMPT,
    Scoring,
    _Episode,
    _start_half,
)
from .errors import AgentTimeout

__all__ = [
    "Message",
    "Agent",
    "BatchAgent",
    "ParsedAction",
    "parse_action",
    "TurnRecord",
    "EpisodeError",
    "EpisodeResult",
    "EpisodeSpec",
    "Scoring",
    "run_episode",
    "run_episodes",
    "write_transcript",
    "DEFAULT_SYSTEM_PROMPT",
    "FORMAT_REMINDER",
    "TOOL_SYSTEM_PROMPT",
]


class Agent(Protocol):
    """Anything that maps the chat so far to the next reply."""

    def __call__(self, messages: list[Message]) -> str: ...


class BatchAgent(Protocol):
    """Replies to many chats at once (one batched generation call)."""

    def __call__(self, batch: list[list[Message]]) -> list[str]: ...


class _ToolBatchAgent(Protocol):
    """A :class:`BatchAgent` with ``accepts_tools = True``: it also gets each chat's tool specs."""

    def __call__(self, batch: list[list[Message]], *, tools: list[Any]) -> list[str]: ...


def run_episodes(
    specs: Sequence[EpisodeSpec],
    agent: BatchAgent,
    *,
    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
    on_malformed: Literal["forward", "reprompt"] = "forward",
    on_turn: Callable[[int, int], None] | None = None,
    concurrency: int | None = None,
    workers: int = 1,
    scoring: Scoring = "strict",
    agent_turn_s: float | None = None,
    agent_episode_s: float | None = None,
) -> list[EpisodeResult]:
    """Play many episodes in lockstep: each round, one batched agent call for all live episodes.

    The agent's time is bounded here, apart from the environment's (whose own calls the
    sandbox bounds): a batched call longer than ``agent_turn_s``, or an episode whose calls
    add up past ``agent_episode_s``, ends the episode with an ``agent`` error
    (:class:`~spade_envs.AgentTimeout`), never an environment error. None: unbounded.

    ``concurrency`` bounds the episodes in flight (and so each agent batch); a finished episode
    is closed at once and the next spec takes its place. None plays all of them together.
    ``workers`` threads start, step and close the round's environments at once: a sandboxed
    environment spends that time waiting on its worker process, so threads overlap the waits.
    Results come back in the order of ``specs`` and do not depend on ``workers``.
    ``on_turn(finished, total)`` is called after each round (for progress bars).
    ``scoring``: ``"strict"`` or ``"upstream"`` (see the module docstring).

    Tool-use episodes (``spec.tools`` or the environment's ``tools`` attribute): an agent with
    ``accepts_tools = True`` is called as ``agent(batch, tools=[specs or None per chat])`` and
    renders them natively (``apply_chat_template(..., tools=...)``); any other agent gets the
    tools as text (:func:`~spade_envs.render_tools_text`) in the system prompt. Replies are
    parsed with :func:`~spade_envs.parse_tool_calls`; tool results come back as ``"tool"``
    messages (see the package README).
    """
    _check_options(on_malformed, concurrency, workers, scoring)
    native = bool(getattr(agent, "accepts_tools", False))
    rounds = _Rounds([_Episode(spec, system_prompt, native, scoring) for spec in specs], workers)
    limit = concurrency or max(1, len(specs))
    try:
        while rounds.live or rounds.pending:
            rounds.admit(limit)
            if not rounds.live:
                continue
            asked = time.perf_counter()
            try:
                replies = rounds.ask(agent, native)
            except Exception as exc:
                rounds.fail_all(exc)
                break
            budget = (time.perf_counter() - asked, agent_turn_s, agent_episode_s)
            rounds.answer(replies, on_malformed, budget)
            if on_turn is not None:
                on_turn(sum(ep.done for ep in rounds.episodes), len(rounds.episodes))
    finally:
        rounds.close()
    return [r for r in rounds.results if r is not None]


def _check_options(on_malformed: str, concurrency: int | None, workers: int, scoring: str) -> None:
    if on_malformed not in ("forward", "reprompt"):
        raise ValueError(f"on_malformed must be 'forward' or 'reprompt', not {on_malformed!r}")
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency must be at least 1 (or None for all), not {concurrency}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if scoring not in ("strict", "upstream"):
        raise ValueError(f"scoring must be 'strict' or 'upstream', not {scoring!r}")


class _Rounds:
    """The lockstep state of :func:`run_episodes`: the episodes, which are waiting, live and
    finished, and the threads that start, step and close them."""

    def __init__(self, episodes: list[_Episode], workers: int) -> None:
        self.episodes = episodes
        self.results: list[EpisodeResult | None] = [None] * len(episodes)
        self.pending = collections.deque(range(len(episodes)))
        self.live: list[int] = []
        self.executor = (
            ThreadPoolExecutor(workers, thread_name_prefix="spade-episodes")
            if workers > 1
            else None
        )

    def each(self, fn: Callable[[Any], object], items: Sequence[Any]) -> None:
        if self.executor is None or len(items) < 2:
            for item in items:
                fn(item)
        else:
            list(self.executor.map(fn, items))

    def finish(self, index: int) -> None:
        self.results[index] = self.episodes[index].result()

    def _retire(self) -> None:
        """Record the episodes that ended; keep the others live."""
        self.each(self.finish, [i for i in self.live if self.episodes[i].done])
        self.live = [i for i in self.live if not self.episodes[i].done]

    def admit(self, limit: int) -> None:
        """Open and reset waiting episodes up to ``limit`` live ones."""
        eps, pending = self.episodes, self.pending
        admit = [pending.popleft() for _ in range(min(len(pending), limit - len(self.live)))]
        self.each(lambda i: eps[i].open(), admit)
        # as with steps below: resets that can be collected later are sent first
        later = {i for i in admit if _start_half(eps[i].env, "start_reset")}
        collects = [c for c in (eps[i].begin(split=True) for i in later) if c]
        try:
            self.each(lambda i: eps[i].begin(), [i for i in admit if i not in later])
        finally:
            for collect in collects:
                collect()
        self.live += admit
        self._retire()

    def ask(self, agent: BatchAgent, native: bool) -> list[Any]:
        """One batched agent call for every live episode."""
        chats = [self.episodes[i].messages for i in self.live]
        if native:
            tools = [self.episodes[i].tools for i in self.live]
            replies = cast(_ToolBatchAgent, agent)(chats, tools=tools)
        else:
            replies = agent(chats)
        if len(replies) != len(self.live):
            raise ValueError(f"agent returned {len(replies)} replies for {len(self.live)} chats")
        return replies

    def fail_all(self, exc: Exception) -> None:
        """The agent failed: every live and waiting episode ends with an agent error."""
        for i in [*self.live, *self.pending]:
            self.episodes[i].fail("agent", exc)
        self.each(self.finish, self.live)
        self.live, self.pending = [], collections.deque()

    def answer(
        self,
        replies: list[Any],
        on_malformed: Literal["forward", "reprompt"],
        budget: tuple[float, float | None, float | None],
    ) -> None:
        """Step each live episode with its reply (``budget``: the call's time and the turn and
        episode limits)."""
        took, turn_limit, episode_limit = budget

        def reply_to(pair: tuple[int, Any], split: bool = False) -> Callable[[], None] | None:
            ep, reply = self.episodes[pair[0]], pair[1]
            ep.agent_s += took
            over = _over_budget(took, ep.agent_s, turn_limit, episode_limit)
            if over:
                ep.fail("agent", AgentTimeout(over))
            elif not isinstance(reply, str):
                ep.fail("agent", TypeError(f"agent reply is {type(reply).__name__}, not str"))
            else:
                return ep.advance(reply, on_malformed, split)
            return None

        # Environments that can send a step and collect it later (sandboxed ones) get all
        # their steps sent first, from this thread; the others step on the worker threads
        # meanwhile; then the sent steps are collected. No thread waits on a worker.
        pairs = list(zip(self.live, replies, strict=True))
        halves = {i for i in self.live if _splits(self.episodes[i])}
        collects = [c for c in (reply_to(p, split=True) for p in pairs if p[0] in halves) if c]
        try:
            self.each(reply_to, [p for p in pairs if p[0] not in halves])
        finally:
            for collect in collects:
                collect()
        self._retire()

    def close(self) -> None:
        """Never-run or interrupted episodes closed and recorded; the threads stopped."""
        for index, result in enumerate(self.results):
            if result is None:
                self.finish(index)
        if self.executor is not None:
            self.executor.shutdown(wait=True)


def _splits(ep: _Episode) -> bool:
    """Whether the episode's next step can be sent now and collected later."""
    return ep.tools is None and _start_half(ep.env, "start_step") is not None


def _over_budget(
    turn_s: float, episode_s: float, turn_limit: float | None, episode_limit: float | None
) -> str | None:
    """Why the agent is over its time budget, or None."""
    if turn_limit is not None and turn_s > turn_limit:
        return f"the agent took {turn_s:.1f} s for one turn, past agent_turn_s={turn_limit:g}"
    if episode_limit is not None and episode_s > episode_limit:
        return f"the agent took {episode_s:.1f} s in this episode, past agent_episode_s={episode_limit:g}"
    return None


def run_episode(
    spec: EpisodeSpec,
    agent: Agent,
    *,
    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
    on_malformed: Literal["forward", "reprompt"] = "forward",
    scoring: Scoring = "strict",
) -> EpisodeResult:
    """Play one episode with a single-chat agent."""
    return run_episodes(
        [spec],
        lambda batch: [agent(m) for m in batch],
        system_prompt=system_prompt,
        on_malformed=on_malformed,
        scoring=scoring,
    )[0]


def write_transcript(result: EpisodeResult, path: str | os.PathLike[str]) -> Path:
    """Write an episode as JSON atomically (temp file in the same directory, then rename)."""
    return atomic_write_text(path, json.dumps(result.to_dict(), ensure_ascii=False, indent=1))
