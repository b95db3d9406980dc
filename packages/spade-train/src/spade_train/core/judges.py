"""The designer pipeline's checks beyond the sandbox validator: the reset gate, the LLM
validator's and the self-judge's prompts and verdicts, and a small OpenAI-compatible client.

Every check here fails open: an error of the check itself (the sandbox script, the endpoint,
a reply without a verdict) accepts the environment and says so in its result, so an outage
never stops a run; the caller counts those results.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import spade_envs as se
import spade_sandbox as ss

from spade_train.types import Message

# -- verdicts ----------------------------------------------------------------------------------

_YES = ("yes", "y", "true", "valid", "correct")


@dataclass(frozen=True)
class Verdict:
    """What a judge said. ``accepted``: the environment stays. ``status``: ``yes``, ``no``,
    ``no_verdict`` (empty reply or no ``\\boxed{}``: accepted) or ``error`` (the judge could
    not be asked: accepted, fail open). ``text``: the reply or the error, cut to 500 chars."""

    accepted: bool
    status: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "status": self.status, "text": self.text}


def parse_verdict(reply: str) -> Verdict:
    """The boxed answer of a reply (:func:`spade_envs.boxed_answer`, the one parser): yes (or y, true, valid, correct) accepts, any
    other answer rejects; an empty reply or one without a box accepts."""
    text = reply[:500]
    answer = se.boxed_answer(reply or "")
    if not reply or not reply.strip() or answer is None:
        return Verdict(True, "no_verdict", text)
    yes = answer.lower() in _YES
    return Verdict(yes, "yes" if yes else "no", text)


def error_verdict(exc: BaseException) -> Verdict:
    return Verdict(True, "error", f"{type(exc).__name__}: {exc}"[:500])


# -- prompts (our wording) ----------------------------------------------------------------------

VALIDATOR_SYSTEM = (
    "You check Python text-game environments that another model wrote. Reject a game only "
    "for a plain, fatal defect; if unsure, accept it."
)

VALIDATOR_GAMES = """Can a player actually play and win this game? Reject it only for a clear fatal defect.

```python
{source}
```

Look at two things only:
1. Can the answer be worked out? Reject only if no player could derive it: the answer hangs on hidden randomness the player never sees, or the task text does not match what the checking code accepts.
2. Does a correct answer pay? Reject only if the right answer cannot earn a positive reward and end the episode (for example a comparison between mismatched types that is never true, or a success branch that can never run).

Rough messages, odd formatting and rare edge cases are not reasons to reject.

Finish with \\boxed{{yes}} to accept, or \\boxed{{no}} only for a fatal defect."""

VALIDATOR_TOOL_SYSTEM = (
    "You audit Python tool-use environments that another model wrote, for one property: can "
    "the task be completed at all? Reject environments that cannot be completed by any "
    "sequence of tool calls; keep environments that are merely hard. For each success "
    "condition, find the tool that brings it about."
)

VALIDATOR_TOOL = """Decide whether some sequence of tool calls completes this environment's task. The agent calls the tools one turn at a time and then gives its final answer.

```python
{source}
```

Work through it:
1. List every success condition (criteria lists, completion checks, reward and termination code) and the exact state value each one needs.
2. For each needed value, find a tool that writes it. If one is written by no tool, or two conditions contradict each other, the task is impossible.
3. Also impossible: a condition that can never be true because of types (a string looked up in a list of dicts, a number compared with a string); a condition whose state only a tool that always fails would write; a condition on a specific value (an id, a date, an amount) that neither the instructions state nor any tool result reveals.
4. Random values are fine when some tool returns them to the agent; reject for randomness only if the value is never shown, or changes on every call for the same input.
5. If most steps are already satisfied by the state reset() builds, the task is degenerate: reject. One such step in a sound task is fine.
6. Never reject for difficulty: hidden values found by calling lookup tools, long exact sequences and distracting tools are good training material. Ignore cosmetic issues.

Finish with \\boxed{{no}} if a success condition is impossible by the tests above, else \\boxed{{yes}}."""

JUDGE_SYSTEM = (
    "You review a text-game environment together with one episode an agent played in it, "
    "and say whether the game behaves as its code and its task text promise."
)

JUDGE_PROMPT = """The environment:

```python
{source}
```

One episode in it (the first {shown} turns):

{episode}

Does this environment make sense: is the task stated clearly, do the observations and rewards follow from the agent's actions as the task says, and can the task be won? Finish with \\boxed{{yes}} or \\boxed{{no}}."""

REPAIR_PROMPT = """Your environment did not pass validation:

    {reason}: {message}

Send the whole corrected module again in one ```python block, followed by the HINT line. Fix this problem, keep the same game idea, and keep the class's reset(seed=None), step(action), solution() and close() methods."""


def validator_messages(source: str, setting: str, prompt: str = "auto") -> list[Message]:
    """The LLM validator's conversation for ``source`` (``prompt``: auto, cognitive, tool-use)."""
    tool = prompt == "tool-use" or (prompt == "auto" and setting == "tool-use")
    system, template = (
        (VALIDATOR_TOOL_SYSTEM, VALIDATOR_TOOL) if tool else (VALIDATOR_SYSTEM, VALIDATOR_GAMES)
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": template.format(source=source)},
    ]


