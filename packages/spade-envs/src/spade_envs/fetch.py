"""Download a released SPADE corpus from the Hugging Face Hub, pinned and verified.

    spade-envs fetch --out corpora/gpt55          # the released GPT-5.5 static corpus
    spade-envs play corpora/gpt55 --all --agent random --episodes 1

:func:`fetch_corpus` downloads the files of the released layout (``games/*``,
``manifest.jsonl``, ``validation_manifest.jsonl``, ``validation_summary.json``,
``snapshot_summary.json``, ``checksums.sha256``, ``README.md``) of a dataset repository at a
pinned revision through ``huggingface_hub`` (the optional extra ``fetch``), then checks them:

* the number of ``games/game_*.py`` files is the expected count (7,872 for the GPT-5.5 corpus);
* every file listed in ``checksums.sha256`` is there with that SHA-256 (``sha256sum -c``);
  a file that does not match is deleted from the staging directory and named in the error.

Files are downloaded into a staging directory next to the target (``.NAME.partial``) and the
whole directory is renamed into place only once it verifies, so the target is either absent or
complete. Resuming: a connection that drops in the middle of a file is retried at once
(huggingface_hub retries a few times, with an HTTP range request once at least one of its 10 MB
read chunks has arrived; a game file is a few tens of KB, so it is requested again whole); a
download that fails anyway or a killed process leaves the staging directory, and running the
same command again downloads only the files not yet complete there (huggingface_hub 2.x deletes
the partial file of a failed transfer, so across runs the unit of resumption is the file). ``HF_ENDPOINT`` (or
``endpoint=``) points at another hub, e.g. a mirror.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .corpus_dir import read_checksums
from .errors import ChecksumError, CorpusError, FetchError, HubUnavailableError

__all__ = [
    "DEFAULT_REPO",
    "ALTERNATE_REPO",
    "DEFAULT_REVISION",
    "DEFAULT_GAMES",
    "RELEASE_FILES",
    "FetchResult",
    "fetch_corpus",
    "verify_release",
]

#: The released GPT-5.5 static corpus (the fixed-environment GRPO baseline trains on it).
DEFAULT_REPO = "spare-rl/spare-gpt55-static-corpus"
#: The name the release's README gives the same corpus.
ALTERNATE_REPO = "spade-rl/SPADE-Environment-Pool-GPT5.5-Games"
DEFAULT_REVISION = "e179a371bc7764dacf0bcee1f808100beb463137"
DEFAULT_GAMES = 7872
RELEASE_FILES = (
    "games/*",
    "manifest.jsonl",
    "validation_manifest.jsonl",
    "validation_summary.json",
    "snapshot_summary.json",
    "checksums.sha256",
    "README.md",
)
PROVENANCE = ".spade-fetch.json"


@dataclass(frozen=True)
class FetchResult:
    """A verified corpus directory and where it came from."""

    path: Path
    repo: str
    revision: str
    games: int
    files_verified: int
    downloaded: bool
    """False when ``path`` already held the verified corpus and nothing was fetched."""


def verify_release(path: str | os.PathLike[str], expected_games: int | None) -> tuple[int, int]:
    """Check a downloaded release: the game count and every SHA-256 of ``checksums.sha256``.

    Returns ``(games, files verified)``. Files that do not match are deleted (so a new fetch
    downloads them again) and raise :class:`ChecksumError` naming the first of them.
    """
    root = Path(path)
    games = sorted((root / "games").glob("game_*.py")) if (root / "games").is_dir() else []
    if expected_games is not None and len(games) != expected_games:
        raise CorpusError(
            f"{root}: {len(games)} games in games/, expected {expected_games}; "
            "run the fetch again to complete it (or pass the right --expected-games)"
        )
    sums = root / "checksums.sha256"
    if not sums.is_file():
        raise CorpusError(f"{root}: no checksums.sha256; the release cannot be verified")
    bad = []
    for name, digest in read_checksums(sums).items():
        file = root / name
        if not file.is_file():
            raise CorpusError(f"{root}: checksums.sha256 lists {name}, which was not downloaded")
        if hashlib.sha256(file.read_bytes()).hexdigest() != digest:
            bad.append(name)
    for name in bad:
        (root / name).unlink()
    if bad:
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        raise ChecksumError(
            f"{bad[0]}{more}: SHA-256 does not match checksums.sha256 (deleted; run the fetch "
            "again, and if it persists the source serves a modified file)"
        )
    return len(games), len(read_checksums(sums))


def _download(staging: Path, repo: str, revision: str, endpoint: str | None) -> None:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise HubUnavailableError(
            f"downloading a corpus needs huggingface_hub: pip install 'spade-envs[fetch]' ({exc})"
        ) from None
    try:
        snapshot_download(
            repo,
            repo_type="dataset",
            revision=revision,
            local_dir=staging,
            cache_dir=staging / ".cache" / "hub",
            allow_patterns=list(RELEASE_FILES),
            endpoint=endpoint,
            max_workers=4,
        )
    except Exception as exc:  # network, HTTP and hub errors: one line, resumable
        detail = " ".join(str(exc).split())[:300]
        raise FetchError(
            f"downloading {repo}@{revision[:12]} failed ({type(exc).__name__}: {detail}); "
            "run the same command again to resume"
        ) from None


def fetch_corpus(
    out: str | os.PathLike[str],
    *,
    repo: str = DEFAULT_REPO,
    revision: str = DEFAULT_REVISION,
    expected_games: int | None = DEFAULT_GAMES,
    endpoint: str | None = None,
) -> FetchResult:
    """Download ``repo`` at ``revision`` into ``out``, verify it, and move it into place.

    ``endpoint`` defaults to ``$HF_ENDPOINT`` (else the public hub). ``expected_games=None``
    skips the count check. An ``out`` that already holds a verified corpus is returned as is.
    """
    target = Path(out)
    endpoint = endpoint or os.environ.get("HF_ENDPOINT") or None
    if target.exists():
        games, files = verify_release(target, expected_games)
        return FetchResult(target, repo, revision, games, files, downloaded=False)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.partial"
    _download(staging, repo, revision, endpoint)
    games, files = verify_release(staging, expected_games)
    shutil.rmtree(staging / ".cache", ignore_errors=True)
    record = {"repo": repo, "revision": revision, "endpoint": endpoint, "games": games}
    (staging / PROVENANCE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(staging, target)
    return FetchResult(target, repo, revision, games, files, downloaded=True)
