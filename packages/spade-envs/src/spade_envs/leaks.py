"""Leak detection: is the solution's answer shown to the agent, in any normalised form?

The checker knows the answer (the last action of ``solution()``, or the text inside its
``\\boxed{...}``). Everything the agent can read while an episode is still open (the first
observation, every later observation of a probe's or the solution's episode before it ends,
every ``info`` dict) is searched for the answer in the forms a designer could hide it in:
any case and spacing, another number format (``42``, ``42.0``, ``4.2e1``, ``1,000``), the
string reversed, a small number spelled out (``forty-two``), base64 or hex.

An answer shown among other candidates of its kind (a list of options, other numbers on the
same line) is how every multiple-choice game looks, so it is not a leak; an answer singled
out (after a label such as ``answer:`` or ``the secret is``, alone on a line, in ``info``)
is. A short answer (one character, yes/no) is in most texts by chance, so it counts only
when a label singles it out.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .actions import boxed_answer
from .core import TextEnvironment
from .errors import Evidence
from .play import Transcript, solution_actions

_NUMBER = re.compile(
    r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])"
)
_LABEL = re.compile(
    r"(?:\b(?:answers?|solutions?|secret|correct|target|key|result|hidden|debug|psst|spoiler|cheat|digit|value|code|ref|reference|note|is|was|equals)\b|=)[\s:=\-'\"`(]*$",
    re.IGNORECASE,
)
_OPTION_LINE = re.compile(r"^\s*(?:[-*\u2022]|\(?[A-Za-z0-9]{1,2}[.):\]])\s+\S")
_LIST_SEPARATOR = re.compile(r"[,;|/]|\bor\b", re.IGNORECASE)
_LIST_AFTER = re.compile(r"\s*(?:[,;|/]|or\b)", re.IGNORECASE)
_CLAUSE_END = re.compile(r"(?<=[.!?])\s+|[()\[\]\n;]")
_SHORT_WORDS = frozenset({"yes", "no", "true", "false", "y", "n", "ok"})
_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def answer_of(action: str) -> str:
    """The answer an action gives (:func:`spade_envs.boxed_answer`), else the action."""
    found = boxed_answer(action)
    return (action if found is None else found).strip()


def spelled(n: int) -> list[str]:
    """English words for ``0 <= n < 1000`` (``forty-two`` and ``forty two``); [] otherwise."""
    if not 0 <= n < 1000:
        return []
    if n < 20:
        return [_ONES[n]]
    if n < 100:
        tens, ones = divmod(n, 10)
        return (
            [_TENS[tens]]
            if not ones
            else [f"{_TENS[tens]}-{_ONES[ones]}", f"{_TENS[tens]} {_ONES[ones]}"]
        )
    hundreds, rest = divmod(n, 100)
    head = f"{_ONES[hundreds]} hundred"
    return (
        [head]
        if not rest
        else [f"{head} and {w}" for w in spelled(rest)] + [f"{head} {w}" for w in spelled(rest)]
    )


def as_number(text: str) -> float | None:
    """``text`` read as a finite number (``1,000``, ``4.2e1``), or None."""
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def is_short(answer: str) -> bool:
    """Whether an answer is in most texts by chance (one character, yes/no)."""
    return len(answer) <= 1 or answer.lower() in _SHORT_WORDS


def normalise(text: str) -> str:
    """Lower case with runs of whitespace made one space."""
    return " ".join(text.lower().split())


def encoded_forms(answer: str) -> dict[str, str]:
    """Form name -> the answer in that form, for the forms searched literally."""
    forms = (
        {"reversed": answer[::-1].lower()}
        if len(answer) >= 3 and answer[::-1].lower() != answer.lower()
        else {}
    )
    raw = answer.encode()
    if len(answer) >= 2:
        forms["base64"] = base64.b64encode(raw).decode().rstrip("=")
        forms["hex"] = raw.hex()
    return forms


@dataclass(frozen=True)
class Leak:
    """Where the answer was seen: the ``source`` (``first_observation``, a probe's name or
    ``info``), the ``form`` it was in and the ``text`` it was found in."""

    source: str
    form: str
    text: str
    found: str


def _labelled(text: str, start: int) -> bool:
    """A label (``answer:``, ``the secret is``) right before ``start``, or alone on a line
    after a line that ends with one."""
    line_start = text.rfind("\n", 0, start) + 1
    before = text[line_start:start]
    if _LABEL.search(before[-40:]):
        return True
    if before.strip():
        return False
    previous = text[:line_start].rstrip().rsplit("\n", 1)[-1]
    return (
        bool(previous)
        and previous.rstrip().endswith(":")
        and _LABEL.search(previous.rstrip()[:-1] + ":") is not None
    )


def _among_candidates(text: str, start: int, end: int, numeric: bool) -> bool:
    """The occurrence at ``start:end`` sits among other candidates of its kind."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line = text[line_start : line_end if line_end >= 0 else len(text)]
    if numeric:
        cuts = [m.end() for m in _CLAUSE_END.finditer(text, 0, start)]
        after = _CLAUSE_END.search(text, end)
        clause_start = max(cuts, default=0)
        rest = text[clause_start:start] + " " + text[end : after.start() if after else len(text)]
        return _NUMBER.search(rest) is not None
    rest = line[: start - line_start] + " " + line[end - line_start :]
    if _LIST_SEPARATOR.search(rest):
        return True
    options = [ln for ln in text.splitlines() if _OPTION_LINE.match(ln)]
    return _OPTION_LINE.match(line) is not None and len(options) >= 2


