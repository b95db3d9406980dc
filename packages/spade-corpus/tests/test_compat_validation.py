"""validate_source in compat mode on the upstream-style fixture games of spade-envs, and the
same games in strict mode with their stable reason codes."""

from __future__ import annotations

from pathlib import Path

import pytest
import spade_envs as se
from spade_corpus.validate import validate_source

RELEASE = Path(__file__).parents[2] / "spade-envs" / "tests" / "fixtures" / "upstream_release"
EXPECTED = {  # env id: (compat solution reading, strict reason)
    "game_000000": ("answer", "forbidden_import"),
    "game_000001": ("actions", "reset_raised"),
    "game_000002": ("actions", "solution_fails"),
    "game_000003": ("unplayable", "solution_fails"),
}


@pytest.fixture(scope="module")
def corpus():
    return se.load_corpus(RELEASE)


@pytest.mark.parametrize("env_id", list(EXPECTED))
def test_compat_and_strict_modes(corpus, env_id):
    source = corpus.sources[env_id]
    kind, strict_reason = EXPECTED[env_id]
    compat = validate_source(source, "", env_id=env_id, seeds=(0, 1, 2), mode="compat")
    assert compat.valid, compat.message
    assert compat.checks["solution"] == [kind] * 3 and compat.checks["mode"] == "compat"
    assert compat.checks["playable"] is (kind != "unplayable")
    strict = validate_source(source, "a hint", env_id=env_id, seeds=(0, 1, 2))
    assert not strict.valid and strict.reason == strict_reason and not strict.infrastructure


def test_compat_failures_keep_strict_reason_codes():
    bad = "class BrokenEnv:\n    def __init__(self, max_turns=10):\n        pass\n    def reset(self, seed=None):\n        return 3\n"
    report = validate_source(bad, "", seeds=(0,), mode="compat")
    assert not report.valid and report.reason == "sandbox_bad_return"
    report = validate_source("x = (", "", seeds=(0,), mode="compat")
    assert report.reason == "syntax_error"
    with pytest.raises(ValueError, match="mode must be"):
        validate_source("x = 1", "", mode="lenient")


def test_a_released_corpus_validates_in_compat_mode_by_default(corpus):
    from spade_corpus.validate import validate_corpus

    reports, summary = validate_corpus(corpus, workers=2, seeds=(0, 1))
    assert summary["valid"] == 4 and summary["invalid"] == 0
    assert [r.checks["playable"] for r in reports] == [True, True, True, False]
    # strict mode also wants the privileged hint, which the released manifest does not carry
    reports, summary = validate_corpus(corpus, workers=2, seeds=(0, 1), mode="strict")
    assert summary["valid"] == 0
    assert summary["by_reason"] == {"forbidden_import": 1, "hint_empty": 3}
