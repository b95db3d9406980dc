"""LiveCodeBench v6: official record layout, sandboxed grading of functional and stdin tests,
per-test time limits, upstream's lcb_3 problems through an adapter, and a localhost run."""

import ast
import json

import pytest
from spade_eval import CallableClient, EvalDataError, OpenAIClient, evaluate
from spade_eval.suites import livecodebench as lcb

RIGHT = {
    "abc900_a": "n = int(input())\nprint(sum(map(int, input().split())))",
    "abc900_b": (
        "import sys\ndef main():\n    data = sys.stdin.read().split()\n"
        "    xs = list(map(int, data[1:]))\n    print(sum(xs) / len(xs))\n    print(max(xs))\n"
        "if __name__ == '__main__':\n    main()"
    ),  # fmt: skip
    "3901": (
        "class Solution:\n    def countEven(self, nums: List[int]) -> int:\n"
        "        return sum(1 for x in nums if x % 2 == 0)"
    ),  # fmt: skip
    "3902": (
        "class Solution:\n    def pairSums(self, a: List[int], b: List[int]) -> List[int]:\n"
        "        return tuple(x + y for x, y in zip(a, b))"
    ),  # tuples read as lists # fmt: skip
    "abc900_c": "n = int(input())\nrows = [input() for _ in range(n)]\nprint('\\n'.join(rows[::-1]))",
}
WRONG = {
    "abc900_a": "print(0)",
    "abc900_b": "print('2.5000001')\nprint(3)",
    "3901": "class Solution:\n    def countEven(self, nums):\n        return len(nums)",
    "3902": "class Solution:\n    def pairSums(self, a, b):\n        return [x - y for x, y in zip(a, b)]",
    "abc900_c": "import os\nprint(os.getcwd())",  # forbidden in the sandbox
}


def fenced(code):
    return f"Here is my solution.\n```python\n{code}\n```\nDone."


def replier(table):
    items = {it.prompt[-1]["content"]: it.id.split("/", 1)[1] for it in lcb.load({})}
    return lambda batch, sampling: [fenced(table[items[c[-1]["content"]]]) for c in batch]


def test_loads_official_layout_with_packed_private_tests(workspace):
    items = lcb.load({})
    assert [it.id for it in items] == ["easy/abc900_a", "medium/abc900_b", "easy/3901",
                                       "medium/3902", "hard/abc900_c"]  # fmt: skip
    assert items[1].meta["inputs"] == ["2\n2 3\n", "3\n1 1 1\n", "1\n7\n"]  # public + unpacked
    assert items[3].meta["fn_name"] == "pairSums" and len(items[3].meta["inputs"]) == 3
    assert items[0].prompt[0]["role"] == "system"
    assert "# YOUR CODE HERE" in items[0].prompt[1]["content"]
    assert "def countEven" in items[2].prompt[1]["content"]


def test_perfect_scores_100_and_wrong_scores_0(workspace, tmp_path):
    cfg = {"suites": {"livecodebench": {}}}
    m = evaluate(CallableClient(replier(RIGHT)), cfg, tmp_path / "r", progress=False)["metrics"]
    assert m["livecodebench_pass_at_1"] == 1.0 and m["livecodebench_n_problems"] == 5.0
    assert m["livecodebench_hard_pass_at_1"] == 1.0
    res = evaluate(CallableClient(replier(WRONG)), cfg, tmp_path / "w", progress=False)
    assert res["metrics"]["livecodebench_pass_at_1"] == 0.0
    details = [
        json.loads(x)["detail"] for x in (tmp_path / "w" / "records.jsonl").read_text().splitlines()
    ]
    assert any(d.startswith("wrong_answer") for d in details)
    assert any(d.startswith("runtime_error") and "'os' is not allowed" in d for d in details)


def test_per_test_time_limit_and_hostile_code(workspace):
    item = lcb.load({"timeout_s": 1})[0]
    slow = lcb.score(item, fenced("while True:\n    pass"))
    assert slow.value == 0.0 and slow.detail.startswith("time_limit at test 0")
    fake = lcb.score(item, fenced('print(\'{"verdict": "pass", "passed": 3, "detail": ""}\')'))
    assert fake.value == 0.0  # a forged verdict without the nonce does not count
    assert lcb.score(item, "no code at all").detail == "no fenced code block"
    assert lcb.score(item, fenced("def broken(:\n")).detail.startswith("compile_error")


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("```python\na\n```\nand\n```python\nb\n```", "b"),
        ("```\nx = 1\n```", "x = 1"),
        ("```python\nonly one fence", None),
    ],  # fmt: skip
)
def test_extraction_is_the_official_last_block(reply, code):
    assert lcb.extract_code(reply) == code


# upstream's eval_offline/suites/tests/fixtures/lcb_3.jsonl (its own record shape), adapted
UPSTREAM_LCB3 = [
    ("add", "a, b", "a + b", [("(1, 2)", "3"), ("(0, 0)", "0")]),
    ("square", "x", "x * x", [("(3,)", "9"), ("(0,)", "0")]),
    ("is_even", "n", "n % 2 == 0", [("(2,)", "True"), ("(3,)", "False")]),
]


def as_functional(tests):
    """upstream's Python-literal argument tuples -> official JSON-lines functional tests."""
    inputs = ["\n".join(json.dumps(a) for a in ast.literal_eval(i)) for i, _ in tests]
    return inputs, [json.dumps(ast.literal_eval(o)) for _, o in tests]


@pytest.mark.parametrize(("name", "params", "expr", "tests"), UPSTREAM_LCB3)
def test_upstream_lcb3_problems_grade_through_the_sandbox(name, params, expr, tests):
    inputs, outputs = as_functional(tests)
    meta = {"inputs": inputs, "outputs": outputs, "fn_name": name, "timeout_s": 6, "mem_mib": 512}
    assert lcb.grade(f"def {name}({params}):\n    return {expr}", meta)[0]
    assert not lcb.grade(f"def {name}({params}):\n    return None", meta)[0]


def test_missing_data_names_path_and_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path))
    monkeypatch.delenv("LCB_V6_JSONL", raising=False)
    with pytest.raises(
        EvalDataError, match=r"livecodebench/test6.jsonl; run upstream's .*setup_lcb.sh"
    ):
        lcb.load({})


def test_end_to_end_against_localhost_server(workspace, tmp_path, chat_server):
    reply = replier(RIGHT)
    server = chat_server(lambda messages, body: reply([messages], {})[0])
    client = OpenAIClient(server.url, "m", concurrency=2)
    res = evaluate(client, {"suites": {"livecodebench": {"limit": 3}}}, tmp_path, progress=False)
    assert res["metrics"]["livecodebench_pass_at_1"] == 1.0
    assert server.bodies[0]["messages"][0]["role"] == "system"
