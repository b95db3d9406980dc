"""LiveCodeBench v6 code generation, graded in spade-sandbox.

Data: the ``release_v6`` file ``test6.jsonl`` of ``livecodebench/code_generation_lite`` at
``$LCB_V6_JSONL``, else ``${WORKSPACE_DIR}/livecodebench/test6.jsonl`` (where upstream's
``scripts/setup_lcb.sh`` puts it). Records keep their official fields: ``question_id``,
``question_content``, ``starter_code``, ``difficulty``, ``public_test_cases`` (JSON text),
``private_test_cases`` (JSON text, or base64 of zlib of a pickled JSON string), ``metadata``
(JSON text with ``func_name`` for functional problems).

The prompt is LiveCodeBench's own chat prompt (system message and the question with its
format section); the code is the block between the last two lines holding a ``` fence, as
the official extraction for chat models; no fenced block fails the problem. Every test (public
then private) runs in one fresh sandbox process under the official per-test limit (6 s;
``timeout_s``), stopping at the first failure; the sandbox's wall limit is the official global
one, ``(timeout_s + 1) * tests + 5``. A problem is solved when every test passes.
Paper keys: ``livecodebench_pass_at_1`` (mean over samples and problems), per difficulty
``livecodebench_<easy|medium|hard>_pass_at_1`` and ``livecodebench_n_problems``. The official
runner (``lcb_runner`` at ``LCB_ROOT``) is not needed.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import secrets
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import spade_sandbox as ss

from ..errors import EvalDataError
from . import DataNeed, Item, Score, suite_config, workspace_root
from .lcb_harness import HARNESS

DEFAULTS: dict[str, Any] = {"path": None, "samples": 1, "limit": None, "timeout_s": 6,
                            "mem_mib": 2048}  # fmt: skip
SYSTEM = (
    "You are an expert Python programmer. You will be given a question (problem specification)"
    " and will generate a correct Python program that matches the specification and passes all"
    " tests."
)
WITH_STARTER = (
    "You will use the following starter code to write the solution to the problem and enclose"
    " your code within delimiters."
)
WITHOUT_STARTER = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not"
    " directly test on the sample inputs). Enclose your code within delimiters as follows."
    " Ensure that when the python program runs, it reads the inputs, runs the algorithm and"
    " writes output to STDOUT."
)
HOW = ("run upstream's `WORKSPACE_DIR=... bash scripts/setup_lcb.sh`, or download test6.jsonl "
       "of livecodebench/code_generation_lite there (or point LCB_V6_JSONL at it)")  # fmt: skip
ALLOWED = ss.DEFAULT_ALLOWED_IMPORTS | {"io", "sys", "signal", "builtins", "threading"}


def data_path(config: dict[str, Any]) -> Path:
    """``path:``, else ``$LCB_V6_JSONL``, else ``${WORKSPACE_DIR}/livecodebench/test6.jsonl``."""
    explicit = config.get("path") or os.environ.get("LCB_V6_JSONL")
    if explicit:
        return Path(explicit)
    return workspace_root("livecodebench") / "livecodebench" / "test6.jsonl"


def data_needs(config: dict[str, Any]) -> list[DataNeed]:
    """The release_v6 test file."""
    cfg = suite_config(DEFAULTS, config, "livecodebench")
    try:
        path = data_path(cfg)
    except EvalDataError:
        return [DataNeed("$WORKSPACE_DIR/livecodebench/test6.jsonl", False, "set WORKSPACE_DIR")]
    return [DataNeed(str(path), path.is_file(), HOW)]


class _StringsOnly(pickle.Unpickler):
    """The private tests are a pickled string: refuse anything that would load a class."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused {module}.{name}")


def decode_tests(text: str) -> list[dict[str, Any]]:
    """Test cases from their JSON text or the compressed form of the private tests."""
    try:
        tests = json.loads(text)
    except ValueError:
        raw = zlib.decompress(base64.b64decode(text.encode("utf-8")))
        tests = json.loads(_StringsOnly(io.BytesIO(raw)).load())
    return list(tests)