def _occurrences(text: str, answer: str) -> Iterable[tuple[str, int, int, bool]]:
    """(form, start, end, numeric) of each place ``answer`` is in ``text``."""
    value = as_number(answer)
    if value is not None:
        for m in _NUMBER.finditer(text):
            other = as_number(m.group())
            if other is not None and math.isclose(other, value, rel_tol=1e-9, abs_tol=1e-12):
                yield (
                    "number" if m.group() == answer else "number_format",
                    m.start(),
                    m.end(),
                    True,
                )
        if value == int(value):
            for word in spelled(abs(int(value))):
                for m in re.finditer(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text, re.IGNORECASE):
                    yield "spelled", m.start(), m.end(), True
    else:
        pattern = r"(?<!\w)" + r"\s+".join(re.escape(p) for p in answer.split()) + r"(?!\w)"
        for m in re.finditer(pattern, text, re.IGNORECASE):
            yield ("exact" if m.group() == answer else "case_or_spacing", m.start(), m.end(), False)
    for form, coded in encoded_forms(answer).items():
        flags = re.IGNORECASE if form != "base64" else 0
        for m in re.finditer(rf"(?<![\w+/]){re.escape(coded)}(?![\w])", text, flags):
            yield form, m.start(), m.end(), False


def find_leak(answer: str, text: str, source: str, *, in_info: bool = False) -> Leak | None:
    """The first place ``text`` singles out ``answer`` (see the module's rules), or None."""
    answer = answer.strip()
    if not answer or not text:
        return None
    short = is_short(answer)
    for form, start, end, numeric in _occurrences(text, answer):
        if _labelled(text, start) and not _LIST_AFTER.match(text, end):
            return Leak(source, form, text, text[start:end])
        if short or (numeric and len(answer.lstrip("+-")) <= 1):
            continue
        if in_info or not _among_candidates(text, start, end, numeric):
            return Leak(source, form, text, text[start:end])
    return None


def info_text(info: Mapping[str, Any]) -> str:
    """An ``info`` dict as ``key: value`` lines, so a value is labelled by its key."""
    lines = []
    for key, value in info.items():
        shown = value if isinstance(value, str) else json.dumps(value, default=str)
        lines.append(f"{key}: {shown}")
    return "\n".join(lines)


@dataclass
class SeedView:
    """What the agent could read on one seed: ``(source, text)`` pairs of observations seen
    while the episode was open, and the ``info`` dicts returned."""

    seed: int
    answer: str
    texts: list[tuple[str, str]]
    infos: list[tuple[str, Mapping[str, Any]]]
    action: str = ""
    """The solution's final action; shown whole (``\\boxed{42}``) it is singled out."""


def seed_leak(view: SeedView) -> Leak | None:
    """The first leak of ``view.answer`` on one seed, or None."""
    for source, text in view.texts:
        if view.action and view.action != view.answer and view.action in text:
            return Leak(source, "action", text, view.action)
        leak = find_leak(view.answer, text, source)
        if leak is not None:
            return leak
    for source, info in view.infos:
        leak = find_leak(view.answer, info_text(info), f"{source}:info", in_info=True)
        if leak is not None:
            return leak
    return None


def _shown_elsewhere(found: str, view: SeedView, views: list[SeedView]) -> bool:
    """Whether a seed whose answer differs from ``view``'s shows ``found`` in its first text."""
    return any(v.answer != view.answer and v.texts and found in v.texts[0][1] for v in views)


def leak_evidence(views: list[SeedView]) -> tuple[str, Evidence] | None:
    """A message and the evidence when the answer is shown on most seeds (two or more, and
    more than half), else None: one seed alone can show it by coincidence (an operand or a
    format example that happens to equal that seed's answer)."""
    found = [(v, leak) for v in views if (leak := seed_leak(v)) is not None]
    # Text that a seed with another answer shows too (``e.g. \\boxed{C}``) is a fixed
    # example that equals some seeds' answers, not the answer.
    found = [
        (v, leak)
        for v, leak in found
        if leak.form != "action" or not _shown_elsewhere(leak.found, v, views)
    ]
    if len(found) < 2 or 2 * len(found) <= len(views):
        return spelled_digit_evidence(views)
    view, leak = found[-1]
    message = (
        f"the answer {view.answer[:40]!r} is shown to the agent ({leak.form} form, in {leak.source}) "
        f"on seeds {[v.seed for v, _ in found]} of {[v.seed for v in views]}; do not show the answer"
    )
    return message, Evidence.of(leak.source, view.seed, leak.text, leak.found)


