"""``spade-envs fetch``: the real huggingface_hub download code against a hub on 127.0.0.1.

The fixture is a small corpus in the released layout (``games/game_*.py``, ``manifest.jsonl``
with the released field names, ``validation_manifest.jsonl``, the summaries,
``checksums.sha256``, ``README.md``). Cases: a good download that loads and plays, a tampered
file, a connection cut mid-file, and a failed run resumed by the next one.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import spade_envs as se
from spade_envs.fetch import fetch_corpus, verify_release

pytest.importorskip(
    "huggingface_hub", reason="huggingface_hub is not installed (spade-envs[fetch])"
)

from hub_server import Hub  # noqa: E402  (after the skip: it needs nothing, the test does)

REPO = "spare-rl/spare-gpt55-static-corpus"
COMMIT = "e179a371bc7764dacf0bcee1f808100beb463137"
N = 4


def release(root: Path) -> Path:
    """A released-layout corpus of ``N`` games taken from the example corpus."""
    example = se.load_corpus("example")
    (root / "games").mkdir(parents=True)
    manifest, validation = [], []
    for i, rec in enumerate(example.records[:N]):
        name = f"game_{i:06d}.py"
        text = example.source(rec.id) + "\n" * 40  # some size, so a cut lands mid-file
        (root / "games" / name).write_text(text, encoding="utf-8")
        manifest.append(
            {"game_id": f"game_{i:06d}", "file_name": name, "original_file_name": f"{rec.id}.py",
             "skill": rec.skill, "sha256": se.sha256_text(text), "line_count": text.count("\n")}
        )  # fmt: skip
        validation.append({"game_id": f"game_{i:06d}", "valid": True})
    lines = "\n".join(json.dumps(r) for r in manifest) + "\n"
    (root / "manifest.jsonl").write_text(lines, encoding="utf-8")
    vlines = "\n".join(json.dumps(r) for r in validation) + "\n"
    (root / "validation_manifest.jsonl").write_text(vlines, encoding="utf-8")
    (root / "validation_summary.json").write_text(json.dumps({"valid": N}), encoding="utf-8")
    (root / "snapshot_summary.json").write_text(json.dumps({"games": N}), encoding="utf-8")
    (root / "README.md").write_text("# fixture release\n", encoding="utf-8")
    (root / "extra_not_in_release.bin").write_bytes(b"x" * 10)  # not a release file: skipped
    listed = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".bin")
    sums = [
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(root).as_posix()}"
        for p in listed
    ]
    (root / "checksums.sha256").write_text("\n".join(sums) + "\n", encoding="utf-8")
    return root


@pytest.fixture
def hub(tmp_path):
    with Hub(release(tmp_path / "remote"), REPO, COMMIT) as server:
        yield server


def test_good_download_verifies_loads_and_plays(hub, tmp_path):
    out = tmp_path / "corpora" / "gpt55"
    result = fetch_corpus(out, endpoint=hub.url, expected_games=N)
    assert result.downloaded and result.games == N and result.files_verified == N + 5
    assert not (out / "extra_not_in_release.bin").exists() and not (out / ".cache").exists()
    assert not (tmp_path / "corpora" / ".gpt55.partial").exists()
    # sha256sum -c accepts the result, as upstream's launcher checks it
    check = subprocess.run(["sha256sum", "-c", "checksums.sha256"], cwd=out, capture_output=True)
    assert check.returncode == 0, check.stdout
    corpus = se.load_corpus(out)
    assert corpus.ids() == [f"game_{i:06d}" for i in range(N)]
    assert corpus.validation["game_000001"]["valid"] is True
    rec = corpus.records[0]
    assert rec.file == "games/game_000000.py" and rec.extra["original_file_name"].endswith(".py")
    agent = se.RandomAgent(0)
    spec = se.EpisodeSpec(corpus.factory(rec.id), seed=0, env_id=rec.id)
    results = se.run_episodes([spec], lambda chats: [agent(c) for c in chats])
    assert results[0].error is None and results[0].turns
    # a second fetch finds the verified corpus and downloads nothing
    before = len(hub.requests)
    again = fetch_corpus(out, endpoint=hub.url, expected_games=N)
    assert not again.downloaded and len(hub.requests) == before


def test_tampered_file_is_an_error_naming_it_and_nothing_is_installed(hub, tmp_path):
    game = hub.root / "games" / "game_000002.py"
    game.write_text(game.read_text() + "# tampered\n")
    out = tmp_path / "gpt55"
    with pytest.raises(se.ChecksumError, match=r"games/game_000002\.py: SHA-256 does not match"):
        fetch_corpus(out, endpoint=hub.url, expected_games=N)
    assert not out.exists()
    staging = tmp_path / ".gpt55.partial"
    assert not (staging / "games" / "game_000002.py").exists()  # deleted, refetched next time


def test_wrong_count_and_unknown_revision(hub, tmp_path):
    with pytest.raises(se.CorpusError, match=f"{N} games in games/, expected 7872"):
        fetch_corpus(tmp_path / "a", endpoint=hub.url)
    with pytest.raises(se.FetchError, match="run the same command again"):
        fetch_corpus(tmp_path / "b", endpoint=hub.url, revision="0" * 40, expected_games=N)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_connection_cut_mid_file_is_retried_within_the_run(hub, tmp_path):
    hub.cut["games/game_000001.py"] = 100
    result = fetch_corpus(tmp_path / "c", endpoint=hub.url, expected_games=N)
    assert result.games == N  # every SHA-256 checked
    # huggingface_hub reads 10 MB chunks, so a file this small is requested again from its
    # start (a range request resumes only past a whole chunk)
    assert hub.gets("games/game_000001.py") == [None, None]


def test_a_failed_run_is_resumed_by_the_next_one(hub, tmp_path):
    hub.broken.add("games/game_000003.py")
    out = tmp_path / "d"
    with pytest.raises(se.FetchError, match="run the same command again to resume"):
        fetch_corpus(out, endpoint=hub.url, expected_games=N)
    assert not out.exists()
    done_first = {p for m, p, _ in hub.requests if m == "GET" and p != "games/game_000003.py"}
    hub.broken.clear()
    hub.requests.clear()
    assert fetch_corpus(out, endpoint=hub.url, expected_games=N).games == N
    refetched = {p for m, p, _ in hub.requests if m == "GET"}
    assert "games/game_000003.py" in refetched
    assert not (refetched & done_first)  # files finished by the first run are not downloaded again


def test_cli_fetch_one_line_errors(hub, tmp_path):
    env_cmd = [sys.executable, "-m", "spade_envs.cli", "fetch", "--out", str(tmp_path / "e")]
    proc = subprocess.run(
        [*env_cmd, "--expected-games", str(N)],
        capture_output=True, text=True, timeout=120, env={"HF_ENDPOINT": hub.url, "PATH": "/usr/bin"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"{N} games" in proc.stdout and "spade-envs play" in proc.stdout
    proc = subprocess.run(
        [*env_cmd[:-1], str(tmp_path / "f")],
        capture_output=True, text=True, timeout=120, env={"HF_ENDPOINT": hub.url, "PATH": "/usr/bin"},
    )  # fmt: skip
    last = proc.stderr.strip().splitlines()[-1]  # above it: the download's progress bars
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert last.startswith("spade-envs: error:") and "expected 7872" in last
    assert verify_release(tmp_path / "e", N) == (N, N + 5)
