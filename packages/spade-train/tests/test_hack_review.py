"""The reward-hack review: what the LLM validator is shown comes from the real sandbox report."""

from __future__ import annotations

from pathlib import Path

import pytest
import spade_corpus as sc
from spade_train.config import load_recipe
from spade_train.core import hack_review, judges
from spade_train.errors import RecipeError

BAD = Path(__file__).resolve().parents[2] / "spade-corpus" / "tests" / "bad_envs"
HINT = "Binary search: guess the midpoint of the numbers still possible."


def _report(name: str) -> sc.ValidationReport:
    source = (BAD / name).read_text()
    return sc.validate_source(source, hint=HINT, env_id=name)


def test_a_rejected_report_gives_its_named_probe_in_the_verdict_line():
    report = _report("probe_wins.py")
    assert report.reason is not None and report.reason.startswith("probe_wins:")
    lines = hack_review.evidence_lines(report)
    assert lines[0] == f"- verdict: {report.message}" and "probe" in lines[0]


def test_a_passed_report_lists_seeds_and_every_probe_that_won():
    report = _report("valid_guess_number.py")
    assert report.valid, report.message
    lines = hack_review.evidence_lines(report)
    text = "\n".join(lines)
    assert f"- seeds played: {len(report.checks['seeds'])}" in text
    assert f"- share of probe episodes won: {report.checks['probe_win_rate']}" in text
    wins = report.checks["probe_wins"]
    won = [line for line in lines if line.startswith("- probes that won:")]
    assert len(won) == 1
    if any(wins.values()):  # a guessing game is won by chance now and then
        assert all(f"{k} {v}" in won[0] for k, v in wins.items() if v)
    else:
        assert won[0].startswith(f"- probes that won: none of {len(wins)}")


def test_the_conversation_holds_source_hint_and_evidence_and_asks_for_a_box():
    source = (BAD / "valid_guess_number.py").read_text()
    msgs = hack_review.hack_review_messages(source, HINT, ["- probes that won: random 3"])
    assert [m["role"] for m in msgs] == ["system", "user"]
    text = msgs[1]["content"]
    assert source in text and HINT in text and "- probes that won: random 3" in text
    assert text.rstrip().endswith("\\boxed{no} if some lazy strategy wins.")
    # the judges' parser reads the verdict a reviewer writes
    assert not judges.parse_verdict("a constant answer wins: \\boxed{no}").accepted


def test_a_long_source_is_cut_and_a_missing_report_said():
    msgs = hack_review.hack_review_messages("x = 1\n" * 5000, "", [])
    assert "# [cut]" in msgs[1]["content"] and "(none)" in msgs[1]["content"]
    assert hack_review.evidence_lines(None) == ["- no sandbox report (the validator did not run)"]


def test_recipes_accept_the_reward_hack_prompt_and_refuse_a_typo():
    cfg = load_recipe("quickstart", ["designer.pipeline.validator.prompt=reward-hack"])
    assert cfg.designer.pipeline.validator.prompt == "reward-hack"
    with pytest.raises(RecipeError, match="prompt"):
        load_recipe("quickstart", ["designer.pipeline.validator.prompt=reward_hack"])
