"""Every deliberately bad environment in bad_envs/ is rejected with the reason in its header."""

import json
import re
from pathlib import Path

import pytest
import spade_sandbox as ss
from spade_corpus.structural import STRUCTURAL_REASONS
from spade_corpus.validate import VALIDATION_REASONS, validate_source

FIXTURES = sorted((Path(__file__).parent / "bad_envs").glob("*.py"))
#: Reasons that judge the game's play; each rejection for one carries evidence.
JUDGED = {
    "probe_wins",
    "solution_leaked",
    "solution_fails",
    "hint_leaked",
    "hint_is_answer",
    "infeasible",
}
HINT = "Binary search: guess the midpoint of the numbers still possible."


def headers(path: Path) -> dict[str, str]:
    return dict(re.findall(r"^# (\w+): ?(.*)$", path.read_text(), re.M))


@pytest.fixture(scope="module")
def pool():
    # A short call limit keeps the infinite-loop fixture to two seconds; at one second, the
    # disk-quota fixture's reset (thousands of files) once ran past it on a loaded CI machine.
    with ss.SandboxPool(ss.SandboxConfig(limits=ss.Limits(call_wall_s=2.0)), size=2) as pool:
        yield pool


def test_fixture_set_has_at_least_25_bad_environments():
    expected = [headers(p)["expect"] for p in FIXTURES]
    assert sum(e != "valid" for e in expected) >= 25
    assert all(e == "valid" or e in VALIDATION_REASONS for e in expected)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_gets_its_expected_reason(path, pool):
    head = headers(path)
    report = validate_source(
        path.read_text(),
        head.get("hint", HINT),
        skill=head.get("skill"),
        pool=pool,
        env_id=path.stem,
    )
    if head["expect"] == "valid":
        assert report.valid and report.reason is None, report.message
        return
    assert not report.valid
    assert report.reason == head["expect"], report.message
    assert not report.infrastructure
    assert report.stage == ("structural" if report.reason in STRUCTURAL_REASONS else "runtime")
    assert report.message and "\n" not in report.message
    if report.reason.startswith("sandbox_"):
        assert report.sandbox_reason == report.reason.removeprefix("sandbox_")
    assert json.loads(json.dumps(report.to_dict()))["reason"] == head["expect"]
    if report.reason.partition(":")[0] in JUDGED:  # a verdict on the game names what showed it
        ev = report.evidence
        assert ev is not None and ev["probe"] and ev["excerpt"], report
        assert isinstance(ev["seed"], int)
        assert json.loads(json.dumps(report.to_dict()))["evidence"] == ev
