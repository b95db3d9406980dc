import hashlib
import json
import shutil
import subprocess

import pytest
import spade_envs as se
from conftest import GUESS_HINT, GUESS_SOURCE


def make_records(n=3):
    records, sources = [], {}
    for i in range(n):
        source = GUESS_SOURCE.replace("high=50", f"high={50 + i}")
        rid = f"guess_{i}"
        records.append(
            se.EnvRecord(
                id=rid,
                skill=se.SKILLS[i % 6],
                hint=GUESS_HINT,
                sha256="",
                class_name="GuessEnv",
                origin="test",
                difficulty={"win_rate": 0.5},
                extra={"custom_field": [i]},
            )
        )
        sources[rid] = source
    return records, sources


@pytest.fixture
def corpus_dir(tmp_path):
    records, sources = make_records()
    return se.write_corpus(
        tmp_path / "corpus",
        records,
        sources,
        validation={r.id: {"id": r.id, "valid": True} for r in records},
        summary={"total": 3, "valid": 3},
    )


def test_written_corpus_has_the_released_layout_and_sha256sum_accepts_it(corpus_dir):
    names = sorted(
        p.relative_to(corpus_dir).as_posix() for p in corpus_dir.rglob("*") if p.is_file()
    )
    assert names == [
        "checksums.sha256",
        "games/game_001.py",
        "games/game_002.py",
        "games/game_003.py",
        "manifest.jsonl",
        "validation_manifest.jsonl",
        "validation_summary.json",
    ]
    if shutil.which("sha256sum"):
        subprocess.run(
            ["sha256sum", "-c", "--quiet", "checksums.sha256"], cwd=corpus_dir, check=True
        )


def test_loading_round_trips_every_field(corpus_dir):
    corpus = se.load_corpus(corpus_dir)
    records, sources = make_records()
    assert corpus.ids() == [r.id for r in records]
    first = corpus.record("guess_0")
    assert first.extra == {"custom_field": [0]} and first.difficulty == {"win_rate": 0.5}
    assert first.file == "games/game_001.py"
    assert first.sha256 == hashlib.sha256(sources["guess_0"].encode()).hexdigest()
    assert corpus.source("guess_1") == sources["guess_1"]
    assert corpus.validation["guess_2"] == {"id": "guess_2", "valid": True}
    assert corpus.summary == {"total": 3, "valid": 3}
    assert corpus.counts_by_skill() == {"Logic": 1, "Math": 1, "Spatial": 1}
    line = json.loads((corpus_dir / "manifest.jsonl").read_text().splitlines()[0])
    assert line["custom_field"] == [0] and "extra" not in line


def test_a_tampered_source_names_the_record(corpus_dir):
    game = corpus_dir / "games" / "game_002.py"
    game.write_text(game.read_text().replace("Higher.", "Up."))
    with pytest.raises(se.ChecksumError, match="record 'guess_1'.*games/game_002.py"):
        se.load_corpus(corpus_dir)


def test_a_truncated_source_names_the_record(corpus_dir):
    game = corpus_dir / "games" / "game_003.py"
    game.write_bytes(game.read_bytes()[:100])
    with pytest.raises(se.ChecksumError, match="record 'guess_2'.*truncated"):
        se.load_corpus(corpus_dir)


def test_a_truncated_manifest_names_the_line(corpus_dir):
    manifest = corpus_dir / "manifest.jsonl"
    manifest.write_text(manifest.read_text()[:-40])
    with pytest.raises(se.CorpusError, match="manifest.jsonl line 3: invalid JSON"):
        se.load_corpus(corpus_dir)


def test_a_missing_field_names_the_record_and_field(corpus_dir):
    manifest = corpus_dir / "manifest.jsonl"
    rows = [json.loads(x) for x in manifest.read_text().splitlines()]
    del rows[1]["hint"]
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        se.CorpusError, match="line 2 \\(id 'guess_1'\\): missing required field 'hint'"
    ):
        se.load_corpus(corpus_dir)


def test_a_duplicate_id_names_both_lines(corpus_dir):
    manifest = corpus_dir / "manifest.jsonl"
    rows = [json.loads(x) for x in manifest.read_text().splitlines()]
    rows[2]["id"] = "guess_0"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        se.CorpusError, match="line 3: duplicate id 'guess_0' \\(first on line 1\\)"
    ):
        se.load_corpus(corpus_dir)


def test_a_manifest_edit_is_caught_by_checksums_even_when_it_parses(corpus_dir):
    manifest = corpus_dir / "manifest.jsonl"
    manifest.write_text(manifest.read_text().replace("Binary search", "Linear search"))
    with pytest.raises(se.ChecksumError, match="manifest.jsonl: SHA-256 does not match"):
        se.load_corpus(corpus_dir)


