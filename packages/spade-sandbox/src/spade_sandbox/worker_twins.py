"""Indistinguishable twins: does the randomness a reset hides from the agent decide the answer?

For one seed, the environment's draws from Python's ``random`` during ``reset`` are recorded
(a tape), then ``reset`` is replayed on a scratch instance with the same tape except one draw
changed: a *twin*. A twin whose first observation is the original's but whose ``solution()``
differs holds answer-relevant randomness the agent never saw. That alone is legal (a secret the
feedback reveals: higher/lower, mastermind), so the twins then play the same wrong actions
(each other's solutions and the host's probe actions); a response that differs between twins
shows that information reaches the agent. When none differs, the twins are indistinguishable
and an agent that sees only observations plays one fixed sequence of guesses in all of them:
the share of twins its best ``turns``-long sequence wins bounds its win rate on that seed
(one guess when a wrong answer ends the episode).

Only draws through the environment module's own names are traced (``random`` itself, its
``Random`` class, functions imported ``from random import ...``, module-level generators); the
names are swapped for the analysis and put back after it. An environment whose reset draws
nothing traceable (numpy, ``os.urandom``, ``secrets``, the clock) is not judged.

Part of the in-sandbox worker program (see worker.py): standard library only. The host reaches
it through the ``twins`` op; in-process callers use :func:`analyse` directly.
"""

from __future__ import annotations

import random as _random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

SPREAD = 4
"""Twins of the first pass: the last two draws, the first one and a random one between."""
MAX_SAMPLE = 48
"""The most same-looking twins drawn to estimate the bound (when the first pass found some)."""


class Tape:
    """The draws of one reset: recorded from the real generators, or replayed with one changed."""

    def __init__(self, seed: int) -> None:
        self.draws: list[tuple[str, int, Any]] = []
        self.replaying: list[tuple[str, int, Any]] | None = None
        self.pos = 0
        self.fresh = _random.Random(f"twins-{seed}")

    def record(self) -> None:
        self.draws, self.replaying, self.pos = [], None, 0

    def replay(self, draws: list[tuple[str, int, Any]]) -> None:
        self.replaying, self.pos = draws, 0

    def take(self, kind: str, k: int, real: Callable[[], Any]) -> Any:
        if self.replaying is None:
            value = real()
            self.draws.append((kind, k, value))
            return value
        pos, self.pos = self.pos, self.pos + 1
        if pos < len(self.replaying) and self.replaying[pos][:2] == (kind, k):
            return self.replaying[pos][2]
        return self.fresh.getrandbits(k) if kind == "b" else self.fresh.random()

    def changed(self, pos: int, keep_rest: bool = True) -> list[tuple[str, int, Any]] | None:
        """The tape with draw ``pos`` replaced by a different value (None if it cannot change);
        ``keep_rest=False`` ends the tape there (the later draws are fresh)."""
        kind, k, value = self.draws[pos]
        if kind == "b" and k == 0:
            return None
        new = value
        while new == value:
            new = self.fresh.getrandbits(k) if kind == "b" else self.fresh.random()
        return [
            *self.draws[:pos],
            (kind, k, new),
            *self.draws[pos + 1 :][: len(self.draws) * keep_rest],
        ]


def _tape_class(tape: Tape, base: type) -> type:
    """A ``random.Random`` whose every method draws through ``tape`` (``random`` and
    ``getrandbits`` are the two primitives the other methods use)."""

    class Random(base):  # type: ignore[valid-type, misc]
        def random(self) -> float:
            return float(tape.take("f", 0, super().random))

        def getrandbits(self, k: int) -> int:
            return int(tape.take("b", int(k), lambda: super(Random, self).getrandbits(k)))

    Random.__module__ = base.__module__
    Random.__qualname__ = base.__qualname__
    return Random


@contextmanager
def instrumented(namespaces: list[dict], tape: Tape) -> Iterator[bool]:
    """Swap the ``random`` names in each namespace for traced ones; yields whether any was
    found. Everything is put back on exit."""
    real = _random
    cls = _tape_class(tape, real.Random)
    inst = cls()
    inst.setstate(real.getstate())
    proxy = type(real)("random", real.__doc__)
    proxy.__dict__.update(real.__dict__)
    proxy.__dict__["Random"] = cls
    for name, value in real.__dict__.items():
        if getattr(value, "__self__", None) is real._inst:  # type: ignore[attr-defined]
            proxy.__dict__[name] = getattr(inst, value.__name__)
    swapped: list[tuple[dict, str, object]] = []
    for space in namespaces:
        for name, value in list(space.items()):
            new: object = None
            if value is real:
                new = proxy
            elif value is real.Random:
                new = cls
            elif getattr(value, "__self__", None) is real._inst:  # type: ignore[attr-defined]
                new = getattr(inst, value.__name__, None)
            elif type(value) is real.Random:
                new = cls()
                new.setstate(value.getstate())  # type: ignore[attr-defined]
            if new is not None:
                swapped.append((space, name, value))
                space[name] = new
    try:
        yield bool(swapped)
    finally:
        for space, name, value in reversed(swapped):
            space[name] = value


