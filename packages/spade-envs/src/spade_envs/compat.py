"""Compatibility mode: environments written for the released SPADE code, run as it runs them.

Two modes read environment source. **strict** (the default, for designer output) is the
contract of :mod:`spade_envs.core` as it stands. **compat** (the default for a released
corpus, see :class:`~spade_envs.corpus.Corpus`) accepts what the released code accepts:

* **Namespace.** The names the released loader puts in every game's module are there before the
  game's own code runs: numpy as ``np``/``numpy``, the modules ``collections``, ``copy``,
  ``functools``, ``heapq``, ``itertools``, ``json``, ``math``, ``operator``, ``random``, ``re``,
  ``statistics``, ``string``, and the names ``deque``, ``defaultdict``, ``Counter``,
  ``OrderedDict``, ``namedtuple``, ``combinations``, ``permutations``, ``product``, ``chain``,
  ``accumulate``, ``reduce``, ``lru_cache``, ``deepcopy``, ``heappush``, ``heappop`` and the
  ``typing`` names ``Tuple`` ... ``Mapping``, and ``ToolUseBaseEnv`` (the tool-use base class,
  :mod:`spade_envs.tool_base`). They come from a one-line prelude
  (:func:`compat_source`; error line numbers are one higher), so inside spade-sandbox they go
  through its import policy: numpy is added to the allow-list (:data:`COMPAT_IMPORTS`) and its
  directory mounted read-only; the game's own ``import os`` is still refused.
* **Rewards.** A step reward may lie in :data:`COMPAT_REWARD_BOUNDS` ([-10, 10], the released
  validator's range); :class:`CompatEnvironment` clips it into the contract's
  :data:`~spade_envs.core.REWARD_BOUNDS` (the episode return is the clipped final reward either
  way, as upstream) and keeps the original in ``info["raw_reward"]``. ``reset`` may return just
  the observation string.
* **solution().** The released code never plays it. Here (:func:`compat_solution`): a text made
  only of ``\\boxed{...}`` actions separated by spaces or lines is played and must win; a short
  one-line text without a box is taken as the answer and played boxed; anything else (a
  strategy description) is recorded as ``unplayable``, which is not a failure. A raw answer
  that does not win is recorded ``unplayable`` too.

:func:`check_env_compat` is :func:`~spade_envs.check_env` in this mode.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .checker import CheckReport, check_env, play_actions
from .core import DEFAULT_MAX_TURNS, REWARD_BOUNDS, EnvFactory, StepResult, episode_return
from .errors import ContractError

__all__ = [
    "MODES",
    "COMPAT_IMPORTS",
    "COMPAT_REWARD_BOUNDS",
    "COMPAT_NAMES",
    "CompatEnvironment",
    "CompatFactory",
    "CompatReport",
    "check_env_compat",
    "compat_sandbox_config",
    "compat_solution",
    "compat_source",
    "designed_max_turns",
]

MODES = ("strict", "compat")
Mode = Literal["strict", "compat"]
COMPAT_IMPORTS: frozenset[str] = frozenset({"numpy"})
COMPAT_REWARD_BOUNDS: tuple[float, float] = (-10.0, 10.0)

_MODULES = (
    "collections copy functools heapq itertools json math operator random re statistics string"
)
_FROM = {
    "collections": "deque defaultdict Counter OrderedDict namedtuple",
    "itertools": "combinations permutations product chain accumulate",
    "functools": "reduce lru_cache",
    "copy": "deepcopy",
    "heapq": "heappush heappop",
    "typing": "Tuple Dict List Optional Union Any Set FrozenSet Callable Iterable Sequence Mapping",
}
#: Every name compat mode defines before the game's code runs.
COMPAT_NAMES: tuple[str, ...] = (
    *_MODULES.split(), "np", "numpy", *(n for names in _FROM.values() for n in names.split()),
    "ToolUseBaseEnv",
)  # fmt: skip


def _tool_base_code() -> str:
    """The statements of :mod:`spade_envs.tool_base` (its docstring left out), as one line."""
    text = (Path(__file__).parent / "tool_base.py").read_text(encoding="utf-8")
    body = text[text.index("\nimport ") + 1 :]
    return f"exec(compile({body!r}, '<compat ToolUseBaseEnv>', 'exec'))"


_PRELUDE = "; ".join(
    [f"import {', '.join(_MODULES.split())}", "import numpy", "import numpy as np"]
    + [f"from {mod} import {', '.join(names.split())}" for mod, names in _FROM.items()]
    + [_tool_base_code()]
)
_FUTURE = re.compile(r"^from __future__ import [^\n]*$", re.MULTILINE)
_BOX = re.compile(r"\\boxed\{")
MAX_ANSWER_CHARS = 200


def compat_source(source: str) -> str:
    """``source`` behind the one-line prelude (``from __future__`` lines are kept first)."""
    futures = _FUTURE.findall(source)
    body = _FUTURE.sub("", source) if futures else source
    return "".join(f"{f}; " for f in futures) + _PRELUDE + "\n" + body


def designed_max_turns(source: str) -> int | None:
    """The default of ``max_turns`` in the ``*Env`` class's ``__init__``, read without running
    the code: the released code played a game with its own designed limit, capped by the
    agent's budget (``respect_game_max_turns``). ``None`` when there is no literal default."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name.endswith("Env")):
            continue
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
                args = fn.args.args[len(fn.args.args) - len(fn.args.defaults) :]
                pairs = [
                    *zip(args, fn.args.defaults, strict=True),
                    *zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True),
                ]
                for arg, default in pairs:
                    value = getattr(default, "value", None)
                    if arg.arg == "max_turns" and type(value) is int and value > 0:
                        return value
    return None


