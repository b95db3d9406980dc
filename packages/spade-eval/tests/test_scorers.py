import math
import time
from pathlib import Path

import pytest
from spade_eval import Item, pass_at_k
from spade_eval.suites import code, get_suite, science, tool_use
from spade_eval.suites import math as msuite


@pytest.mark.parametrize(
    ("gold", "response", "ok"),
    [
        ("42", "so the total is \\boxed{42}", True),
        ("42", "\\boxed{042}", True),
        ("42", "\\boxed{41}", False),
        ("1/2", "\\boxed{\\frac{1}{2}}", True),
        ("1/2", "\\boxed{0.5}", True),
        ("1/2", "\\boxed{\\frac{1}{3}}", False),
        ("\\sqrt{2}/2", "\\boxed{\\frac{1}{\\sqrt{2}}}", True),
        ("x^2+2x+1", "\\boxed{(x+1)^2}", True),
        ("x^2+1", "\\boxed{(x+1)^2}", False),
        ("7", "Answer: 7", True),
        ("7", "no final answer here", False),
    ],
)
def test_math_equivalence(gold, response, ok):
    item = Item("m", [], gold)
    assert msuite.score(item, response).value == (1.0 if ok else 0.0)


def test_math_boxed_nested_braces_and_redundant_braces():
    assert msuite.extract_answer("so \\boxed{\\frac{a}{b}}") == "\\frac{a}{b}"
    assert msuite.extract_answer("so \\boxed{{42}}") == "42"  # stripped, as upstream


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("Reasoning... Answer: C", "C"),
        ("I think (c) is right", "C"),
        ("The best option is **B**", "B"),
        ("The answer is D.", "D"),
        ("A is wrong, B is wrong, so the answer is (A)", "A"),
        ("Options A and B fail; final: \\boxed{C}", "C"),
        ("Between A and C, I pick C", "C"),
        ("answer: b", "B"),
        ("I have no idea", None),
    ],
)
def test_science_letter_extraction(text, letter):
    assert science.extract_letter(text) == letter


def test_science_shuffle_is_seeded(tmp_path, monkeypatch):
    (tmp_path / "eval" / "science").mkdir(parents=True)
    rows = [
        f'{{"id": {i}, "question": "q{i}", "correct": "right", "incorrect": ["w1", "w2", "w3"]}}'
        for i in range(20)
    ]
    (tmp_path / "eval" / "science" / "gpqa_diamond.jsonl").write_text("\n".join(rows))
    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path))
    a, b = science.load({"seed": 1}), science.load({"seed": 1})
    assert [i.answer for i in a] == [i.answer for i in b]
    assert len({i.answer for i in a}) > 1  # the correct option moves around
    for it in a:
        assert f"({it.answer}) right" in it.prompt[0]["content"]
        assert science.score(it, f"Answer: {it.answer}").value == 1.0
    from spade_eval import CallableClient, evaluate

    gold = {it.prompt[0]["content"]: it.answer for it in a}
    wrong_on_odd = CallableClient(lambda batch, s: [
        f"Answer: {gold[c[0]['content']] if s['seed'] % 2 == 0 else 'Z'}" for c in batch])  # fmt: skip
    cfg = {"suites": {"science": {"seed": 1, "samples": 4}}}
    res = evaluate(wrong_on_odd, cfg, tmp_path / "out", progress=False)
    assert res["metrics"] == {"gpqa_diamond_avg_at_n": 0.5}  # upstream's RQ1 GPQA key, avg@4


def test_missing_data_names_file(tmp_path, monkeypatch):
    from spade_eval import EvalDataError

    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path))
    with pytest.raises(EvalDataError, match="eval/math/aime24.jsonl"):
        msuite.load({})
    monkeypatch.delenv("WORKSPACE_DIR")
    with pytest.raises(EvalDataError, match="WORKSPACE_DIR"):
        science.load({})


@pytest.fixture(scope="module")
def problem():
    return code.load({"limit": 1})[0]


def test_code_correct_and_incorrect(problem):
    good = f"```python\n{problem.meta['prompt']}{problem.answer}```"
    assert code.score(problem, good).value == 1.0
    body_only = problem.answer  # a bare body continuing the stub
    assert code.score(problem, body_only).value == 1.0
    bad = (
        f"```python\ndef {problem.meta['entry_point']}(numbers, threshold):\n    return False\n```"
    )
    result = code.score(problem, bad)
    assert result.value == 0.0 and "AssertionError" in result.detail