_WORD = re.compile(r"[a-z]+")
#: A spelled digit counts as singled out when other digits' words show this rarely.
DECOY_RATE = 0.2


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def spelled_digit_evidence(views: list[SeedView]) -> tuple[str, Evidence] | None:
    """A one-digit answer spelled out (``seven``) in the first observation of most seeds,
    while the other digits' words are rarely there: singled out, not ordinary text.

    Digit words are common ("one of these", "three rows"), so a word alone proves nothing: it
    must not show on a seed whose answer is another digit, and the nine decoys' words must be
    rare on the same seeds (a game whose text always says "three" shows the decoy "three" as
    often as the answer)."""
    digits = [v for v in views if v.answer.isdigit() and len(v.answer) == 1 and v.texts]
    if len(digits) < 2 or 2 * len(digits) <= len(views):
        return None
    seen = [(v, _words(v.texts[0][1])) for v in digits]
    # the answer's word, and on no seed whose answer is another ("one of boxes 1 to 6")
    hits = [
        v
        for v, words in seen
        if _ONES[int(v.answer)] in words
        and not any(u.answer != v.answer and _ONES[int(v.answer)] in w for u, w in seen)
    ]
    decoys = [
        _ONES[d] in _words(v.texts[0][1]) for v in digits for d in range(10) if d != int(v.answer)
    ]
    if len(hits) < 2 or 2 * len(hits) <= len(views) or sum(decoys) > DECOY_RATE * len(decoys):
        return None
    view = hits[-1]
    word = _ONES[int(view.answer)]
    message = (
        f"the answer {view.answer!r} is spelled out ({word!r}) in the first observation on seeds "
        f"{[v.seed for v in hits]} of {[v.seed for v in views]}, while other digits' words are "
        f"rare there; do not show the answer"
    )
    return message, Evidence.of("first_observation", view.seed, view.texts[0][1], word)


class Played(Protocol):
    """One seed as the checker played it (``spade_envs.checks.SeedPlay``)."""

    seed: int
    first: str
    probes: list[tuple[str, Transcript, bool]]
    solution_text: str | None


#: Puts an environment into a seed's reset state and returns that reset's ``info``.
Restart = Callable[[int], Any]


def _infos(
    env: TextEnvironment, seed: int, restart: Restart | None = None
) -> list[tuple[str, Mapping[str, Any]]]:
    """The ``info`` of a reset and of one wrong answer after it (the transcripts keep none).
    ``restart`` replaces the real reset (the checker's copy of the seed's kept reset state)."""
    info = restart(seed) if restart is not None else env.reset(seed=seed)[1]
    infos = [("reset", info)]
    result = env.step(WRONG_ACTION)
    if not (result[2] or result[3]):
        infos.append(("wrong_answer", result[4]))
    return [(source, i) for source, i in infos if isinstance(i, Mapping)]


#: The action whose ``info`` is read for a leak: an answer no game accepts.
WRONG_ACTION = "\\boxed{?}"


def views_of(
    played: Iterable[Played], env: TextEnvironment | None = None, restart: Restart | None = None
) -> list[SeedView]:
    """What the agent could read on each played seed: the first observation and every
    observation of a probe's episode while it was open, except one that follows an action
    that itself contained the answer (an echo of the agent's own guess); with ``env``, the
    ``info`` of a reset and of a wrong answer too (for a solution of several moves, the first
    observation and the infos only). When every seed has the same answer it is
    a protocol word (``\\boxed{done}``) the instructions may name: no views."""
    played = list(played)
    finals = {(solution_actions(s.solution_text or "") or [""])[-1] for s in played}
    if len(finals) < 2:
        return []
    views = []
    for s in played:
        actions = solution_actions(s.solution_text or "")
        answer = answer_of(actions[-1]) if actions else ""
        if not answer:
            continue
        texts = [("first_observation", s.first)]
        # A solution of several moves ends with a move ("flip 4"), not an answer: the states
        # that other moves lead to describe moves ("Flip 4: the stack is ..."), so only what
        # is shown before any move is read.
        for name, transcript, _ in s.probes if len(actions) == 1 else ():
            for action, observation, _, terminated, truncated in transcript:
                if not (terminated or truncated) and answer.lower() not in action.lower():
                    texts.append((f"probe:{name}", observation))
        infos = _infos(env, s.seed, restart) if env is not None else []
        views.append(SeedView(s.seed, answer, texts, infos, actions[-1]))
    return views
