"""The largest file in a project: a SPADE tool-use environment."""

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

class LargestFileEnv(_ToolTask):
    domain = "filesystem"
    tools = [
        _tool("find", "All file paths under a directory whose names contain a substring ('' for all).",
              ("root", "contains"), root=_STR, contains=_STR),
        _tool("stat", "Size in bytes of a file.", ("path",), path=_STR),
    ]

    def setup(self, rng):
        self.root = f"/proj{rng.randint(1, 9)}"
        self.files = {}
        for d in ["src", "docs", "assets", "build"]:
            for i in range(rng.randint(2, 4)):
                self.files[f"{self.root}/{d}/{rng.choice(['main', 'util', 'img', 'notes'])}{i}{rng.randint(0, 99)}.dat"] = 0
        sizes = rng.sample(range(1000, 900000), len(self.files))
        self.files = {p: s for p, s in zip(sorted(self.files), sizes, strict=True)}
        self.answer = max(self.files, key=self.files.get)
        return f"Which file under {self.root} is the largest? Answer with its full path as \\boxed{{/path}}."

    def tool_find(self, root, contains):
        root = root.rstrip("/")
        return sorted(p for p in self.files if p.startswith(root + "/") and contains in p.rsplit("/", 1)[1])

    def tool_stat(self, path):
        if path not in self.files:
            raise ValueError(f"no file {path!r}")
        return self.files[path]

    def check(self, answer):
        return answer == self.answer

    def plan(self):
        return [_act(_call("find", root=self.root, contains="")),
                _act(*[_call("stat", path=p) for p in sorted(self.files)][:10]),
                _act(*[_call("stat", path=p) for p in sorted(self.files)][10:] or [_call("stat", path=self.answer)]),
                f"\\boxed{{{self.answer}}}"]
