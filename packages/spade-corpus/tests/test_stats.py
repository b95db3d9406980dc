import argparse
import json
import statistics

import pytest
import spade_envs as se
from spade_corpus.stats import add_arguments, corpus_stats, run, write_stats_chart

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def mixed_corpus(tmp_path):
    """The example corpus with varied difficulty keys and a validation run that rejected two."""
    example = se.load_corpus("example")
    records = []
    for index, record in enumerate(example.records):
        difficulty = {
            **(record.difficulty or {}),
            "regret": index / 10,
            "label": "text is ignored",
            "flag": True,
        }
        records.append(se.EnvRecord.from_dict({**record.to_dict(), "difficulty": difficulty}))
    validation = {
        **example.validation,
        "bad_1": {"id": "bad_1", "valid": False, "reason": "solution_fails", "skill": "Math"},
        "bad_2": {"id": "bad_2", "valid": False, "reason": "no_termination"},
    }
    path = se.write_corpus(
        tmp_path / "mixed", records, example.sources, validation=validation, summary=example.summary
    )
    return se.load_corpus(path)


def test_example_stats():
    corpus = se.load_corpus("example")
    stats = corpus_stats(corpus)
    sizes = [len(s) for s in corpus.sources.values()]
    assert stats["total"] == 60 and stats["by_skill"] == {s: 10 for s in sorted(se.SKILLS)}
    assert stats["source_chars"]["min"] == min(sizes) and stats["source_chars"]["max"] == max(sizes)
    assert stats["source_chars"]["total"] == sum(sizes)
    assert stats["source_lines"]["total"] == sum(
        len(s.splitlines()) for s in corpus.sources.values()
    )
    assert stats["validation"]["pass_rate"] == 1.0 and stats["validation"]["by_reason"] == {}
    win_rates = [r.difficulty["random_agent_win_rate"] for r in corpus.records]
    assert stats["difficulty"]["random_agent_win_rate"]["mean"] == pytest.approx(
        statistics.fmean(win_rates)
    )
    assert stats["difficulty"]["episodes"]["min"] == 50
    json.dumps(stats)  # serializable


def test_pass_rate_counts_rejected_rows_and_numeric_difficulty_only(mixed_corpus):
    stats = corpus_stats(mixed_corpus)
    validation = stats["validation"]
    assert (validation["rows"], validation["valid"], validation["invalid"]) == (62, 60, 2)
    assert validation["pass_rate"] == pytest.approx(60 / 62)
    assert validation["by_reason"] == {"no_termination": 1, "solution_fails": 1}
    assert validation["pass_rate_by_skill"]["Math"] == pytest.approx(10 / 11)
    assert set(stats["difficulty"]) == {"episodes", "random_agent_win_rate", "regret"}
    assert stats["difficulty"]["regret"]["max"] == pytest.approx(5.9)


def test_chart_is_a_png_written_atomically(mixed_corpus, tmp_path):
    import matplotlib.image

    path = write_stats_chart(mixed_corpus, tmp_path / "charts" / "stats.png")
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    height, width, _ = matplotlib.image.imread(path).shape
    assert width > 1000 and height > 400
    assert [p.name for p in path.parent.iterdir()] == ["stats.png"]


def _cli(argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return run(parser.parse_args(argv))


def test_cli(mixed_corpus, tmp_path, capsys):
    png = tmp_path / "out.png"
    assert _cli([str(mixed_corpus.path), "--json", "--png", str(png)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["total"] == 60 and png.read_bytes()[:8] == PNG_SIGNATURE
    assert _cli(["example"]) == 0
    out = capsys.readouterr().out
    assert "60 environments" in out and "validation: 60/60 pass" in out
    assert _cli([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not found" in err[0]