def compat_sandbox_config(config: Any = None) -> Any:
    """A ``spade_sandbox.SandboxConfig`` (``config`` or ``SandboxConfig.from_env()``) that
    also allows numpy and mounts its directory read-only (``backend_options["python_path"]``)."""
    import spade_sandbox as ss

    config = config if config is not None else ss.SandboxConfig.from_env()
    spec = importlib.util.find_spec("numpy")
    options = dict(config.backend_options)
    if spec is not None and spec.origin:
        site = os.path.dirname(os.path.dirname(spec.origin))
        paths = [p for p in options.get("python_path", "").split(os.pathsep) if p]
        options["python_path"] = os.pathsep.join(dict.fromkeys([*paths, site]))
    return dataclasses.replace(
        config, allowed_imports=config.allowed_imports | COMPAT_IMPORTS, backend_options=options
    )


def _boxes(text: str) -> tuple[list[str], str]:
    """The balanced ``\\boxed{...}`` spans of ``text`` in order, and the text left around them."""
    boxes, rest, pos = [], [], 0
    for match in _BOX.finditer(text):
        if match.start() < pos:
            continue
        depth, i = 0, match.end() - 1
        for i in range(match.end() - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                break
        if depth:
            break
        rest.append(text[pos : match.start()])
        boxes.append(text[match.start() : i + 1])
        pos = i + 1
    rest.append(text[pos:])
    return boxes, "".join(rest)


def compat_solution(text: Any) -> tuple[Literal["actions", "answer", "unplayable"], list[str]]:
    """How compat mode reads a ``solution()`` result: its kind and the actions to play."""
    if not isinstance(text, str) or not text.strip():
        return "unplayable", []
    boxes, rest = _boxes(text)
    if boxes and not rest.strip():
        return "actions", boxes
    line = text.strip()
    if "\\boxed" not in line and "\n" not in line and len(line) <= MAX_ANSWER_CHARS:
        return "answer", [f"\\boxed{{{line}}}"]
    return "unplayable", []


def _as_reset(result: Any) -> tuple[str, dict]:
    """A released environment's reset may return the observation alone."""
    return (result, {}) if isinstance(result, str) else result


class CompatEnvironment:
    """A released-code environment seen through the contract (see the module docstring)."""

    def __init__(self, env: Any):
        self.env = env

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        return _as_reset(self.env.reset(seed=seed))

    def step(self, action: str) -> StepResult:
        return self._adapt(self.env.step(action))

    @property
    def start_reset(self) -> Callable[[int | None], Callable[[], tuple[str, dict]]] | None:
        """The wrapped environment's send-now, collect-later reset, seen as ``reset`` sees it."""
        start = getattr(self.env, "start_reset", None)
        if not callable(start):
            return None

        def send(seed: int | None) -> Callable[[], tuple[str, dict]]:
            collect = start(seed)
            return lambda: _as_reset(collect())

        return send

    @property
    def start_step(self) -> Callable[[str], Callable[[], StepResult]] | None:
        """The wrapped environment's send-now, collect-later step, seen through the contract
        like ``step`` (None when it has none)."""
        start = getattr(self.env, "start_step", None)
        if not callable(start):
            return None

        def send(action: str) -> Callable[[], StepResult]:
            collect = start(action)
            return lambda: self._adapt(collect())

        return send

    @property
    def _step_many(self) -> Callable[..., tuple[list[StepResult], Exception | None] | None] | None:
        """The wrapped environment's batched steps, each seen through the contract like
        ``step`` (None when it has none)."""
        many = getattr(self.env, "_step_many", None)
        if not callable(many):
            return None

        def adapted(
            actions: list[str], expect: str | None = None, restore: str | None = None
        ) -> tuple[list[StepResult], Exception | None] | None:
            got = many(actions, expect, restore)
            return None if got is None else ([self._adapt(r) for r in got[0]], got[1])

        return adapted

    def _adapt(self, result: Any) -> StepResult:
        if not (isinstance(result, tuple) and len(result) == 5):
            return result  # the checker names the problem
        obs, reward, terminated, truncated, info = result
        low, high = REWARD_BOUNDS
        in_range = isinstance(reward, (int, float)) and not isinstance(reward, bool)
        if in_range and COMPAT_REWARD_BOUNDS[0] <= reward <= COMPAT_REWARD_BOUNDS[1]:
            clipped = min(max(float(reward), low), high)
            if clipped != reward and isinstance(info, dict):
                info = {**info, "raw_reward": float(reward)}
            reward = clipped
        return obs, reward, terminated, truncated, info

    def solution(self) -> Any:
        return self.env.solution()

    def close(self) -> None:
        self.env.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)