def judge_messages(source: str, result: se.EpisodeResult, shown: int) -> list[Message]:
    """The self-judge's conversation: the code and the first ``shown`` turns of an episode."""
    lines = [f"Start: {_cut(_first_observation(result))}"]
    for i, t in enumerate(result.turns[:shown], 1):
        lines += [
            f"Turn {i}: action {_cut(t.action)!r}",
            f"  reward {t.reward}, ended {t.terminated or t.truncated}",
            f"  observation {_cut(t.observation)!r}",
        ]
    if len(result.turns) > shown:
        lines.append(f"... {len(result.turns) - shown} more turns")
    lines.append(f"Return: {result.episode_return}")
    text = JUDGE_PROMPT.format(source=source, shown=shown, episode="\n".join(lines))
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": text}]


def repair_message(reason: str | None, message: str | None) -> Message:
    return {
        "role": "user",
        "content": REPAIR_PROMPT.format(reason=reason or "invalid", message=message or ""),
    }


def _first_observation(result: se.EpisodeResult) -> str:
    for m in result.messages:
        if m.get("role") == "user":
            return str(m.get("content", ""))
    return ""


def _cut(text: str, n: int = 300) -> str:
    return text if len(text) <= n else text[:n] + "..."


# -- an OpenAI-compatible endpoint ---------------------------------------------------------------


def endpoint_replies(
    base_url: str,
    model: str | None,
    conversations: Sequence[Sequence[Message]],
    *,
    api_key_env: str,
    temperature: float,
    max_tokens: int,
    timeout_s: float,
) -> list[str | BaseException]:
    """One reply per conversation from the OpenAI-compatible server at ``base_url`` (the
    server root or its ``/v1``, :class:`spade_envs.Endpoint`); a call that failed after the
    SDK's retries gives its :class:`spade_envs.EndpointError` in that place (connection
    refused, timeout, HTTP error, a malformed body). ``model`` None asks for ``default``."""
    try:
        endpoint = se.Endpoint(
            base_url, model or "default", api_key_env=api_key_env, timeout_s=timeout_s
        )
    except se.EndpointError as exc:
        return [exc for _ in conversations]
    with endpoint:
        replies = endpoint.try_many(conversations, temperature=temperature, max_tokens=max_tokens)
    return list(replies)


# -- the reset gate --------------------------------------------------------------------------

RESET_GATE_SCRIPT = """
import json as _gate_json
_gate_checked, _gate_threw = 0, 0
for _gate_seed in {seeds!r}:
    try:
        _gate_env = {cls}(max_turns={max_turns})
        _gate_env.reset(seed=_gate_seed)
    except Exception:
        continue
    _gate_crits = getattr(_gate_env, "_message_criteria", None)
    _gate_state = getattr(_gate_env, "_state", None)
    if not _gate_crits or _gate_state is None:
        _gate_checked = -1
        break
    if isinstance(_gate_crits, dict):
        _gate_crits = list(_gate_crits.values())
    _gate_checked += 1
    for _gate_c in _gate_crits:
        try:
            _gate_c(_gate_state)
        except Exception:
            _gate_threw += 1
            break
print(_gate_json.dumps({{"checked": _gate_checked, "threw": _gate_threw}}))
"""


@dataclass(frozen=True)
class GateResult:
    """``rejected``: a criterion raised at every seed that could be checked. ``status``:
    ``pass``, ``reject``, ``not_applicable`` (no ``_message_criteria``/``_state``) or
    ``error`` (the gate's own script failed in the sandbox: accepted)."""

    rejected: bool
    status: str
    checked: int = 0
    threw: int = 0
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "checked": self.checked, "threw": self.threw}


def reset_gate(
    source: str, class_name: str, max_turns: int, seeds: int, config: ss.SandboxConfig
) -> GateResult:
    """Reset the environment at seeds ``0 .. seeds-1`` in a fresh sandbox and evaluate each of
    its success criteria on the state reset built; reject only if one raised at every seed that
    reset (a seed whose reset fails is skipped; the sandbox validator judges those)."""
    script = (
        source
        + "\n"
        + RESET_GATE_SCRIPT.format(
            seeds=tuple(range(seeds)), cls=class_name, max_turns=int(max_turns)
        )
    )
    try:
        result = ss.run(script, config)
    except ss.SandboxError as exc:
        return GateResult(False, "error", message=f"{type(exc).__name__}: {exc}"[:300])
    if not result.ok:
        why = result.reason or result.stderr.strip()[-200:]
        return GateResult(False, "error", message=str(why))
    try:
        data = json.loads(result.stdout.strip().splitlines()[-1])
        checked, threw = int(data["checked"]), int(data["threw"])
    except (ValueError, KeyError, IndexError, TypeError):
        return GateResult(False, "error", message="the gate's output was not its JSON line")
    if checked < 0:
        return GateResult(False, "not_applicable")
    rejected = checked > 0 and threw == checked
    return GateResult(rejected, "reject" if rejected else "pass", checked, threw)