def test_a_missing_file_and_a_wrong_field_type(corpus_dir):
    (corpus_dir / "games" / "game_001.py").unlink()
    with pytest.raises(se.CorpusError, match="record 'guess_0': file games/game_001.py is missing"):
        se.load_corpus(corpus_dir)
    with pytest.raises(se.CorpusError, match="field 'max_turns' must be int"):
        se.EnvRecord.from_dict(
            {"id": "a", "skill": "Math", "hint": "h", "sha256": "0" * 64, "max_turns": "10"}
        )


def test_an_unknown_corpus_path_is_one_clear_error(tmp_path):
    with pytest.raises(se.CorpusError, match="not found"):
        se.load_corpus(tmp_path / "nope")
    with pytest.raises(se.CorpusError, match="no manifest.jsonl"):
        se.load_corpus(tmp_path)


def test_writing_refuses_to_clobber_and_leaves_nothing_half_written(corpus_dir):
    records, sources = make_records()
    with pytest.raises(se.CorpusError, match="already exists"):
        se.write_corpus(corpus_dir, records, sources)
    with pytest.raises(se.CorpusError, match="has no source"):
        se.write_corpus(corpus_dir.parent / "other", records, {})
    unencodable = {**sources, records[-1].id: "x = '\ud800'\n"}  # fails mid-write: no UTF-8
    with pytest.raises(UnicodeEncodeError):
        se.write_corpus(corpus_dir.parent / "other", records, unencodable)
    assert sorted(p.name for p in corpus_dir.parent.iterdir()) == ["corpus"]


def test_jsonl_packing_loads_and_verifies(tmp_path, corpus_dir):
    corpus = se.load_corpus(corpus_dir)
    packed = tmp_path / "corpus.jsonl"
    packed.write_text(
        "".join(
            json.dumps(
                {
                    **r.to_dict(),
                    "source": corpus.source(r.id),
                    "validation": corpus.validation[r.id],
                }
            )
            + "\n"
            for r in corpus
        )
    )
    again = se.load_corpus(packed)
    assert [r.to_dict() for r in again] == [r.to_dict() for r in corpus]
    assert dict(again.sources) == dict(corpus.sources)
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text(packed.read_text().replace("Higher.", "Up.", 1))
    with pytest.raises(se.ChecksumError, match="record 'guess_0'"):
        se.load_corpus(tampered)


def test_parquet_packing_loads_with_dicts_as_json_text(tmp_path, corpus_dir):
    pa = pytest.importorskip("pyarrow", reason="the parquet extra is not installed")
    import pyarrow.parquet as pq

    corpus = se.load_corpus(corpus_dir)
    rows = [
        {
            **r.to_dict(),
            "difficulty": json.dumps(r.difficulty),
            "custom_field": json.dumps(r.extra["custom_field"]),
            "source": corpus.source(r.id),
        }
        for r in corpus
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "corpus.parquet")
    again = se.load_corpus(tmp_path / "corpus.parquet")
    assert again.ids() == corpus.ids()
    assert again.record("guess_0").difficulty == {"win_rate": 0.5}
    assert again.source("guess_2") == corpus.source("guess_2")


def test_corpus_environments_play_and_make_gym_envs(corpus_dir):
    corpus = se.load_corpus(corpus_dir)
    env = corpus.factory("guess_2")(max_turns=5)
    obs, _ = env.reset(seed=3)
    assert "between 1 and 52" in obs
    gym_env = corpus.make("guess_2", hint=True)
    obs, info = gym_env.reset(seed=0)
    assert obs.endswith("HINT: " + GUESS_HINT) and isinstance(info["seed"], int)


def test_the_shipped_example_corpus_verifies_and_covers_all_six_skills():
    corpus = se.load_corpus("example")
    assert corpus.path == se.example_corpus_path()
    assert len(corpus) >= 12
    assert set(corpus.counts_by_skill()) == set(se.SKILLS)
    assert all(r.hint.strip() for r in corpus)
    assert all(v["valid"] for v in corpus.validation.values()) and set(corpus.validation) == set(
        corpus.ids()
    )
    assert {r.split for r in corpus} == {"train", "heldout"}


def test_unicode_line_separators_inside_fields_round_trip(tmp_path):
    records, sources = make_records(1)
    import dataclasses

    record = dataclasses.replace(records[0], hint="Split\u2028the range\u0085in half\u2029always.")
    path = se.write_corpus(tmp_path / "u", [record], sources)
    assert se.load_corpus(path).record("guess_0").hint == record.hint