def namespaces_of(cls: type) -> list[dict]:
    """The global namespaces of the functions defined on ``cls`` and its bases."""
    seen: dict[int, dict] = {}
    for klass in cls.__mro__:
        for attr in vars(klass).values():
            fn = getattr(attr, "__func__", attr)
            space = getattr(fn, "__globals__", None)
            if isinstance(space, dict) and space.get("__name__") != "builtins":
                seen.setdefault(id(space), space)
    return list(seen.values())


class _Run:
    """One seed's analysis: a scratch instance, the tape, the deadline and the guard."""

    def __init__(
        self, env: Any, seed: int, call: Callable[..., Any], deadline: float, spread: int
    ) -> None:
        self.env, self.seed, self.call, self.deadline = env, seed, call, deadline
        self.spread = spread
        self.tape = Tape(seed)

    def reset(self, draws: list | None) -> str:
        """The first observation of a reset that records (``None``) or replays ``draws``."""
        if time.monotonic() > self.deadline:
            raise TimeoutError("the analysis ran past its time budget")
        if draws is None:
            self.tape.record()
        else:
            self.tape.replay(draws)
        return str(self.call(lambda: self.env.reset(seed=self.seed))[0])

    def answer(self) -> str:
        """``solution()`` after the last reset (called only for twins that look alike: a
        solver can cost more than the reset)."""
        return str(self.call(self.env.solution))

    def play(self, draws: list, actions: list[str], turns: int) -> tuple[tuple, bool]:
        """What the agent sees after each action (observation, end flags), and whether won."""
        self.reset(draws)
        seen: list[tuple[str, bool, bool]] = []
        for action in actions[:turns]:
            obs, reward, terminated, truncated, _ = self.call(lambda a=action: self.env.step(a))
            seen.append((str(obs), bool(terminated), bool(truncated)))
            if terminated or truncated:
                won = bool(terminated) and float(reward) >= 1.0
                return tuple(seen), won
        return tuple(seen), False


def _excerpt(actions: list[str], view: tuple) -> str:
    return f"{actions[-1][:60]} -> {' | '.join(o for o, _, _ in view)[:160]}"


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()] or [text]


def analyse(
    env: Any,
    seed: int,
    probes: list[str],
    turns: int,
    call: Callable[..., Any] = lambda fn: fn(),
    budget_s: float = 2.0,
    sample: int = 0,
    spread: int = SPREAD,
) -> dict:
    """The twin analysis of ``env`` (a scratch instance) on ``seed``; a JSON-able dict whose
    ``outcome`` is "judged", "untraced" (reset's randomness is not all on the tape), "raised"
    (the environment raised in a twin) or "budget" (out of time). A judged result has
    ``bound``: the best win rate of an observation-only agent over the twins (1.0 when no twin
    hides the answer or a response tells them apart). ``call`` runs each environment call
    (the worker's guard). ``sample``: same-looking twins to draw (default ``3 * turns``).
    ``spread``: twins of the first pass (the last two draws, then the first, then others)."""
    run = _Run(env, seed, call, time.monotonic() + budget_s, max(1, min(spread, 16)))
    result: dict = {"outcome": "judged", "draws": 0, "twins": 0, "hidden": 0, "bound": 1.0}
    try:
        with instrumented(namespaces_of(type(env)), run.tape) as found:
            if not found:
                return {**result, "outcome": "untraced", "message": "no random names to trace"}
            return _judge(run, probes, max(1, turns), sample or 3 * max(1, turns), result)
    except TimeoutError as exc:
        return {**result, "outcome": "budget", "message": str(exc)}
    except Exception as exc:
        if getattr(exc, "fatal", False):  # the worker's own fatal errors go to the host
            raise
        return {**result, "outcome": "raised", "message": f"{type(exc).__name__}: {exc}"[:300]}


