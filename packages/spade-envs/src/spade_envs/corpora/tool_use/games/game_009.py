"""Reschedule into a free hour: a SPADE tool-use environment."""

import json
import random
import re

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_TAG = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_PY = {"string": str, "boolean": bool, "object": dict, "array": list}
FORMAT = (
    'Call tools with {"tool_calls": [{"name": "TOOL", "arguments": {...}}]} '
    "(or <tool_call>{...}</tool_call> blocks); give the final answer as \\boxed{...}."
)


def _problems(schema, args):
    out = []
    props = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in args:
            out.append(f"missing required argument {key!r}")
    for key, value in args.items():
        if key not in props:
            out.append(f"unknown argument {key!r}")
            continue
        kind = props[key].get("type", "string")
        if kind == "integer":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind == "number":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, _PY.get(kind, object))
        if not ok:
            out.append(f"argument {key!r} must be {kind}")
        elif "enum" in props[key] and value not in props[key]["enum"]:
            out.append(f"argument {key!r} must be one of {props[key]['enum']}")
    return out


def _call(name, /, **arguments):
    return {"name": name, "arguments": arguments}


def _act(*calls):
    return json.dumps({"tool_calls": list(calls)}, sort_keys=True)


def _number(text):
    try:
        return float(str(text).replace(",", "").replace("$", "").strip())
    except ValueError:
        return None


def _tool(name, description, required=(), /, **props):
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {k: dict(v) for k, v in props.items()},
            "required": list(required),
            "additionalProperties": False,
        },
    }


_STR = {"type": "string"}
_INT = {"type": "integer"}
_NUM = {"type": "number"}


class _ToolTask:
    """Shared episode mechanics: canonical actions in, tool results out, \\boxed{} ends it."""

    skill = "ToolUse"
    domain = ""
    tools = []

    def __init__(self, max_turns: int = 12, **kwargs):
        self.max_turns = max_turns
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        self.rng = random.Random(seed)
        self._turn = 0
        self._done = False
        task = self.setup(self.rng)
        text = (
            f"{task}\n\nUse the tools; each reply may hold several calls. You have {self.max_turns} "
            "turns. Give the final answer as \\boxed{...}; only one answer is accepted."
        )
        return text, {"domain": self.domain}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, {"turn": self._turn}
        self._turn += 1
        observation, reward, terminated = self._handle(str(action))
        truncated = not terminated and self._turn >= self.max_turns
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, {"turn": self._turn}

    def _calls(self, action):
        text = action.strip()
        try:
            obj = json.loads(text)
        except ValueError:
            blocks = _TAG.findall(text)
            if not blocks:
                return None
            out = []
            for block in blocks:
                try:
                    out.append(json.loads(block))
                except ValueError:
                    out.append(None)
            return out
        if isinstance(obj, dict) and isinstance(obj.get("tool_calls"), list):
            return obj["tool_calls"]
        if isinstance(obj, dict) and "name" in obj:
            return [obj]
        return None

    def _run(self, call):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return "error: a call is an object with a string name and an arguments object"
        name, args = call["name"], call.get("arguments", {})
        spec = next((t for t in self.tools if t["name"] == name), None)
        if spec is None:
            names = ", ".join(t["name"] for t in self.tools)
            return f"{name[:40]} -> error: unknown tool; the tools are {names}"
        if not isinstance(args, dict):
            return f"{name} -> error: arguments must be an object"
        problems = _problems(spec["parameters"], args)
        if problems:
            return f"{name} -> error: " + "; ".join(problems)
        try:
            result = getattr(self, "tool_" + name)(**args)
        except (KeyError, ValueError, IndexError, TypeError) as exc:
            return f"{name} -> error: {str(exc).strip(chr(39))[:200]}"
        return f"{name} -> {result if isinstance(result, str) else json.dumps(result, sort_keys=True)}"

    def _handle(self, action):
        calls = self._calls(action)
        if calls is not None:
            if not calls:
                return "error: the tool_calls list is empty. " + FORMAT, 0.0, False
            return "\n".join(self._run(c) for c in calls[:10])[:8000], 0.0, False
        found = _BOXED.findall(action)
        if not found:
            return "No tool call or answer found. " + FORMAT, 0.0, False
        if self.check(found[-1].strip()):
            return "Correct: task solved.", 1.0, True
        return "Wrong answer; the episode is over.", 0.0, True

    def solution(self) -> str:
        return "\n".join(self.plan())

    def close(self) -> None:
        pass

class RescheduleEnv(_ToolTask):
    domain = "calendar"
    tools = [
        _tool("find_event", "Event id and length in hours for a title.", ("title",), title=_STR),
        _tool("list_day", "Events on a day (1-28): [[event_id, start_hour, end_hour]].", ("day",), day=_INT),
        _tool("move_event", "Move an event to a day and start hour.", ("event_id", "day", "hour"),
              event_id=_STR, day=_INT, hour=_INT),
    ]

    def setup(self, rng):
        self.day = rng.randint(2, 27)
        self.title = rng.choice(["budget review", "offsite prep", "hiring sync", "vendor call"])
        self.length = rng.randint(2, 3)
        self.eid = f"e{rng.randint(100, 999)}"
        self.where = {self.eid: [rng.randint(1, 28), 10, 10 + self.length]}
        hours = list(range(9, 17))
        rng.shuffle(hours)
        free = rng.randint(9, 17 - self.length)
        for i, h in enumerate(hours[:5]):
            if free - 1 < h < free + self.length:
                continue
            self.where[f"x{i}{rng.randint(10, 99)}"] = [self.day, h, h + 1]
        return (f"Move the event titled '{self.title}' to day {self.day} at a start hour where it does not "
                "overlap any other event and ends by 17 (working hours 9 to 17). When finished, put the word done inside \\boxed{}.")

    def tool_find_event(self, title):
        if title.lower() != self.title:
            raise ValueError(f"no event titled {title!r}")
        return {"event_id": self.eid, "hours": self.length}

    def tool_list_day(self, day):
        return sorted([k, s, e] for k, (d, s, e) in self.where.items() if d == day)

    def tool_move_event(self, event_id, day, hour):
        if event_id not in self.where:
            raise ValueError(f"no event {event_id!r}")
        if not 1 <= day <= 28 or not 0 <= hour <= 23:
            raise ValueError("day must be 1-28 and hour 0-23")
        length = self.where[event_id][2] - self.where[event_id][1]
        self.where[event_id] = [day, hour, hour + length]
        return "moved"

    def _ok(self, hour):
        return 9 <= hour and hour + self.length <= 17 and all(
            not (s < hour + self.length and hour < e)
            for k, (d, s, e) in self.where.items() if d == self.day and k != self.eid)

    def check(self, answer):
        d, s, _ = self.where[self.eid]
        return answer.lower() == "done" and d == self.day and self._ok(s)

    def plan(self):
        hour = next(h for h in range(9, 18 - self.length) if self._ok(h))
        return [_act(_call("find_event", title=self.title), _call("list_day", day=self.day)),
                _act(_call("move_event", event_id=self.eid, day=self.day, hour=hour)), "\\boxed{done}"]
