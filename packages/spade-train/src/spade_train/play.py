"""Rollouts against a policy backend, and the token-level samples they produce.

:class:`PolicyAgent` is a spade-envs ``BatchAgent``: every round of the lockstep runner becomes
one batched ``backend.generate`` call, and every :class:`~spade_train.types.Generation` is kept
keyed by the exact conversation it answered. After the episodes end, :func:`episode_samples`
turns each episode back into training sequences: the tokens the policy sampled are trained on
(mask 1, with their sampling log-probs); prompt and observation tokens are masked (0).

Turns are merged into one sequence while the chat template renders the next prompt as an
extension of the previous prompt + completion, token for token; where it does not (a template
that rewrites history, a completion that re-tokenizes differently) a new sequence starts, so a
sample never trains on tokens the policy did not produce.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import spade_envs as se

from spade_train.backends.base import PolicyBackend
from spade_train.types import Generation, Message, Role, SamplingParams, TrainSample


class PolicyAgent:
    """A batched agent for :func:`spade_envs.run_episodes` backed by a :class:`PolicyBackend`.

    ``params_for(call_index)`` gives the sampling parameters (with a seed) of each batched call,
    so a rerun with the same seed reproduces the same episodes. ``thinking``: the policy
    thinks in ``<think>…</think>`` first; the environment gets the reply without it.
    """

    accepts_tools = True

    def __init__(
        self,
        backend: PolicyBackend,
        params_for: Callable[[int], SamplingParams],
        on_generate: Callable[[list[Generation]], None] | None = None,
        answer_prefix: str = "",
        thinking: bool = False,
    ):
        self.backend = backend
        self.thinking = thinking
        self.params_for = params_for
        self.on_generate = on_generate
        self.answer_prefix = answer_prefix
        # Episodes are told apart by their message list (the runner keeps one list per episode
        # and appends to it), since two episodes may show the very same conversation; the list
        # is kept referenced so its id cannot be reused.
        self.records: dict[int, tuple[list[Message], list[Generation]]] = {}
        self.calls = 0

    def __call__(
        self,
        batch: list[list[Message]],
        tools: Sequence[Sequence[dict[str, Any]] | None] | None = None,
    ) -> list[str]:
        params = self.params_for(self.calls)
        self.calls += 1
        if tools is not None and not any(tools):
            tools = None
        chats: Sequence[list[Message]] = batch
        if self.answer_prefix:  # a prefill: the policy continues the forced prefix
            prefill = {"role": "assistant", "content": self.answer_prefix}
            chats = [[*messages, prefill] for messages in batch]
        generations = self.backend.generate(chats, params, tools=tools)
        if len(generations) != len(batch):
            raise RuntimeError(
                f"backend returned {len(generations)} generations for {len(batch)} chats"
            )
        for messages, generation in zip(batch, generations, strict=True):
            self.records.setdefault(id(messages), (messages, []))[1].append(generation)
        if self.on_generate is not None:
            self.on_generate(generations)
        # Thinking mode: the runner (action parsing, history) sees the visible reply only; the
        # generation keeps every sampled token, so the next prompt (rendered without the
        # reasoning) starts a new sequence in merge_turns and no token is trained twice.
        texts = [strip_thinking(g.text) if self.thinking else g.text for g in generations]
        return [self.answer_prefix + t for t in texts]

    def generations_of(self, result: se.EpisodeResult) -> list[Generation]:
        """The generations behind each assistant turn of ``result``, in order."""
        turns = sum(m.get("role") == "assistant" for m in result.messages)
        if turns == 0:  # failed before any turn (a reset the sandbox could not serve)
            return []
        record = self.records.get(id(result.messages))
        if record is None or record[0] is not result.messages or len(record[1]) != turns:
            raise KeyError(
                f"{result.env_id}: no recorded generations for this episode's {turns} "
                "assistant turn(s); was it played by this agent?"
            )
        return list(record[1])


def merge_turns(
    generations: Sequence[Generation], trained: Sequence[bool] | None = None
) -> list[tuple[list[int], list[int], list[float]]]:
    """Token sequences (ids, loss mask, old log-probs) covering every turn's completion.

    Consecutive turns share one sequence when the later prompt starts with the earlier
    prompt + completion; the observation tokens in between get mask 0. ``trained[i] = False``
    keeps turn ``i``'s completion in the sequence as context but masks it (0).
    """
    if trained is not None and len(trained) != len(generations):
        raise ValueError(f"{len(trained)} trained flags for {len(generations)} turns")
    sequences: list[tuple[list[int], list[int], list[float]]] = []
    ids: list[int] = []
    mask: list[int] = []
    logps: list[float] = []
    for turn, gen in enumerate(generations):
        on = 1 if trained is None or trained[turn] else 0
        if len(gen.logprobs) != len(gen.completion_ids):
            raise ValueError("a Generation has a different number of log-probs and tokens")
        if ids and gen.prompt_ids[: len(ids)] == ids:
            extra = gen.prompt_ids[len(ids) :]
        else:
            if ids:
                sequences.append((ids, mask, logps))
            ids, mask, logps = [], [], []
            extra = list(gen.prompt_ids)
        ids = ids + extra + list(gen.completion_ids)
        mask = mask + [0] * len(extra) + [on] * len(gen.completion_ids)
        logps = logps + [0.0] * len(extra) + [float(x) for x in gen.logprobs]
    if ids:
        sequences.append((ids, mask, logps))
    return sequences


def samples_from_generations(
    generations: Sequence[Generation],
    advantage: float,
    role: Role,
    meta: dict[str, Any] | None = None,
    trained: Sequence[bool] | None = None,
) -> list[TrainSample]:
    """Training samples for the turns of one episode (or one designer completion); a
    sequence with nothing left to train is dropped."""
    return [
        TrainSample(ids, mask, logps, float(advantage), role, dict(meta or {}))
        for ids, mask, logps in merge_turns(generations, trained)
        if any(mask)
    ]


def episode_samples(
    agent: PolicyAgent,
    result: se.EpisodeResult,
    advantage: float,
    meta: dict[str, Any] | None = None,
    trained: Sequence[bool] | None = None,
) -> list[TrainSample]:
    """The agent-role samples of one played episode (``trained``: see :func:`merge_turns`)."""
    return samples_from_generations(agent.generations_of(result), advantage, "agent", meta, trained)


# -- thinking mode ----------------------------------------------------------------------------

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def split_thinking(text: str) -> tuple[str, str]:
    """``(reasoning, visible reply)`` of a completion, split as the Qwen3 chat template does:
    the reply is what follows the last ``</think>`` (leading newlines dropped); the reasoning
    is what precedes it, after any ``<think>``. No ``</think>``: no reasoning."""
    if THINK_CLOSE not in text:
        return "", text
    head, _, tail = text.rpartition(THINK_CLOSE)
    reasoning = head.split(THINK_OPEN)[-1].strip("\n")
    return reasoning, tail.lstrip("\n")


def strip_thinking(text: str) -> str:
    """The visible reply of a completion (see :func:`split_thinking`): what the environment
    parses and what the history keeps, as the Qwen3 template renders earlier turns."""
    return split_thinking(text)[1]