@pytest.mark.parametrize(
    "payload",
    [
        "import os\n    os.system('touch {marker}')\n    return True",
        "open('{marker}', 'w').write('x')\n    return True",
        "print(open('/etc/passwd').read())\n    return True",
        "import subprocess\n    subprocess.run(['touch', '{marker}'])\n    return True",
        "while True:\n        pass",
    ],
)
def test_code_malicious_contained(problem, tmp_path, payload):
    marker = tmp_path / "pwned"
    entry = problem.meta["entry_point"]
    src = f"def {entry}(numbers, threshold):\n    " + payload.format(marker=marker)
    item = Item(problem.id, problem.prompt, problem.answer, {**problem.meta, "timeout_s": 2.0})
    start = time.monotonic()
    result = code.score(item, src)
    assert result.value == 0.0
    assert not marker.exists()
    assert time.monotonic() - start < 10


def test_pass_at_k_closed_form():
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                closed = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(closed, abs=1e-12)
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def _tool_item(category):
    return next(i for i in tool_use.load({}) if i.meta["category"] == category)


def test_tool_use_shipped_set_size():
    items = tool_use.load({})
    cats = {i.meta["category"] for i in items}
    assert len(items) >= 30 and cats == {"simple", "multiple", "parallel"}


def test_tool_call_formats():
    item = next(i for i in tool_use.load({}) if i.id == "simple_2")  # 250 USD -> EUR
    tag = '<tool_call>{"name": "convert_currency", "arguments": {"amount": 250, "from_currency": "usd", "to_currency": "EUR"}}</tool_call>'
    js = '```json\n{"name": "convert_currency", "arguments": {"amount": "250.0", "from_currency": "USD", "to_currency": "EUR"}}\n```'
    py = "convert_currency(amount=250.0, from_currency='USD', to_currency='EUR')"
    for reply in (tag, js, py):
        assert tool_use.score(item, reply).value == 1.0, reply
    wrong_value = py.replace("EUR", "GBP")
    wrong_name = py.replace("convert_currency", "convert")
    missing = "convert_currency(amount=250, to_currency='EUR')"
    extra = py[:-1] + ", fee=1)"
    for reply in (wrong_value, wrong_name, missing, extra, "I cannot do that"):
        assert tool_use.score(item, reply).value == 0.0, reply


def test_tool_optional_args_and_parallel_order():
    item = next(i for i in tool_use.load({}) if i.id == "parallel_0")  # Paris and Rome
    both = "[get_weather(city='Rome'), get_weather(city='Paris', unit='celsius')]"
    assert tool_use.score(item, both).value == 1.0
    assert tool_use.score(item, "get_weather(city='Rome')").value == 0.0
    dup = "[get_weather(city='Rome'), get_weather(city='Rome')]"
    assert tool_use.score(item, dup).value == 0.0
    bad_unit = "[get_weather(city='Rome'), get_weather(city='Paris', unit='kelvin')]"
    assert tool_use.score(item, bad_unit).value == 0.0


def test_real_bfcl_layout(tmp_path):
    root = tmp_path / "bfcl"
    (root / "possible_answer").mkdir(parents=True)
    fn = {
        "name": "f",
        "description": "",
        "parameters": {"type": "dict", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    }
    q = {
        "id": "simple_0",
        "question": [[{"role": "user", "content": "call f with 3"}]],
        "function": [fn],
    }
    a = {"id": "simple_0", "ground_truth": [{"f": {"a": [3]}}]}
    import json

    (root / "BFCL_v3_simple.json").write_text(json.dumps(q) + "\n")
    (root / "possible_answer" / "BFCL_v3_simple.json").write_text(json.dumps(a) + "\n")
    (item,) = tool_use.load({"bfcl_dir": str(root), "categories": ["simple"]})
    assert tool_use.score(item, "f(a=3)").value == 1.0
    assert tool_use.score(item, "f(a=4)").value == 0.0
    with pytest.raises(FileNotFoundError, match="BFCL_v3_multiple.json"):
        tool_use.load({"bfcl_dir": str(root), "categories": ["multiple"]})


def test_unknown_suite_key_refused():
    from spade_eval import EvalConfigError

    with pytest.raises(EvalConfigError, match="'limt'"):
        get_suite("tool_use").load({"limt": 3})


def test_procedural_reasoning_gym_scoring():
    proc = get_suite("procedural")
    items = proc.load({"tasks": ["basic_arithmetic"], "size": 3, "seed": 5})
    again = proc.load({"tasks": ["basic_arithmetic"], "size": 3, "seed": 5})
    assert [i.prompt for i in items] == [i.prompt for i in again]
    for it in items:
        assert proc.score(it, f"work...\nAnswer: {it.answer}").value == 1.0
        assert proc.score(it, "Answer: not a number").value == 0.0
    assert Path(proc.__file__).name == "procedural.py"
