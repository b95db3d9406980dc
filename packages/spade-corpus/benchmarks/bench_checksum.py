"""Checksum verification throughput: ``spade_corpus.checksum.verify`` against ``sha256sum -c``.

Generates a corpus directory (``--mb`` megabytes of game files of about ``--file-kb`` KB each,
built from the example games) in a temporary folder, warms the page cache, then times, best of
``--repeat``, both verifying the same files: ``sha256sum -c --quiet checksums.sha256`` and
``verify(path)`` (which also parses the manifest and checks each record against it). Prints
MB/s of each and the ratio; the goal is verify >= 0.8x sha256sum.

    uv run --package spade-corpus python packages/spade-corpus/benchmarks/bench_checksum.py [--mb 256] [--file-kb 128]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import spade_envs as se
from spade_corpus.checksum import verify


def build_corpus(root: Path, total_mb: int, file_kb: int) -> Path:
    example = se.load_corpus("example")
    base = "\n".join(example.sources[i] for i in example.ids())
    body = (base * (file_kb * 1024 // len(base) + 1))[: file_kb * 1024]
    count = max(1, total_mb * 1024 // file_kb)
    records, sources = [], {}
    for index in range(count):
        template = example.records[index % len(example.records)]
        env_id = f"{template.id}_{index:06d}"
        sources[env_id] = f"# generated copy {index}\n" + body
        records.append(
            se.EnvRecord.from_dict(
                {**template.to_dict(), "id": env_id, "file": "", "sha256": "0" * 64}
            )
        )
    return se.write_corpus(root / "corpus", records, sources)


def best_time(action, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256, help="megabytes of game files (default 256)")
    parser.add_argument(
        "--file-kb", type=int, default=128, help="size of one game file in KB (default 128)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed runs of each, best kept (default 3)"
    )
    args = parser.parse_args()
    if shutil.which("sha256sum") is None:
        raise SystemExit("bench_checksum: sha256sum not found; install GNU coreutils")
    with tempfile.TemporaryDirectory(prefix="bench_checksum_") as temp:
        corpus = build_corpus(Path(temp), args.mb, args.file_kb)

        def run_sha256sum() -> None:
            subprocess.run(
                ["sha256sum", "-c", "--quiet", "checksums.sha256"], cwd=corpus, check=True
            )

        report = verify(corpus)
        assert report.ok, report.problems[:3]
        run_sha256sum()  # both runs below read from the page cache
        megabytes = report.bytes_hashed / 1e6
        baseline = best_time(run_sha256sum, args.repeat)
        ours = best_time(lambda: verify(corpus), args.repeat)
        print(
            f"corpus: {report.records} game files, {megabytes:.1f} MB (best of {args.repeat}, page cache warm)"
        )
        print(f"sha256sum -c : {baseline:7.3f} s  {megabytes / baseline:8.1f} MB/s")
        print(f"verify()     : {ours:7.3f} s  {megabytes / ours:8.1f} MB/s")
        print(f"ratio verify/sha256sum: {baseline / ours:.2f}x (goal >= 0.80x)")


if __name__ == "__main__":
    main()