def prompt(question: str, starter: str) -> list[dict[str, str]]:
    """LiveCodeBench's chat prompt for one problem."""
    body = f"### Question:\n{question}\n\n"
    if starter:
        body += f"### Format: {WITH_STARTER}\n```python\n{starter}\n```\n\n"
    else:
        body += f"### Format: {WITHOUT_STARTER}\n```python\n# YOUR CODE HERE\n```\n\n"
    body += "### Answer: (use the provided format with backticks)\n\n"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}]


def load(config: dict[str, Any]) -> list[Item]:
    """One item per problem, tests and function name in ``meta``."""
    cfg = suite_config(DEFAULTS, config, "livecodebench")
    path = data_path(cfg)
    if not path.is_file():
        raise EvalDataError(f"missing {path}; {HOW}")
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            tests = decode_tests(row["public_test_cases"]) + decode_tests(row["private_test_cases"])
            fn_name = json.loads(row.get("metadata") or "{}").get("func_name")
            meta = {"inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests],
                    "fn_name": fn_name, "timeout_s": cfg["timeout_s"], "mem_mib": cfg["mem_mib"]}  # fmt: skip
            chat = prompt(row["question_content"], row.get("starter_code") or "")
        except (ValueError, KeyError, TypeError, zlib.error, pickle.UnpicklingError) as exc:
            raise EvalDataError(f"{path}:{n}: not a LiveCodeBench record ({exc})") from None
        level = str(row.get("difficulty") or "unknown")
        items.append(Item(f"{level}/{row['question_id']}", chat, None, meta))
    return items[: cfg["limit"]] if cfg["limit"] else items


def extract_code(response: str) -> str | None:
    """Lines between the last two lines that hold a ``` fence; None when there are fewer."""
    lines = response.split("\n")
    fences = [i for i, line in enumerate(lines) if "```" in line]
    if len(fences) < 2:
        return None
    return "\n".join(lines[fences[-2] + 1 : fences[-1]])


def grade(code: str, meta: dict[str, Any]) -> tuple[bool, str]:
    """Run every test of a problem on ``code`` in a fresh sandbox: (solved, why)."""
    n, per_test = len(meta["inputs"]), int(meta["timeout_s"])
    wall = (per_test + 1) * n + 5
    limits = ss.Limits(call_wall_s=wall, cpu_s=wall, mem_mib=int(meta["mem_mib"]),
                       max_output_kib=1024)  # fmt: skip
    nonce = secrets.token_hex(8)
    spec = {"code": code, "fn_name": meta["fn_name"], "inputs": meta["inputs"],
            "outputs": meta["outputs"], "timeout_s": per_test, "nonce": nonce}  # fmt: skip
    result = ss.run(HARNESS, ss.SandboxConfig(limits=limits, allowed_imports=ALLOWED),
                    stdin=json.dumps(spec))  # fmt: skip
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith(nonce + " ")]
    if result.returncode != 0 or not lines:
        why = result.reason.value if result.reason else f"exit {result.returncode}"
        return False, f"{why}: {result.stderr[-200:]}"
    verdict = json.loads(lines[-1][len(nonce) + 1 :])
    why = f"{verdict['verdict']} at test {verdict['passed']}: {verdict['detail'][:160]}"
    return verdict["verdict"] == "pass", why


def score(item: Item, response: str) -> Score:
    """1.0 when the extracted program passes every test."""
    code = extract_code(response)
    if code is None:
        return Score(0.0, None, "no fenced code block")
    solved, why = grade(code, item.meta)
    return Score(1.0 if solved else 0.0, code, why)


def metrics(by_item: dict[str, list[float]]) -> dict[str, float]:
    """pass@1 (mean over samples, then problems) overall and per difficulty (the id prefix)."""
    groups: dict[str, list[float]] = defaultdict(list)
    for item_id, v in by_item.items():
        groups[item_id.split("/", 1)[0]].append(sum(v) / len(v))
    every = [x for v in groups.values() for x in v]
    out = {f"livecodebench_{d}_pass_at_1": sum(v) / len(v) for d, v in groups.items()}
    out["livecodebench_pass_at_1"] = sum(every) / len(every)
    out["livecodebench_n_problems"] = float(len(every))
    return out
