"""The validator's red-team suite: environments a designer optimizing against it would write.

Each case departs from one valid guess-the-number game in one hostile way (a reward hack, an
answer shown to the agent, state outside the seed, escape sequences, structure nested to
exhaust the parser, side effects at import, a sandbox attack) and asserts the reason code
`validate_many` gives it. The whole batch runs twice, with and without bubblewrap, on one
warm pool each; a batch item that breaks the validator itself must not abort the batch. The
CLI and the dedup tool get the same hostile sources. conftest prints `N cases, N contained`.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
import spade_envs as se
import spade_sandbox as ss
from spade_corpus import dedup
from spade_corpus import validate_cli as validate
from spade_corpus.validate import VALIDATION_REASONS, ValidationItem, validate_corpus, validate_many
from spade_sandbox import process

pytestmark = pytest.mark.timeout(300)

BASE = (Path(__file__).parent / "bad_envs" / "valid_guess_number.py").read_text()
HINT = "Binary search: guess the midpoint of the numbers still possible."
LIMITS = ss.Limits(call_wall_s=1.0, cpu_s=8, mem_mib=256, max_disk_files=200)


def edit(*pairs: str) -> str:
    """BASE with each (old, new) pair replaced once; the old text must be there."""
    source = BASE
    for old, new in zip(pairs[::2], pairs[1::2], strict=True):
        assert old in source, old
        source = source.replace(old, new, 1)
    return source


WIN_CHECK = "        elif int(text) == self._secret:"
NOT_DIGIT = "        if not text.isdigit():"
OBS_END = 'You have {self.max_turns} turns."'
SEED = "rng = random.Random(seed)"
RESET_TOP = "    def reset(self, seed=None):\n"
STEP_TOP = "        self._turn += 1\n"


def win_when(condition: str) -> str:
    """A step that also wins whenever `condition` (over `action` and `text`) holds."""
    return edit(
        NOT_DIGIT,
        f'        if {condition}:\n            observation, reward, terminated = "Correct!", 1.0, True\n        elif not text.isdigit():',
    )


CASES: dict[str, tuple[str, str]] = {
    # -- reward hacks ---------------------------------------------------------------------
    "any_box_wins": (win_when("bool(found)"), "probe_wins"),
    "empty_action_wins": (win_when("not action.strip()"), "probe_wins"),
    "zero_wins": (win_when('text == "0"'), "probe_wins"),
    "yes_wins": (win_when('text.lower() == "yes"'), "probe_wins"),
    "very_long_action_wins": (win_when("len(action) > 5000"), "probe_wins"),
    "every_action_wins": (edit(STEP_TOP, STEP_TOP + '        self._done = True\n        return "Correct!", 1.0, True, False, {}\n'), "reward_ignores_action"),
    "reward_after_the_end": (edit('"The episode is over; call reset().", 0.0', '"The episode is over; call reset().", 1.0'), "reward_contract:after_end"),
    "answer_printed_in_the_first_observation": (edit(OBS_END, 'You have {self.max_turns} turns. (\\\\boxed{{{self._secret}}})"'), "solution_leaked"),
    "answer_number_in_the_first_observation": (edit("_LOW, _HIGH = 1, 100", "_LOW, _HIGH = 10, 99", OBS_END, 'You have {self.max_turns} turns. Psst: {self._secret}."'), "solution_leaked"),
    "hint_is_the_answer": (win_when('"midpoint" in action'), "hint_is_answer"),
    "hint_shown_after_an_empty_action": (edit(NOT_DIGIT, f'        if not action:\n            observation, reward, terminated = {HINT!r}, 0.0, False\n        elif not text.isdigit():'), "hint_leaked"),
    "hint_shown_after_a_long_action": (edit(NOT_DIGIT, f'        if len(action) > 5000:\n            observation, reward, terminated = {HINT!r}, 0.0, False\n        elif not text.isdigit():'), "hint_leaked"),
    # -- state outside the seed -----------------------------------------------------------
    "salted_by_id_of_self": (edit(SEED, "rng = random.Random(seed * 100003 + id(self))"), "nondeterministic"),
    "salted_once_per_process": (edit("_LOW, _HIGH = 1, 100", "_LOW, _HIGH = 1, 100\n_SALT = random.randrange(10**6)", SEED, "rng = random.Random(seed + _SALT)"), "nondeterministic"),
    "global_random_generator": (edit(SEED, "rng = random", "rng.randint(_LOW, _HIGH)", "rng.randint(_LOW, _HIGH) if seed is not None else 1"), "nondeterministic"),
    "seed_ignored": (edit(SEED, "rng = random.Random(7)"), "seed_ignored"),
    # -- observations that are not text ---------------------------------------------------
    "ansi_colour_escape": (edit(OBS_END, 'You have \\x1b[1m{self.max_turns}\\x1b[0m turns."'), "observation_charset"),
    "terminal_title_escape": (edit('"Correct!", 1.0, True', '"\\x1b]0;pwned\\x07Correct!", 1.0, True'), "observation_charset"),
    "nul_character": (edit(OBS_END, 'You have {self.max_turns} turns.\\x00"'), "observation_charset"),
    "emoji_outside_the_bmp": (edit(OBS_END, 'You have {self.max_turns} turns. \\U0001F3B2"'), "observation_charset"),
    # -- hostile structure ----------------------------------------------------------------
    "not_nested_3000_deep": (edit("import re\n", "import re\n\nDEEP = " + "not " * 3000 + "0\n"), "too_deep"),
    "list_nested_300_deep": (edit("import re\n", "import re\n\nDEEP = " + "[" * 300 + "]" * 300 + "\n"), "syntax_error"),
    "loops_nested_30_deep": (edit("    def close(self):\n        pass", "    def close(self):\n" + "".join("    " * (i + 2) + "for _ in ():\n" for i in range(30)) + "    " * 32 + "pass"), "syntax_error"),
    "sum_of_1200_terms_is_legitimate": (edit("_LOW, _HIGH = 1, 100", "_LOW, _HIGH = 1, " + " + ".join(["1"] * 1200)), "valid"),
    "null_byte_in_source": (BASE + "\n# \x00\n", "syntax_error"),
    "lone_surrogate_in_source": (BASE + "\n# \ud800\n", "syntax_error"),
    "oversized_source": (BASE + "\n# " + "x" * 70_000 + "\n", "source_too_large"),
    # -- side effects at import -----------------------------------------------------------
    "print_in_the_class_body": (edit('    skill = "Math"\n', '    skill = "Math"\n    print("imported")\n'), "top_level_side_effect"),
    "loop_in_the_class_body": (edit('    skill = "Math"\n', '    skill = "Math"\n    for _ in range(10 ** 9):\n        pass\n'), "top_level_side_effect"),
    "call_in_a_default_argument": (edit("def reset(self, seed=None):", "def reset(self, seed=None, _=print('x')):"), "top_level_side_effect"),
    "print_as_a_decorator": (edit(RESET_TOP, "    @print\n" + RESET_TOP), "top_level_side_effect"),
    "called_decorator": (edit(RESET_TOP, "    @open('/tmp/x', 'w').write\n" + RESET_TOP), "top_level_side_effect"),
    "walrus_at_module_level": (edit("_LOW, _HIGH = 1, 100", "_LOW, _HIGH = 1, (_X := 100)"), "top_level_side_effect"),
    "main_guard": (BASE + "\nif __name__ == '__main__':\n    print(1)\n", "top_level_side_effect"),
    # -- sandbox attacks, as the validator reports them -----------------------------------
    "sleep_in_reset": (edit("import random\n", "import random\nimport time\n", RESET_TOP, RESET_TOP + "        time.sleep(30)\n"), "sandbox_timeout"),
    "nan_reward": (edit('"Correct!", 1.0, True', '"Correct!", float("nan"), True'), "sandbox_bad_return"),
    "system_exit_in_step": (edit(STEP_TOP, STEP_TOP + "        raise SystemExit(0)\n"), "sandbox_crashed"),
    "files_until_the_quota": (edit(STEP_TOP, STEP_TOP + '        for i in range(1000):\n            open(f"f{i}", "w").close()\n'), "sandbox_disk_quota"),
    "exception_whose_str_raises": (edit("import re\n", "import re\n\n\nclass Boom(Exception):\n    def __str__(self):\n        raise ValueError('no')\n", RESET_TOP, RESET_TOP + "        raise Boom()\n"), "reset_raised"),
    "os_import": (edit("import random\n", "import random\nimport os\n"), "forbidden_import"),
    "sleeper_turns_hostile_after_three_steps": (edit(STEP_TOP, STEP_TOP + "        if self._turn > 3:\n            while True:\n                pass\n"), "sandbox_timeout"),
}  # fmt: skip


@pytest.fixture(scope="module", params=["bwrap", "no_bwrap"])
def reports(request):
    """The whole batch, validated once per mode; plus one item that breaks the validator."""
    saved = process.bwrap_status
    if request.param == "no_bwrap":
        process.bwrap_status = lambda: (None, "unavailable: disabled by the red-team suite")
    elif saved()[0] is None:
        pytest.skip("bubblewrap is not installed here")
    items = [ValidationItem(src, HINT, name) for name, (src, _) in CASES.items()]
    items.insert(3, ValidationItem(BASE, HINT, "bad_skill_item", skill="NoSuchSkill"))
    try:
        with ss.SandboxPool(ss.SandboxConfig(limits=LIMITS), size=2) as pool:
            got = validate_many(items, workers=2, progress=False, pool=pool)
    finally:
        process.bwrap_status = saved
    return {r.env_id: r for r in got}


def test_every_expected_reason_is_a_published_one():
    assert all(e == "valid" or e in VALIDATION_REASONS for _, e in CASES.values())


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(reports, name):
    _, expect = CASES[name]
    report = reports[name]
    assert not report.infrastructure, report.message
    if expect == "valid":
        assert report.valid, report.message
    else:
        # "probe_wins" names a family: the reason names the probe ("probe_wins:common").
        reason = report.reason.partition(":")[0] if expect == "probe_wins" else report.reason
        assert (report.valid, reason) == (False, expect), report.message
        assert report.message and "\n" not in report.message


def test_one_broken_item_does_not_abort_the_batch(reports):
    report = reports["bad_skill_item"]
    assert report.reason == "validator_error" and report.infrastructure
    assert "NoSuchSkill" in report.message and "\n" not in report.message
    assert len(reports) == len(CASES) + 1


def test_valid_reports_carry_the_probe_win_rate(reports):
    report = reports["sum_of_1200_terms_is_legitimate"]
    assert report.checks["probe_win_rate"] <= 0.2
    assert set(report.checks["probe_wins"]) >= {"empty", "garbage", "common", "tokens"}


def test_dedup_never_raises_on_the_hostile_sources():
    pairs = [(name, src) for name, (src, _) in CASES.items()]
    result = dedup.find_duplicates(pairs)
    assert result.total == len(pairs)


def test_the_cli_prints_one_line_per_hostile_file_and_writes_its_report(tmp_path, capsys):
    names = ["not_nested_3000_deep", "any_box_wins", "sum_of_1200_terms_is_legitimate"]
    for name in names:
        (tmp_path / f"{name}.py").write_text(CASES[name][0])
    parser = argparse.ArgumentParser()
    validate.add_arguments(parser)
    out = tmp_path / "report.json"
    args = [str(tmp_path / f"{n}.py") for n in names] + ["--hint", HINT, "--out", str(out)]
    status = validate.run(parser.parse_args([*args, "--no-progress"]))
    printed = capsys.readouterr()
    assert status == 1 and "Traceback" not in printed.out + printed.err
    lines = printed.out.strip().splitlines()
    assert lines[0].startswith("seeds drawn from root ") and "--seed-root" in lines[0]
    lines = lines[1:]
    assert lines[2].startswith("  evidence: probe=")  # under the rejection it explains
    lines = [line for line in lines if not line.startswith("  evidence:")]
    assert len(lines) == 3 and "[too_deep]" in lines[0] and "[probe_wins:" in lines[1]
    report = json.loads(out.read_text())
    reasons = [r["reason"] for r in report["reports"]]
    assert reasons[0] == "too_deep" and reasons[1].startswith("probe_wins:") and reasons[2] is None
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.slow
def test_the_example_corpora_pass_and_no_probe_wins_on_more_than_one_seed():
    """No real game newly fails: the 60 example games and the 30 tool-use environments."""
    for path in (se.example_corpus_path(), se.tool_use_corpus_path()):
        corpus = se.load_corpus(path)
        got, summary = validate_corpus(corpus, workers=2)
        assert summary["valid"] == summary["total"], summary["by_reason"]
        assert max(max(r.checks["probe_wins"].values()) for r in got) <= 1
