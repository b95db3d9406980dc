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
    so a rerun with the same seed reproduces the same episodes.
    """

    accepts_tools = True

    def __init__(
        self,
        backend: PolicyBackend,
        params_for: Callable[[int], SamplingParams],
        on_generate: Callable[[list[Generation]], None] | None = None,
        answer_prefix: str = "",
    ):
        self.backend = backend
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
        return [self.answer_prefix + g.text for g in generations]

    def generations_of(self, result: se.EpisodeResult) -> list[Generation]:
        """The generations behind each assistant turn of ``result``, in order."""
        turns = sum(m.get("role") == "assistant" for m in result.messages)
        record = self.records.get(id(result.messages))
        if record is None or record[0] is not result.messages or len(record[1]) != turns:
            raise KeyError(
                f"{result.env_id}: no recorded generations for this episode's {turns} "
                "assistant turn(s); was it played by this agent?"
            )
        return list(record[1])


def merge_turns(
    generations: Sequence[Generation],
) -> list[tuple[list[int], list[int], list[float]]]:
    """Token sequences (ids, loss mask, old log-probs) covering every turn's completion.

    Consecutive turns share one sequence when the later prompt starts with the earlier
    prompt + completion; the observation tokens in between get mask 0.
    """
    sequences: list[tuple[list[int], list[int], list[float]]] = []
    ids: list[int] = []
    mask: list[int] = []
    logps: list[float] = []
    for gen in generations:
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
        mask = mask + [0] * len(extra) + [1] * len(gen.completion_ids)
        logps = logps + [0.0] * len(extra) + [float(x) for x in gen.logprobs]
    if ids:
        sequences.append((ids, mask, logps))
    return sequences


def samples_from_generations(
    generations: Sequence[Generation],
    advantage: float,
    role: Role,
    meta: dict[str, Any] | None = None,
) -> list[TrainSample]:
    """Training samples for the turns of one episode (or one designer completion)."""
    return [
        TrainSample(ids, mask, logps, float(advantage), role, dict(meta or {}))
        for ids, mask, logps in merge_turns(generations)
        if any(mask)
    ]


def episode_samples(
    agent: PolicyAgent,
    result: se.EpisodeResult,
    advantage: float,
    meta: dict[str, Any] | None = None,
) -> list[TrainSample]:
    """The agent-role samples of one played episode."""
    return samples_from_generations(agent.generations_of(result), advantage, "agent", meta)
