"""Average salary of a department: a SPADE tool-use environment."""

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

class DepartmentAverageEnv(_ToolTask):
    domain = "database"
    tools = [
        _tool("query", "Rows of a table filtered by column=value (as text); omit both for all rows.",
              ("table",), table={"type": "string", "enum": ["departments", "employees"]}, column=_STR, value=_STR),
    ]

    def setup(self, rng):
        self.depts = [{"dept_id": d, "name": n} for d, n in zip(rng.sample(range(10, 99), 4), ["sales", "ops", "legal", "research"], strict=True)]
        self.target = rng.choice(self.depts)
        self.emps = [{"emp_id": 300 + i, "dept_id": rng.choice(self.depts)["dept_id"], "salary": rng.randrange(30000, 150000, 100)}
                     for i in range(rng.randint(15, 22))]
        self.emps.append({"emp_id": 299, "dept_id": self.target["dept_id"], "salary": rng.randrange(30000, 150000, 100)})
        sal = [e["salary"] for e in self.emps if e["dept_id"] == self.target["dept_id"]]
        self.answer = round(sum(sal) / len(sal))
        return f"What is the average salary in the {self.target['name']} department? Answer as \\boxed{{N}} (nearest integer)."

    def tool_query(self, table, column=None, value=None):
        rows = self.depts if table == "departments" else self.emps
        if column is None:
            return rows[:8] if table == "employees" else rows
        if column not in rows[0]:
            raise ValueError(f"no column {column!r}")
        return [r for r in rows if str(r[column]) == str(value)]

    def check(self, answer):
        value = _number(answer)
        return value is not None and abs(value - self.answer) <= 0.5

    def plan(self):
        return [_act(_call("query", table="departments", column="name", value=self.target["name"])),
                _act(_call("query", table="employees", column="dept_id", value=str(self.target["dept_id"]))),
                f"\\boxed{{{self.answer}}}"]
