# expect: tool_probe_ended
# skill: ToolUse
# hint: Look the secret up with the tool first, then add the offset it reports before answering.
import json
import random
import re


class VaultEnv:
    skill = "ToolUse"
    domain = "banking"
    tools = [{"name": "lookup", "description": "The value stored under a key.",
              "parameters": {"type": "object", "properties": {"key": {"type": "string"}},
                             "required": ["key"], "additionalProperties": False}}]

    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.key = "k%d" % self.rng.randint(100, 999)
        self.value = self.rng.randint(10000, 99999)
        self.turn, self.done = 0, False
        return "Find the value stored under %s with the lookup tool; answer \\boxed{N}." % self.key, {}

    def _run(self, call):
        if not isinstance(call, dict) or call.get("name") != "lookup":
            return "error: unknown tool"
        args = call.get("arguments")
        if not isinstance(args, dict) or set(args) != {"key"} or not isinstance(args["key"], str):
            return "error: lookup takes one string argument key"
        return "lookup -> %s" % (self.value if args["key"] == self.key else "nothing")

    def step(self, action):
        if self.done:
            return "over", 0.0, True, False, {}
        self.turn += 1
        try:
            data = json.loads(action)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("tool_calls"), list):
            obs, reward, term = "\n".join(self._run(c) for c in data["tool_calls"]) or "error: empty", 0.0, "unknown" in "".join(self._run(c) for c in data["tool_calls"])
        else:
            found = re.findall(r"\\boxed\{([^{}]*)\}", action)
            if not found:
                obs, reward, term = "Call a tool or answer with \\boxed{N}.", 0.0, False
            else:
                ok = found[-1].strip() == str(self.value)
                obs, reward, term = ("right" if ok else "wrong"), float(ok), True
        trunc = not term and self.turn >= self.max_turns
        self.done = term or trunc
        return obs, reward, term, trunc, {}

    def solution(self):
        call = {"name": "lookup", "arguments": {"key": self.key}}
        return json.dumps({"tool_calls": [call]}) + "\n\\boxed{%d}" % self.value

    def close(self):
        pass
