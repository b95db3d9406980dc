"""The validation pipeline on the example corpus, reason table, summary and infrastructure faults."""

import re
from pathlib import Path

import pytest
import spade_envs as se
import spade_sandbox as ss
from spade_corpus.structural import STRUCTURAL_REASONS
from spade_corpus.validate import (
    INFRASTRUCTURE_REASONS,
    VALIDATION_REASONS,
    ValidationItem,
    ValidationReport,
    validate_corpus,
    validate_many,
    validate_source,
    validation_summary,
)

BAD_ENVS = Path(__file__).parent / "bad_envs"
GOOD = (BAD_ENVS / "valid_guess_number.py").read_text()
HINT = "Binary search: guess the midpoint of the numbers still possible."
# check_env codes the sandbox's own return check pre-empts (reported as sandbox_bad_return),
# and the validator's own fault: no environment can produce them under the sandbox.
UNREACHABLE_UNDER_SANDBOX = {
    "reset_return_type",
    "step_return_type",
    "reward_not_finite",
    "info_not_json",
    "validator_error",
}
EXERCISED_HERE = {"sandbox_infrastructure", "sandbox_limit_exceeded"}


@pytest.fixture(scope="module")
def example_validation():
    return validate_corpus(se.load_corpus("example"))


def test_example_corpus_all_accepted(example_validation):
    reports, summary = example_validation
    corpus = se.load_corpus("example")
    assert [r.env_id for r in reports] == corpus.ids()
    assert all(r.valid for r in reports), [r.message for r in reports if not r.valid]
    assert summary["total"] == summary["valid"] == 60 and summary["by_reason"] == {}
    assert summary["by_skill"] == corpus.counts_by_skill()
    for rep in reports:  # the same measurements as the shipped validation manifest
        shipped = dict(corpus.validation[rep.env_id]["checks"])
        assert {k: rep.checks[k] for k in shipped} == shipped
        assert rep.checks["probe_win_rate"] <= 0.05, (rep.env_id, rep.checks["probe_wins"])
        assert max(rep.checks["probe_wins"].values()) <= 1


def test_rows_and_summary_round_trip_through_write_corpus(example_validation, tmp_path):
    reports, summary = example_validation
    corpus = se.load_corpus("example")
    rows = {r.env_id: r.to_dict() for r in reports}
    se.write_corpus(
        tmp_path / "c", corpus.records, corpus.sources, validation=rows, summary=summary
    )
    again = se.load_corpus(tmp_path / "c")
    assert dict(again.validation) == rows and again.summary == summary
    assert [ValidationReport.from_dict(r) for r in rows.values()] == [
        ValidationReport.from_dict(ValidationReport.to_dict(r)) for r in reports
    ]
    assert set(rows["math_modular_chain"]) >= {
        "id",
        "valid",
        "reason",
        "message",
        "stage",
        "checks",
        "wall_s",
    }


def test_reason_table_covers_every_code_and_every_code_is_exercised():
    assert set(STRUCTURAL_REASONS) | set(se.REASON_CODES) <= set(VALIDATION_REASONS)
    assert {f"sandbox_{c.value}" for c in ss.ReasonCode} <= set(VALIDATION_REASONS)
    assert all(text.strip() for text in VALIDATION_REASONS.values())
    fixtures = {
        re.search(r"^# expect: ([\w:]+)", p.read_text(), re.M).group(1)
        for p in BAD_ENVS.glob("*.py")
    }
    # One fixture stands for the per-probe codes "probe_wins:<probe>" (tests/adversarial and
    # spade-envs' test_checker exercise others).
    per_probe = {code for code in VALIDATION_REASONS if code.startswith("probe_wins")}
    assert fixtures - {"valid"} | EXERCISED_HERE | UNREACHABLE_UNDER_SANDBOX | per_probe == set(
        VALIDATION_REASONS
    )
    for code in UNREACHABLE_UNDER_SANDBOX - {"validator_error"}:
        assert "sandbox_bad_return" in VALIDATION_REASONS[code]


def test_closed_pool_is_infrastructure_not_a_rejection():
    pool = ss.SandboxPool(size=0)
    pool.close()
    report = validate_source(GOOD, HINT, pool=pool, env_id="g")
    assert not report.valid and report.infrastructure
    assert report.reason == "sandbox_infrastructure" and report.reason in INFRASTRUCTURE_REASONS
    good = validate_source(GOOD, HINT, env_id="h")  # no pool: a fresh interpreter
    assert good.valid, good.message
    summary = validation_summary([report, good])
    assert (
        summary["infrastructure_errors"] == 1
        and summary["invalid"] == 0
        and summary["by_reason"] == {}
    )
    assert summary["infrastructure_by_reason"] == {"sandbox_infrastructure": 1}


def test_sandbox_episode_limit_is_reported():
    config = ss.SandboxConfig(limits=ss.Limits(max_steps=3))
    report = validate_source(GOOD, HINT, config=config)
    assert report.reason == "sandbox_limit_exceeded" and report.sandbox_reason == "limit_exceeded"
    assert not report.infrastructure


def test_validate_many_keeps_order_and_summary_counts():
    bad = (BAD_ENVS / "solution_fails.py").read_text()
    items = [
        ValidationItem(GOOD, HINT, "a"),
        ValidationItem(bad, HINT, "b"),
        ValidationItem("x = (", HINT, "c"),
    ]
    reports = validate_many(items, workers=2, progress=False)
    assert [r.env_id for r in reports] == ["a", "b", "c"]
    assert [r.reason for r in reports] == [None, "solution_fails", "syntax_error"]
    summary = validation_summary(reports)
    assert summary["by_reason"] == {"solution_fails": 1, "syntax_error": 1}
    assert summary["by_stage"] == {"runtime": 1, "structural": 1}
    with pytest.raises(ValueError, match="workers"):
        validate_many(items, workers=0)


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="unknown skill"):
        validate_source(GOOD, HINT, skill="Cooking")
    with pytest.raises(ValueError, match="seed"):
        validate_source(GOOD, HINT, seeds=())
