"""The spade-corpus CLI end to end, in subprocesses."""

import json
import subprocess
import sys

import pytest
import spade_envs as se


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "spade_corpus.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


@pytest.fixture
def corpus_dir(tmp_path):
    corpus = se.load_corpus("example")
    return se.write_corpus(
        tmp_path / "c",
        corpus.records,
        corpus.sources,
        validation=corpus.validation,
        summary=corpus.summary,
    )


def test_every_command_is_listed_in_help():
    out = cli("--help")
    assert out.returncode == 0
    for name in ["validate", "verify", "checksum", "dedup", "pack", "stats", "sample-grounding"]:
        assert name in out.stdout


@pytest.mark.slow  # six CLI subprocesses, each importing pyarrow and matplotlib: 11-14 s on 2 cores
def test_pack_verify_checksum_and_stats_chain(tmp_path, corpus_dir):
    packed = tmp_path / "c.parquet"
    assert cli("pack", corpus_dir, packed).returncode == 0
    assert cli("verify", packed).returncode == 0
    a = json.loads(cli("checksum", corpus_dir).stdout)
    b = json.loads(cli("checksum", packed).stdout)
    assert a["corpus_sha256"] == b["corpus_sha256"] and a["total"] == 60
    png = tmp_path / "stats.png"
    out = cli("stats", packed, "--png", png, "--json")
    assert out.returncode == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(out.stdout)["total"] == 60


def test_verify_names_every_tampered_record(corpus_dir):
    for name in ["game_002.py", "game_005.py"]:
        game = corpus_dir / "games" / name
        game.write_text(game.read_text() + "\n# tampered\n")
    out = cli("verify", corpus_dir)
    assert out.returncode == 1
    assert (
        "games/game_002.py" in out.stdout + out.stderr
        and "games/game_005.py" in out.stdout + out.stderr
    )


def test_sample_grounding_is_seeded():
    a = cli("sample-grounding", "-k", "2", "--index", "3", "--json")
    b = cli("sample-grounding", "-k", "2", "--index", "3", "--json")
    assert a.returncode == 0 and a.stdout == b.stdout and len(a.stdout.splitlines()) == 2


@pytest.mark.parametrize(
    "args",
    [
        ("verify", "/nonexistent/corpus"),
        ("sample-grounding", "/nonexistent.jsonl"),
        ("stats", "/nonexistent"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(args):
    out = cli(*args)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
