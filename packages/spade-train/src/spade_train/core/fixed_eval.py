"""Fixed-model difficulty evaluation: how hard the current environments are for a fixed model.

The released code (``spade/core/eval/fixed_model_eval.py``; on in its Tinker launchers every 16
batches with ``gpt-5-mini``) lets a fixed, external chat model play every game of the current
set a few times and reports how often it wins. A game whose pass rate is near one half is at
the right difficulty. Here the same measurement runs on the environments of the latest designer
round, through any OpenAI-compatible endpoint (``eval.fixed_model``); it never trains anything.

How one episode is played, as upstream: each turn the model sees only the current observation
(no history) in a fixed single-message frame, its reply's first ``\\boxed{…}`` (the whole reply
when there is none) is sent boxed as the action, and the episode is won when it terminates with
a positive reward. The metrics, per game then pooled:

* ``pass_rate`` = wins / plays, ``variance`` = p (1 - p), ``difficulty_score`` = 1 - |p - 0.5| / 0.5
  (1 at one half, 0 at never or always);
* ``num_optimal_games``: games with a pass rate in [0.3, 0.7];
* ``avg_reward`` / ``std_reward``: mean and population deviation over games of each game's mean
  episode reward (the sum of its step rewards);
* the same per skill (``skill_<name>/...``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import spade_envs as se

from spade_train.seeds import derive_seed

FRAME = (
    "You are playing a text game; make valid moves to win.\nObservation: {observation}\n"
    "Think it through step by step and put your final answer within \\boxed{{}}."
)


@dataclass(frozen=True)
class GameResult:
    """One game's plays by the fixed model."""

    env_id: str
    skill: str
    plays: int
    wins: int
    rewards: tuple[float, ...]
    """Each play's reward: the sum of its step rewards."""
    errors: int = 0

    @property
    def pass_rate(self) -> float:
        return self.wins / self.plays if self.plays else 0.0

    @property
    def mean_reward(self) -> float:
        return sum(self.rewards) / len(self.rewards) if self.rewards else 0.0


def _rate_metrics(p: float) -> dict[str, float]:
    return {"pass_rate": p, "variance": p * (1 - p), "difficulty_score": 1 - abs(p - 0.5) / 0.5}


def _spread(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    if len(values) == 1:
        return mean, 0.0
    return mean, (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5


def difficulty_metrics(games: Sequence[GameResult], prefix: str = "fixed_eval") -> dict[str, float]:
    """The metrics of the module docstring, flat (``{prefix}/...``)."""
    played = [g for g in games if g.plays]
    plays = sum(g.plays for g in played)
    p = sum(g.wins for g in played) / plays if plays else 0.0
    avg, std = _spread([g.mean_reward for g in played])
    rates = _rate_metrics(p) if played else dict.fromkeys(_rate_metrics(0.0), 0.0)
    out = {
        f"{prefix}/overall_pass_rate": rates["pass_rate"],
        f"{prefix}/overall_variance": rates["variance"],
        f"{prefix}/difficulty_score": rates["difficulty_score"],
        f"{prefix}/num_optimal_games": float(sum(0.3 <= g.pass_rate <= 0.7 for g in played)),
        f"{prefix}/total_games": float(len(played) if played else len(games)),
        f"{prefix}/total_plays": float(plays),
        f"{prefix}/avg_reward": avg,
        f"{prefix}/std_reward": std,
        f"{prefix}/errors": float(sum(g.errors for g in games)),
    }
    for skill in sorted({g.skill for g in played}):
        mine = [g for g in played if g.skill == skill]
        n = sum(g.plays for g in mine)
        s_avg, s_std = _spread([g.mean_reward for g in mine])
        key = f"{prefix}/skill_{skill.replace(' ', '_').lower()}"
        for name, value in _rate_metrics(sum(g.wins for g in mine) / n).items():
            out[f"{key}/{name}"] = value
        out[f"{key}/num_games"] = float(len(mine))
        out[f"{key}/avg_reward"], out[f"{key}/std_reward"] = s_avg, s_std
    return out


def boxed_action(reply: str) -> str:
    """The action sent for a reply, boxed: its boxed answer (:func:`spade_envs.boxed_answer`),
    else the whole reply (upstream's reading)."""
    answer = se.boxed_answer(reply)
    return se.boxed(reply if answer is None else answer)


class FrameAgent:
    """A batched agent that shows ``reply_fn`` only the last observation, in :data:`FRAME`."""

    def __init__(self, reply_fn: Callable[[list[dict[str, str]]], str], concurrency: int = 8):
        self.reply_fn, self.concurrency = reply_fn, concurrency

    def _one(self, messages: list[dict[str, str]]) -> str:
        observation = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        frame = [{"role": "user", "content": FRAME.format(observation=observation)}]
        return boxed_action(self.reply_fn(frame))

    def __call__(self, batch: list[list[dict[str, str]]]) -> list[str]:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(batch)))) as pool:
            return list(pool.map(self._one, batch))


def play_games(
    envs: Sequence[Any],
    opener: Callable[[Any], Any],
    agent: se.BatchAgent,
    *,
    plays: int,
    max_turns: int,
    seed: int,
    cycle: int,
) -> list[GameResult]:
    """Every environment (pool entries: ``env_id``, ``skill``) played ``plays`` times."""
    specs = [
        se.EpisodeSpec(
            opener(e),
            seed=derive_seed(seed, cycle, "fixed_eval", e.env_id, k),
            env_id=e.env_id,
            max_turns=max_turns,
        )
        for e in envs
        for k in range(plays)
    ]
    results = se.run_episodes(specs, agent, system_prompt=None, scoring="upstream") if specs else []
    games = []
    for i, e in enumerate(envs):
        mine = results[i * plays : (i + 1) * plays]
        wins = sum(
            r.error is None and r.terminated and bool(r.turns) and r.turns[-1].reward > 0
            for r in mine
        )
        rewards = tuple(0.0 if r.error else float(sum(t.reward for t in r.turns)) for r in mine)
        errors = sum(r.error is not None for r in mine)
        games.append(GameResult(e.env_id, e.skill, len(mine), wins, rewards, errors))
    return games
