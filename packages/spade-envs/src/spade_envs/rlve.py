"""Play RLVE's verifiable environments (``rlve-gym``, top-level module ``Gym``) through SPADE.

    from spade_envs import EpisodeSpec, run_episode
    from spade_envs.rlve import RlveFactory

    factory = RlveFactory("Sorting", difficulty=2)
    result = run_episode(EpisodeSpec(factory, seed=0, max_turns=1), agent)

``rlve-gym`` is an optional extra (``pip install 'spade-envs[rlve]'``); ``Gym`` is imported on
the first use, so this module imports without it, and that first use raises
:class:`RlveUnavailableError` naming the install command. RLVE is trusted package code and runs
in this process (not in the sandbox).

How an RLVE environment is fitted to the SPADE contract (:mod:`spade_envs.core`), matching the
released SPADE adapter for the same inputs:

* **Difficulty.** Level ``d`` (0, 1, 2, ...) is the parameter list of a fresh RLVE parameter
  controller after ``d`` calls to its ``update()``; one parameter dict of that list is drawn.
* **Observation.** ``reset(seed)`` calls RLVE's ``generator(seed, parameter)`` and returns its
  prompt followed by one line asking for the answer in ``\\boxed{...}``.
* **Answer.** The content of the first ``\\boxed{...}`` of the action (:func:`boxed_answer`,
  upstream's rules) is appended as ``<answer>...</answer>``, the tags RLVE's verifier reads.
* **Reward.** ``reward="accuracy"`` (the default, as upstream): 1.0 when RLVE's verifier
  reports the answer fully correct (score at its passing threshold), else 0.0. ``reward="score"``:
  RLVE's own score in [-1, 1]. ``info["rlve_score"]`` always carries RLVE's score.
* **Turns.** Single turn by default (the episode ends with the first answer, as upstream);
  ``attempts=k`` allows up to ``k`` answers, a wrong one answered "Incorrect, try again"
  without revealing the reference.
* **Same-problem groups.** A factory built with ``problem_seed`` plays that one problem whatever
  seed ``reset`` gets (upstream's per-prompt GRPO groups); :func:`same_problem` draws a
  (parameter, seed) pair whose generator succeeds.
* **Global state.** RLVE's generator seeds Python's ``random``, NumPy's and torch's global RNGs
  and ``PYTHONHASHSEED``; those are saved before and restored after each generation (CUDA RNGs
  are not touched here: RLVE seeds them only when CUDA is initialised), and generations are
  serialised by a lock so concurrent resets cannot interleave their seeding.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from .actions import boxed_answer
from .core import DEFAULT_MAX_TURNS, StepResult
from .errors import RlveUnavailableError, SourceError

__all__ = [
    "OFFICIAL16",
    "RlveUnavailableError",
    "RlveEnvironment",
    "RlveFactory",
    "boxed_answer",
    "parameter_for",
    "reference_answer",
    "resolve_env_set",
    "rlve_env_ids",
    "same_problem",
]

#: The sixteen environments of RLVE's official training set (the released launchers' default).
OFFICIAL16: tuple[str, ...] = (
    "Division", "EuclidGame", "GCDOne_Counting", "HamiltonianPath", "LampChanging",
    "LargestConvexPolygon", "Multiplication", "PCPPermutation", "Path_NoGoingBack_Counting",
    "SAT", "ShortestPath", "Sorting", "SpiralMatrix", "SubsequenceReversalLNDS",
    "UndamagedSubmatrixCounting", "WYRLevelingGround",
)  # fmt: skip

ANSWER_FORMAT = "Give your final answer inside \\boxed{...}."
_GENERATE_LOCK = threading.Lock()


def _registries() -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        from Gym.environments import identifier2environment  # type: ignore[import-untyped]
        from Gym.parameter_controllers import identifier2controller  # type: ignore[import-untyped]
    except ImportError as exc:
        raise RlveUnavailableError(
            f"RLVE environments need rlve-gym: pip install 'spade-envs[rlve]' ({exc})"
        ) from None
    return identifier2environment, identifier2controller


def rlve_env_ids() -> list[str]:
    """Every RLVE identifier that has both an environment and a parameter controller, sorted."""
    envs, controllers = _registries()
    return sorted(set(envs) & set(controllers))


def resolve_env_set(spec: str | Sequence[str]) -> list[str]:
    """``"official16"``, ``"all"`` or an explicit list of identifiers, checked; one-line errors."""
    known = rlve_env_ids()
    if isinstance(spec, str):
        if spec == "official16":
            return list(OFFICIAL16)
        if spec == "all":
            return known
        raise SourceError(
            f"unknown RLVE environment set {spec!r}; use official16, all or a list of identifiers"
        )
    names = list(spec)
    if not names:
        raise SourceError("the RLVE environment list is empty; name at least one identifier")
    unknown = [n for n in names if n not in set(known)]
    if unknown:
        raise SourceError(
            f"unknown RLVE environment(s) {', '.join(unknown)}; spade_envs.rlve.rlve_env_ids() lists them"
        )
    return names


def parameter_for(name: str, difficulty: int, rng: random.Random) -> dict[str, Any]:
    """A parameter dict for ``name`` at ``difficulty``: a fresh controller, ``update()``
    ``difficulty`` times, then one entry of its parameter list drawn with ``rng``."""
    if difficulty < 0:
        raise ValueError(f"difficulty must be >= 0, got {difficulty}")
    _, controllers = _registries()
    if name not in controllers:
        raise SourceError(f"no RLVE parameter controller for {name!r}")
    controller = controllers[name]()
    for _ in range(difficulty):
        controller.update()
    return dict(rng.choice(controller.get_parameter_list()))


@contextlib.contextmanager
def _global_rng_kept() -> Iterator[None]:
    import numpy as np
    import torch

    saved = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    hashseed = os.environ.get("PYTHONHASHSEED")
    try:
        yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        torch.set_rng_state(saved[2])
        if hashseed is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = hashseed


def _generate(name: str, seed: int, parameter: dict[str, Any]) -> Any:
    """A generated RLVE problem instance, or ``None`` when RLVE's generator fails."""
    envs, _ = _registries()
    if name not in envs:
        raise SourceError(
            f"no RLVE environment {name!r}; spade_envs.rlve.rlve_env_ids() lists them"
        )
    instance = envs[name]()
    with _GENERATE_LOCK, _global_rng_kept():
        ok = instance.generator(seed=seed, parameter=parameter)
    return instance if ok else None