class CompatFactory:
    """Wraps an :class:`~spade_envs.core.EnvFactory` so its environments run in compat mode."""

    def __init__(self, factory: EnvFactory):
        self.factory = factory

    def __call__(self, max_turns: int = DEFAULT_MAX_TURNS, **kwargs: Any) -> CompatEnvironment:
        return CompatEnvironment(self.factory(max_turns=max_turns, **kwargs))

    def close(self) -> None:
        """Close the wrapped factory where it holds resources (a sandboxed one's idle workers)."""
        close = None if isinstance(self.factory, type) else getattr(self.factory, "close", None)
        if callable(close):
            close()


@dataclass(frozen=True)
class CompatReport:
    """What :func:`check_env_compat` observed: the checker's report and, per seed, how the
    solution was read (``actions``/``answer`` played and won, or ``unplayable``)."""

    check: CheckReport
    solutions: tuple[str, ...]

    @property
    def playable(self) -> bool:
        return all(kind != "unplayable" for kind in self.solutions)


def check_env_compat(
    factory: EnvFactory,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    max_turns: int = DEFAULT_MAX_TURNS,
    kwargs: dict[str, Any] | None = None,
) -> CompatReport:
    """:func:`~spade_envs.check_env` in compat mode (``factory`` already loaded in compat mode,
    e.g. ``load_env(source, mode="compat")``): the contract checks with the released reward range,
    then each seed's ``solution()`` read by :func:`compat_solution`. A boxed sequence that does
    not win raises ``solution_fails``; a strategy text or a raw answer that does not win is
    recorded ``unplayable``."""
    if not isinstance(factory, CompatFactory):
        factory = CompatFactory(factory)
    report = check_env(
        factory, seeds=seeds, max_turns=max_turns, kwargs=kwargs, check_solution=False
    )
    env = factory(max_turns=max_turns, **(kwargs or {}))
    kinds = []
    try:
        for seed in seeds:
            env.reset(seed=seed)
            try:
                text = env.solution()
            except Exception:
                text = None  # the released code never calls it while validating
            kind, actions = compat_solution(text)
            if actions:
                _, played = play_actions(env, seed, actions, min(max_turns, len(actions)))
                won = bool(played) and episode_return(played[-1][2], played[-1][3]) >= 1.0
                if not won and kind == "actions":
                    raise ContractError(
                        "solution_fails",
                        f"seed={seed}: playing the boxed actions of solution() did not win within "
                        f"{max_turns} turns",
                    )
                kind = kind if won else "unplayable"
            kinds.append(kind)
    finally:
        env.close()
    return CompatReport(report, tuple(kinds))