def _judge(run: _Run, probes: list[str], turns: int, sample: int, result: dict) -> dict:
    first = run.reset(None)
    tape = run.tape.draws
    result["draws"] = len(tape)
    if not tape:
        return {**result, "outcome": "untraced", "message": "reset drew nothing from random"}
    answer = run.answer()
    rng = _random.Random(f"twins-pick-{run.seed}")
    positions = list(range(max(0, len(tape) - 2), len(tape)))
    positions += [0] if 0 not in positions and run.spread > 2 else []
    earlier = [p for p in range(len(tape)) if p not in positions]
    positions += rng.sample(earlier, max(0, min(len(earlier), run.spread - len(positions))))
    same: list[tuple[list, str]] = [(tape, answer)]
    hidden: list[int] = []
    for pos in positions:
        draws = run.tape.changed(pos)
        if draws is None:
            continue
        result["twins"] += 1
        if run.reset(draws) != first:
            continue  # the agent sees the change: the common case, and no solution() needed
        same.append((draws, run.answer()))
        hidden += [pos] if same[-1][1] != answer else []
    result["hidden"] = len(hidden)
    if not hidden:
        return result
    if run.reset(tape) != first or run.answer() != answer:  # randomness off the tape
        return {**result, "outcome": "untraced", "message": "replaying the draws differs"}
    # The few twins so far first: a game whose replies tell them apart (the usual hidden
    # secret) is settled without drawing more.
    told = _responses(run, same, probes, turns, result, bound=False)
    if told is not None:
        return told
    # More twins: the draws from the last hidden one on are fresh (changing one draw of a
    # rejection loop alone would mostly give back the original answer).
    for _ in range(2 * sample):
        if len(same) >= min(sample, MAX_SAMPLE):
            break
        draws = run.tape.changed(max(hidden), keep_rest=False)
        if draws is not None and run.reset(draws) == first:
            same.append((draws, run.answer()))
    return _responses(run, same, probes, turns, result) or result


def _responses(
    run: _Run, same: list[tuple[list, str]], probes: list[str], turns: int, result: dict,
    bound: bool = True,
) -> dict | None:  # fmt: skip
    """Play each probe and each twin's solution in every twin: a differing response among the
    twins it does not win is information; else (with ``bound``) the bound from who wins what,
    or None."""
    plays = [_lines(sol) for _, sol in same]
    plays = [p for i, p in enumerate(plays) if p not in plays[:i]]
    per_guess = max(len(p) for p in plays)
    guesses = max(1, turns // per_guess)
    wins: list[set[int]] = []
    ended = False  # a wrong answer (another twin's) ended the episode: one guess per episode
    shown = {"probe": "", "guess": ""}  # a losing reply, preferably to another twin's answer
    for n, actions in enumerate([[p] for p in probes] + plays):
        final: set[tuple] = set()  # whole replies, in the twins the actions do not win
        before: set[tuple] = set()  # replies before the last action, where nothing won yet
        covered: set[int] = set()
        for i, (draws, _) in enumerate(same):
            view, won = run.play(draws, actions, turns)
            if won:
                covered.add(i)
            else:
                final.add(view)
                ended |= n >= len(probes) and bool(view) and (view[-1][1] or view[-1][2])
                kind = "guess" if n >= len(probes) else "probe"
                shown[kind] = shown[kind] or _excerpt(actions, view)
            if not won or len(view) >= len(actions):
                before.add(view[: len(actions) - 1])
            if len(final) > 1 or len(before) > 1:
                return {**result, "distinguished": True, "twins_sampled": len(same),
                        "evidence": _excerpt(actions, view)}  # fmt: skip
        wins.append(covered)
    evidence = shown["guess"] or shown["probe"]
    if all(len(won) == len(same) for won in wins[len(probes) :]):
        # Every twin's solution wins in every twin: the hidden draws change how solution()
        # writes the answer, not which answers win.
        return {
            **result,
            "distinguished": False,
            "interchangeable": True,
            "twins_sampled": len(same),
        }
    if not bound:
        return None
    guesses = 1 if ended else guesses
    best: set[int] = set()
    for _ in range(guesses):  # greedy: the guess that wins the most twins not yet won
        gain = max(wins, key=lambda w: len(w - best), default=set())
        best |= gain
    return {**result, "distinguished": False, "twins_sampled": len(same),
            "answers": len(plays), "guesses": guesses, "bound": len(best) / len(same),
            "evidence": evidence}  # fmt: skip


def serve(host: Any, msg: dict) -> dict:
    """The ``twins`` op: :func:`analyse` on a scratch instance of the open environment's class
    (built with the kwargs it was opened with), every call under the worker's guard. What the
    environment raises comes back as the outcome "raised"; only the worker's fatal errors
    (memory, output, forbidden imports) end the call."""
    env = host.require_env()
    kwargs = (host.opened or {}).get("kwargs") or {}
    probes = [str(p)[:2000] for p in msg.get("probes", [])][:8]
    call = host.guarded_call
    try:
        scratch = call(lambda: type(env)(**kwargs))
    except Exception as exc:
        if getattr(exc, "fatal", False):
            raise
        return {"outcome": "raised", "draws": 0, "twins": 0, "hidden": 0, "bound": 1.0,
                "message": f"constructing a scratch instance: {exc}"[:300]}  # fmt: skip
    try:
        return analyse(
            scratch, int(msg["seed"]), probes, int(msg["turns"]), call,
            budget_s=min(float(msg.get("budget_s", 2.0)), 30.0), sample=int(msg.get("sample", 0)),
            spread=int(msg.get("spread", SPREAD)),
        )  # fmt: skip
    finally:
        close = getattr(scratch, "close", None)
        if callable(close):
            try:
                call(close)
            except Exception as exc:
                if getattr(exc, "fatal", False):
                    raise