def same_problem(
    name: str, difficulty: int, rng: random.Random, tries: int = 10
) -> tuple[dict[str, Any], int]:
    """A (parameter, seed) pair for ``name`` at ``difficulty`` whose generator succeeds."""
    for _ in range(tries):
        parameter = parameter_for(name, difficulty, rng)
        seed = rng.randint(0, 2**31 - 1)
        if _generate(name, seed, parameter) is not None:
            return parameter, seed
    raise SourceError(f"RLVE generator failed {tries} times for {name} at difficulty {difficulty}")


def reference_answer(instance: Any) -> str | None:
    """The reference answer a generated RLVE instance stores, as text (``None`` when it has
    none; some environments store only the optimum's value, not a witness)."""
    params = getattr(instance, "parameter", None) or {}
    ref = params.get("reference_answer", params.get("gold_answer"))
    if ref is None:
        return None
    return " ".join(map(str, ref)) if isinstance(ref, (list, tuple)) else str(ref)


class RlveEnvironment:
    """One RLVE environment behind the SPADE contract (the rules are in the module docstring)."""

    def __init__(
        self,
        name: str,
        parameter: dict[str, Any],
        *,
        difficulty: int = 0,
        problem_seed: int | None = None,
        attempts: int = 1,
        reward: Literal["accuracy", "score"] = "accuracy",
        max_turns: int = DEFAULT_MAX_TURNS,
    ) -> None:
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        self.name, self.parameter, self.difficulty = name, dict(parameter), difficulty
        self.problem_seed, self.attempts, self.reward_kind = problem_seed, attempts, reward
        self.max_turns = max_turns
        self.instance: Any = None
        self._left = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        if self.problem_seed is not None:
            seed = self.problem_seed
        elif seed is None:
            seed = random.SystemRandom().randint(0, 2**31 - 1)
        self.instance = _generate(self.name, seed, self.parameter)
        if self.instance is None:
            raise SourceError(
                f"RLVE generator failed for {self.name} (difficulty {self.difficulty}, seed {seed})"
            )
        self._left = self.attempts
        prompt = self.instance.prompt_generator()
        return f"{prompt}\n\n{ANSWER_FORMAT}", {"difficulty": self.difficulty, "seed": seed}

    def step(self, action: str) -> StepResult:
        if self.instance is None or self._left <= 0:
            return "The episode is over.", 0.0, True, False, {}
        answer = boxed_answer(action)
        text = action if answer is None else f"{action}\n<answer>{answer}</answer>"
        verdict = self.instance.verifier(text)
        correct = bool(verdict["accuracy"])
        score = float(verdict["reward"])
        self._left -= 1
        reward = (1.0 if correct else 0.0) if self.reward_kind == "accuracy" else score
        done = correct or self._left == 0
        if correct:
            observation = "Correct!"
        else:
            observation = "Incorrect." + (" Try again." if not done else "")
        info = {"correct": correct, "rlve_score": score, "difficulty": self.difficulty}
        return observation, reward, done, False, info

    def solution(self) -> str:
        ref = reference_answer(self.instance) if self.instance is not None else None
        if ref is None:
            raise NotImplementedError(f"{self.name}: no stored reference answer to replay")
        return f"\\boxed{{{ref}}}"

    def close(self) -> None:
        self.instance = None


class RlveFactory:
    """An :class:`~spade_envs.core.EnvFactory` for RLVE environment ``name`` at ``difficulty``.

    Without ``parameter`` one is drawn per built environment (``parameter_seed`` seeds the
    draw); with ``problem_seed`` every built environment plays one and the same problem.
    """

    def __init__(
        self,
        name: str,
        difficulty: int = 0,
        *,
        parameter: dict[str, Any] | None = None,
        problem_seed: int | None = None,
        parameter_seed: int = 0,
        attempts: int = 1,
        reward: Literal["accuracy", "score"] = "accuracy",
    ) -> None:
        self.name, self.difficulty, self.parameter = name, difficulty, parameter
        self.problem_seed, self.attempts, self.reward = problem_seed, attempts, reward
        self._rng = random.Random(parameter_seed)

    def __call__(self, max_turns: int = DEFAULT_MAX_TURNS, **kwargs: Any) -> RlveEnvironment:
        parameter = self.parameter
        if parameter is None:
            parameter = parameter_for(self.name, self.difficulty, self._rng)
        return RlveEnvironment(
            self.name, parameter, difficulty=self.difficulty, problem_seed=self.problem_seed,
            attempts=self.attempts, reward=self.reward, max_turns=max_turns,
        )  # fmt: skip
