"""One chat episode's state as the runner (`chat.run_episodes`) advances it turn by turn.

The system prompts and the format reminder live here with it; `spade_envs.chat` re-exports
them. `_start_half` finds an environment's send-now, collect-later `start_step` /
`start_reset` (only where its class declares one).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Literal

from .actions import ParsedAction, parse_action
from .core import (
    RETURN_BOUNDS,
    REWARD_BOUNDS,
    StepResult,
    TextEnvironment,
    episode_return,
    with_hint,
)
from .episode import EpisodeError, EpisodeResult, EpisodeSpec, Message, TurnRecord
from .tools import TOOL_CALL_FORMAT_TEXT, canonical_action, parse_tool_calls, render_tools_text

Scoring = Literal["strict", "upstream"]

DEFAULT_SYSTEM_PROMPT = (
    "You are playing a text game. Read each observation, think briefly, then end your reply with "
    "your move. Write answers as \\boxed{...} exactly as the game asks."
)
TOOL_SYSTEM_PROMPT = (
    "You are solving a task with tools. Call tools to gather what you need, reading each result "
    "before the next call. When you know the answer, reply with \\boxed{your final answer} and no "
    "tool call."
)
FORMAT_REMINDER = "No action found in your reply. End your reply with your move, e.g. \\boxed{...}."


def _boundary(exc: BaseException) -> str:
    # spade-sandbox errors carry `is_infrastructure`; duck-typed so this package need not import it.
    if hasattr(exc, "reason"):
        return "infrastructure" if getattr(exc, "is_infrastructure", False) else "sandbox"
    return "environment"


class _Episode:
    def __init__(
        self,
        spec: EpisodeSpec,
        system_prompt: str | None,
        native_tools: bool = False,
        scoring: Scoring = "strict",
    ):
        self.spec = spec
        self.scoring = scoring
        self.max_turns = spec.max_turns
        self.step_timeout = False
        self.env: TextEnvironment | None = None
        self.system_prompt = system_prompt
        self.native_tools = native_tools
        self.tools: list[dict[str, Any]] | None = spec.tools
        self.messages: list[Message] = []
        self.turns: list[TurnRecord] = []
        self.done = False
        self.terminated = self.truncated = False
        self.error: EpisodeError | None = None
        self.started = time.perf_counter()
        self.agent_s = 0.0  # the agent's generation time charged to this episode

    def fail(self, boundary: str, exc: BaseException) -> None:
        self.error = EpisodeError(boundary, type(exc).__name__, str(exc)[:2000])
        self.step_timeout = boundary != "agent" and isinstance(exc, TimeoutError)
        self.done = True

    def build(self) -> TextEnvironment:
        if not self.spec.respect_env_max_turns:
            return self.spec.factory(**{"max_turns": self.spec.max_turns, **self.spec.env_kwargs})
        env = self.spec.factory(**self.spec.env_kwargs)
        own = getattr(env, "max_turns", None)
        if isinstance(own, int) and own > 0:
            self.max_turns = min(own, self.spec.max_turns)
            try:
                env.max_turns = self.max_turns  # type: ignore[attr-defined]
            except Exception:
                pass  # a read-only attribute: the runner still stops at self.max_turns
        return env

    def open(self) -> None:
        """Build the environment (a failure ends the episode)."""
        try:
            self.env = self.build()
        except Exception as exc:
            self.fail(_boundary(exc), exc)

    def begin(self, split: bool = False) -> Callable[[], None] | None:
        """Reset the environment and write the first messages. With ``split`` and an
        environment offering ``start_reset`` the reset is only sent: the returned callable
        collects it and writes them (as ``advance`` does for steps)."""
        if self.done or self.env is None:
            return None
        env = self.env
        start = _start_half(env, "start_reset") if split else None
        if start is None:
            self._opened(lambda: env.reset(seed=self.spec.seed))
            return None
        try:
            collect = start(self.spec.seed)
        except Exception as exc:
            self.fail(_boundary(exc), exc)
            return None
        return lambda: self._opened(collect)

    def _opened(self, reset: Callable[[], tuple[str, dict]]) -> None:
        try:
            observation, _ = reset()
            if self.tools is None:
                found = getattr(self.env, "tools", None)
                self.tools = (
                    [dict(t) for t in found] if isinstance(found, (list, tuple)) and found else None
                )
        except Exception as exc:
            self.fail(_boundary(exc), exc)
            return
        system = self.system_prompt
        if self.tools is not None:
            system = TOOL_SYSTEM_PROMPT if system == DEFAULT_SYSTEM_PROMPT else system
            if not self.native_tools:
                system = (
                    f"{system}\n\n{render_tools_text(self.tools)}"
                    if system
                    else render_tools_text(self.tools)
                )
        if system:
            self.messages.append({"role": "system", "content": system})
        self.messages.append({"role": "user", "content": with_hint(observation, self.spec.hint)})

    def advance_tools(self, reply: str) -> None:
        parsed = parse_tool_calls(reply, self.tools)
        action = canonical_action(parsed)
        self.messages.append({"role": "assistant", "content": reply})
        info: dict[str, Any]
        if action is None:
            observation = f"error ({parsed.outcome}): {parsed.error}\n{TOOL_CALL_FORMAT_TEXT}"
            reward, terminated, truncated, info = 0.0, False, False, {}
        else:
            env = self.env
            assert env is not None, "advance() before open()"
            outcome = self._outcome(lambda: env.step(action))
            if outcome is None:
                return
            observation, reward, terminated, truncated, info = outcome
        if not terminated and len(self.turns) + 1 >= self.max_turns:
            truncated = True
        calls = [c.to_dict() for c in parsed.calls] or None
        self.turns.append(
            TurnRecord(
                reply,
                action or reply,
                action is None,
                observation,
                reward,
                bool(terminated),
                bool(truncated),
                info,
                parse_outcome=parsed.outcome,
                tool_calls=calls,
            )
        )
        role = "tool" if parsed.outcome == "tool_calls" else "user"
        self.messages.append({"role": role, "content": observation})
        if terminated or truncated:
            self.terminated, self.truncated, self.done = bool(terminated), bool(truncated), True

    def advance(
        self, reply: str, on_malformed: str, split: bool = False
    ) -> Callable[[], None] | None:
        """Play one reply. With ``split`` and an environment that offers ``start_step`` (a
        sandboxed one), the step is only sent: the returned callable collects it and ends
        the turn. Otherwise the turn is over on return (and None comes back)."""
        if self.tools is not None:
            self.advance_tools(reply)
            return None
        parsed = parse_action(reply)
        self.messages.append({"role": "assistant", "content": reply})
        if parsed.malformed and on_malformed == "reprompt":
            self._record(reply, parsed, (FORMAT_REMINDER, 0.0, False, False, {}))
            return None
        env = self.env
        assert env is not None, "advance() before open()"
        start = _start_half(env, "start_step") if split else None
        if start is None:
            self._record(reply, parsed, self._outcome(lambda: env.step(parsed.action)))
            return None
        try:
            collect = start(parsed.action)
        except Exception as exc:
            self.fail(_boundary(exc), exc)
            return None
        return lambda: self._record(reply, parsed, self._outcome(collect))

    def _outcome(self, step: Callable[[], StepResult]) -> StepResult | None:
        """The step's result with a checked reward, or None after recording its failure."""
        try:
            observation, reward, terminated, truncated, info = step()
            reward = float(reward)
            if not math.isfinite(reward):
                raise ValueError(f"step returned a non-finite reward {reward}")
        except Exception as exc:
            self.fail(_boundary(exc), exc)
            return None
        return observation, reward, terminated, truncated, info

    def _record(self, reply: str, parsed: ParsedAction, outcome: StepResult | None) -> None:
        if outcome is None:
            return
        observation, reward, terminated, truncated, info = outcome
        if not terminated and len(self.turns) + 1 >= self.max_turns:
            truncated = True
        self.turns.append(
            TurnRecord(
                reply,
                parsed.action,
                parsed.malformed,
                observation,
                reward,
                bool(terminated),
                bool(truncated),
                info,
            )
        )
        self.messages.append({"role": "user", "content": observation})
        if terminated or truncated:
            self.terminated, self.truncated, self.done = bool(terminated), bool(truncated), True

    def result(self) -> EpisodeResult:
        if self.env is not None:
            try:
                self.env.close()
            except Exception:
                pass  # closing is best effort; the episode's outcome is already recorded
        final = self.turns[-1].reward if self.turns else 0.0
        upstream = self.scoring == "upstream"
        if self.error is None:
            ret = episode_return(
                final, self.terminated, REWARD_BOUNDS if upstream else RETURN_BOUNDS
            )
        elif upstream and self.error.boundary in ("environment", "sandbox"):
            ret = -1.0
        else:
            ret = 0.0
        return EpisodeResult(
            self.spec.env_id,
            self.spec.seed,
            bool(self.spec.hint),
            self.messages,
            self.turns,
            ret,
            self.terminated,
            self.truncated,
            self.error,
            time.perf_counter() - self.started,
            self.tools,
            self.step_timeout,
        )


def _start_half(env: object, name: str) -> Callable[[Any], Callable[[], Any]] | None:
    """The environment's ``start_step`` / ``start_reset`` (send now, collect later), when its
    class declares one: a wrapper that forwards unknown attributes to an inner environment
    would otherwise hand out the inner one's and skip its own ``step`` / ``reset``."""
    if env is None or not hasattr(type(env), name):
        return None
    start = getattr(env, name, None)
    return start if callable(start) else None
