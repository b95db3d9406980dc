"""``ToolUseBaseEnv``: the base class tool-use environments written for the released SPADE code
subclass (without importing it: the released loader puts it in every game's namespace, and so
does compat mode here, see :func:`spade_envs.compat_source`).

This file is also the source compat mode runs in front of a game (inside the sandbox too), so it
uses the standard library only and defines nothing at module level but the class.

A subclass writes ``reset`` (setting ``self._tools`` — ``{name: {"description", "parameters"}}``
— ``self._state`` and ``self._expected_answer``), ``solution`` and one ``tool_<name>(**arguments)``
method per tool. The base class gives, with the released base class's behaviour:

* ``tools``: the tools in this project's contract form (``[{"name", "description",
  "parameters"}]``), read on an instance or on the class (the class builds one instance to read
  them), and ``get_tools()`` in OpenAI function-calling form;
* ``execute_tool(name, arguments)`` → ``{"output": text, "returncode": 0 or 1}``;
* ``step(action)``: a final answer (``<answer>…</answer>`` or this project's ``\\boxed{…}``)
  is checked with ``_check_answer`` (case-insensitive text, or numbers within 0.01 after
  dropping ``$`` and ``,``): right gives reward 1 and ends the episode, wrong gives 0 and
  feedback naming the pending step of a multi-step task (``_user_messages`` and
  ``_current_msg``); tool calls (this runner's ``{"tool_calls": [...]}`` or a
  ``<tool_call>{json}</tool_call>`` block) run and their results are the observation, reward 0;
  anything else is a format error with reward -0.1. The turn that reaches ``max_turns`` is
  truncated (and shows the solution).
"""

import json
import re


class ToolUseBaseEnv:
    """Base of released-code tool-use environments (see the module docstring)."""

    class _Tools:
        """``tools`` on an instance, or on the class (read from a fresh instance's reset)."""

        def __get__(self, env, owner):
            env = owner() if env is None else env
            return [
                {
                    "name": str(name),
                    "description": str(spec.get("description", "")),
                    "parameters": spec.get("parameters") or {"type": "object", "properties": {}},
                }
                for name, spec in dict(env._tools).items()
            ]

    tools = _Tools()

    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns
        self.turn_count = 0
        self._tools = {}
        self._state = {}
        self._call_history = []
        self._expected_answer = None
        self.reset()

    def reset(self, seed=None):
        raise NotImplementedError("a ToolUseBaseEnv subclass must write reset()")

    def solution(self):
        raise NotImplementedError("a ToolUseBaseEnv subclass must write solution()")

    def get_tools(self):
        return [{"type": "function", "function": tool} for tool in self.tools]

    def execute_tool(self, name, arguments):
        method = getattr(self, f"tool_{name}", None)
        if method is None:
            return {"output": f"Unknown tool '{name}'", "returncode": 1}
        try:
            result = method(**arguments)
        except Exception as exc:
            return {"output": f"Error calling {name}: {exc}", "returncode": 1}
        self._call_history.append({"name": name, "arguments": arguments, "result": str(result)})
        return {"output": str(result), "returncode": 0}

    def step(self, action):
        self.turn_count += 1
        out_of_turns = self.turn_count >= self.max_turns
        action = action if isinstance(action, str) else str(action)
        answer = self._final_answer(action)
        if answer is not None:
            if self._check_answer(answer):
                return "Correct!", 1.0, True, False, {}
            if out_of_turns:
                return f"Wrong answer. Solution:\n{self.solution()}", 0.0, False, True, {}
            return self._incorrect_answer_feedback(), 0.0, False, False, {}
        calls = self._calls(action)
        if calls is None:
            if out_of_turns:
                return f"Out of turns. Solution:\n{self.solution()}", 0.0, False, True, {}
            return (
                "Format error: call a tool, or submit the result as <answer>result</answer>.",
                -0.1,
                False,
                False,
                {},
            )
        outputs = [self._run_call(name, arguments) for name, arguments in calls]
        observation = "\n".join(outputs)
        if out_of_turns:
            return (
                f"{observation}\n\nOut of turns. Solution:\n{self.solution()}",
                0.0,
                False,
                True,
                {},
            )
        return observation, 0.0, False, False, {}

    def _run_call(self, name, arguments):
        if not callable(getattr(self, f"tool_{name}", None)):
            return f"Unknown tool '{name}'. The tools are: {', '.join(self._tools)}"
        return f"Tool result:\n{self.execute_tool(name, arguments)['output']}"

    @staticmethod
    def _final_answer(action):
        """The submitted answer: an ``<answer>`` block, or a reply that is one ``\\boxed{…}``
        (this runner's final-answer action); None otherwise."""
        found = re.search(r"<answer>(.*?)</answer>", action, re.DOTALL)
        if found:
            return found.group(1).strip()
        text = action.strip()
        if text.startswith("\\boxed{") and text.endswith("}") and not text.startswith('{"'):
            return text[len("\\boxed{") : -1].strip()
        return None

    @staticmethod
    def _calls(action):
        """``[(name, arguments)]`` from a ``{"tool_calls": [...]}`` action or the first
        ``<tool_call>{json}</tool_call>`` block; None when the action holds neither."""
        found = re.search(r"<tool_call>(.*?)</tool_call>", action, re.DOTALL)
        text = found.group(1) if found else action
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, ValueError):
            return None
        items = data.get("tool_calls") if isinstance(data, dict) and not found else [data]
        if not isinstance(items, list):
            return None
        calls = []
        for item in items:
            if not isinstance(item, dict):
                return None
            arguments = item.get("arguments", {})
            calls.append(
                (str(item.get("name", "")), arguments if isinstance(arguments, dict) else {})
            )
        return calls

    def _obs_suffix(self):
        return ""  # older released games call it; tools now travel with the chat template

    def _incorrect_answer_feedback(self):
        steps = getattr(self, "_user_messages", None)
        at = getattr(self, "_current_msg", None)
        if isinstance(steps, (list, tuple)) and isinstance(at, int) and 0 <= at < len(steps):
            return (
                f'Not correct yet: step {at + 1} of {len(steps)} is still open: "{steps[at]}". '
                "Finish it with the tools before submitting <answer>done</answer>."
            )
        return "Not correct. Keep using the tools."

    def _check_answer(self, answer):
        given, expected = str(answer).strip(), str(self._expected_answer).strip()
        if given.lower() == expected.lower():
            return True
        try:
            as_number = [
                float(t.replace("$", "").replace(",", "").strip()) for t in (given, expected)
            ]
        except (ValueError, TypeError):
            return False
        return abs(as_number[0] - as_number[1]) < 0.01

    def close(self):
        pass
