"""The adversarial suite (issue 40): reward hacks a designer could write, each rejected with
its expected reason, and honest games of tricky shapes, each accepted.

Every file under ``adversarial/hacks`` and ``adversarial/honest`` starts with ``# expect:``,
``# family:`` and ``# hint:`` lines. The whole suite is validated once, through the public
``validate_many`` on one warm pool; each file is then one test case. A reason is compared by
its prefix before ``:`` (``probe_wins:first_option`` matches ``probe_wins``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import spade_envs as se
from spade_corpus.validate import ValidationItem, ValidationReport, validate_many

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).parent / "adversarial"
FILES = sorted(ROOT.glob("hacks/*.py")) + sorted(ROOT.glob("honest/*.py"))
_HEADER = re.compile(r"^# (expect|family|hint): (.+)$", re.MULTILINE)

#: The validator draws its seeds (``spade_envs.draw_seeds``); the suite fixes the root so the
#: verdicts are reproducible. Seed-gated hacks are written against small seeds 0-4.
SEED_ROOT = 1234


def header(path: Path) -> dict[str, str]:
    """The ``# expect/family/hint`` header lines of one suite file."""
    found = dict(_HEADER.findall(path.read_text()[:600]))
    assert set(found) == {"expect", "family", "hint"}, f"{path.name}: header lines missing"
    return found


def case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@pytest.fixture(scope="module")
def reports() -> dict[str, ValidationReport]:
    items = [ValidationItem(p.read_text(), header(p)["hint"], case_id(p)) for p in FILES]
    got = validate_many(items, workers=2, progress=False, seeds=se.draw_seeds(SEED_ROOT, 5))
    return {case_id(p): r for p, r in zip(FILES, got, strict=True)}


def test_suite_covers_every_family() -> None:
    hacks = [header(p) for p in FILES if p.parent.name == "hacks"]
    honest = [p for p in FILES if p.parent.name == "honest"]
    families: dict[str, int] = {}
    for h in hacks:
        families[h["family"]] = families.get(h["family"], 0) + 1
    assert len(hacks) >= 60 and len(honest) >= 15
    assert min(families.values()) >= 3 and len(families) >= 4, families


@pytest.mark.parametrize("path", [pytest.param(p, id=case_id(p)) for p in FILES])
def test_suite_file(path: Path, reports: dict[str, ValidationReport]) -> None:
    expect = header(path)["expect"]
    report = reports[case_id(path)]
    if expect == "valid":
        assert report.valid, f"{report.reason}: {report.message}"
    else:
        assert not report.valid, "accepted"
        assert (report.reason or "").split(":")[0] == expect, f"{report.reason}: {report.message}"
