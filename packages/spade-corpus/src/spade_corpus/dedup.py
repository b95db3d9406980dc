"""Exact and near-duplicate environments.

* **Exact**: two sources are exact duplicates when their normalized forms are equal:
  parsed with :mod:`ast`, docstrings and other bare string statements dropped (comments
  never reach the AST), printed back with
  ``ast.unparse`` (so whitespace, quoting and parentheses are canonical). A source that does
  not parse is normalized by stripping trailing whitespace and blank lines.
* **Near**: the normalized source is tokenized; identifiers become ``ID``, numbers ``NUM``
  and strings ``STR`` (keywords and operators stay), so renaming variables or changing
  constants leaves the stream unchanged. The stream is cut into overlapping shingles of
  ``shingle_size`` tokens, hashed into a seeded MinHash (``datasketch``), and candidate pairs
  come from MinHash LSH at ``threshold`` (its bands chosen for recall, ``RECALL_WEIGHTS``); a
  pair is a near duplicate when its estimated Jaccard similarity is at least ``threshold``. Near clusters are connected components over
  such pairs, formed among one representative per exact group.

Within a cluster the record that comes first (manifest order, or the order given) is kept and
the rest are dropped. The same inputs and parameters give the same report.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import keyword
import sys
import token
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import spade_envs as se
from datasketch import MinHash, MinHashLSH

from .pack import atomic_output, format_of, read_corpus, write_packed

__all__ = [
    "DEFAULT_THRESHOLD",
    "DuplicateCluster",
    "DedupReport",
    "normalize_source",
    "exact_key",
    "structure_tokens",
    "find_duplicates",
    "drop_duplicates",
]

DEFAULT_THRESHOLD = 0.8
RECALL_WEIGHTS = (0.05, 0.95)
"""MinHash LSH's weights of false positives and false negatives when it picks its bands."""


def _is_bare_string(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _strip_docstrings(tree: ast.AST) -> None:
    """Drop docstrings and every other bare string statement (no-ops used as comments)."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                kept = [stmt for stmt in body if not _is_bare_string(stmt)]
                setattr(node, name, kept or [ast.Pass()])


MEMO_SOURCES = 256
"""Sources whose normal form and sketch are remembered. A training run checks every cycle's
designs against the same reference games; without the memo each cycle parsed all of them
twice (for the exact key and for the tokens) and sketched them again."""
MEMO_MAX_CHARS = 64 * 1024
"""Longer sources are never remembered, so the memo holds at most 256 sources of 64 Ki
characters each, with their normal forms."""


def normalize_source(source: str) -> str:
    """Canonical text of a module: no docstrings or comments, whitespace as ``ast.unparse`` prints it."""
    return _normalized(source) if len(source) <= MEMO_MAX_CHARS else _normalize(source)


def _normalize(source: str) -> str:
    try:
        with se.PARSE_LOCK:
            tree = ast.parse(source)
        _strip_docstrings(tree)
        return ast.unparse(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # Unparsable, or nested too deeply for the parser or for unparse (a 1,200-term sum):
        # the text itself, without blank lines and trailing spaces, is the key then.
        return "\n".join(line.rstrip() for line in source.splitlines() if line.strip())


_normalized = lru_cache(maxsize=MEMO_SOURCES)(_normalize)


def exact_key(source: str) -> str:
    """SHA-256 of :func:`normalize_source` (equal keys = exact duplicates)."""
    return se.sha256_text(normalize_source(source))


# Python 3.12 tokenizes f-strings into parts; an f-string counts as one STR placeholder
_FSTRING_START = getattr(token, "FSTRING_START", -1)
_FSTRING_PARTS = {getattr(token, "FSTRING_MIDDLE", -1), getattr(token, "FSTRING_END", -1)}
_SKIPPED = {
    token.NEWLINE,
    token.NL,
    token.INDENT,
    token.DEDENT,
    token.COMMENT,
    token.ENDMARKER,
    token.ENCODING,
}


def structure_tokens(source: str) -> list[str]:
    """The token stream of the normalized source with identifiers and literals as placeholders."""
    text = normalize_source(source)
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in _SKIPPED:
                continue
            if tok.type == token.NAME:
                out.append(tok.string if keyword.iskeyword(tok.string) else "ID")
            elif tok.type == token.NUMBER:
                out.append("NUM")
            elif tok.type == token.STRING or tok.type == _FSTRING_START:
                out.append("STR")
            elif tok.type in _FSTRING_PARTS:
                continue
            else:
                out.append(tok.string)
    except (tokenize.TokenError, SyntaxError, RecursionError, MemoryError):
        out = text.split()
    return out


@dataclass(frozen=True)
class DuplicateCluster:
    """Records that duplicate each other: ``ids[0]`` is kept, the rest are dropped.

    ``jaccard`` is 1.0 for exact clusters and, for near ones, the lowest estimated Jaccard
    similarity over the pairs that joined the cluster.
    """

    ids: tuple[str, ...]
    kind: Literal["exact", "near"]
    jaccard: float

    @property
    def keep(self) -> str:
        return self.ids[0]

    @property
    def drop(self) -> tuple[str, ...]:
        return self.ids[1:]


@dataclass(frozen=True)
class DedupReport:
    """Clusters found among ``total`` records, and the parameters that found them."""

    total: int
    clusters: tuple[DuplicateCluster, ...]
    threshold: float
    num_perm: int
    shingle_size: int
    seed: int

    def dropped_ids(self) -> list[str]:
        """Ids to drop under the keep-first policy (each appears once)."""
        return list(dict.fromkeys(i for c in self.clusters for i in c.drop))

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "threshold": self.threshold,
            "num_perm": self.num_perm,
            "shingle_size": self.shingle_size,
            "seed": self.seed,
            "exact_clusters": sum(c.kind == "exact" for c in self.clusters),
            "near_clusters": sum(c.kind == "near" for c in self.clusters),
            "dropped": self.dropped_ids(),
            "clusters": [
                {"kind": c.kind, "jaccard": round(c.jaccard, 4), "keep": c.keep, "ids": list(c.ids)}
                for c in self.clusters
            ],
        }


def _sketch(source: str, shingle_size: int, num_perm: int, seed: int) -> MinHash:
    """The MinHash of ``source``'s structure tokens; remembered for sources up to
    ``MEMO_MAX_CHARS`` (callers only read it)."""
    make = _sketched if len(source) <= MEMO_MAX_CHARS else _sketch_of
    return make(source, shingle_size, num_perm, seed)


def _sketch_of(source: str, shingle_size: int, num_perm: int, seed: int) -> MinHash:
    return _minhash(structure_tokens(source), shingle_size, num_perm, seed)


_sketched = lru_cache(maxsize=MEMO_SOURCES)(_sketch_of)


def _minhash(tokens: list[str], shingle_size: int, num_perm: int, seed: int) -> MinHash:
    sketch = MinHash(num_perm=num_perm, seed=seed)
    if len(tokens) <= shingle_size:
        shingles = {" ".join(tokens)}
    else:
        shingles = {
            " ".join(tokens[i : i + shingle_size]) for i in range(len(tokens) - shingle_size + 1)
        }
    sketch.update_batch([s.encode("utf-8") for s in sorted(shingles)])
    return sketch


def _items(items: se.Corpus | Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    pairs = (
        [(r.id, items.sources[r.id]) for r in items.records]
        if isinstance(items, se.Corpus)
        else list(items)
    )
    # Lone surrogates cannot be encoded for hashing: they become U+FFFD (a key, not a text).
    pairs = [
        (env_id, source.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))
        for env_id, source in pairs
    ]
    seen = set()
    for env_id, _ in pairs:
        if env_id in seen:
            raise ValueError(f"duplicate id {env_id!r} in the input; ids must be unique")
        seen.add(env_id)
    return pairs


def find_duplicates(
    items: se.Corpus | Iterable[tuple[str, str]],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    num_perm: int = 128,
    shingle_size: int = 5,
    seed: int = 1,
) -> DedupReport:
    """Exact and near-duplicate clusters of a corpus or of ``(id, source)`` pairs, in input order."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if shingle_size < 1 or num_perm < 16:
        raise ValueError(
            f"need shingle_size >= 1 and num_perm >= 16, got {shingle_size}, {num_perm}"
        )
    pairs = _items(items)
    groups: dict[str, list[str]] = {}
    for env_id, source in pairs:
        groups.setdefault(exact_key(source), []).append(env_id)
    clusters = [
        DuplicateCluster(tuple(ids), "exact", 1.0) for ids in groups.values() if len(ids) > 1
    ]

    sources = dict(pairs)
    order = {env_id: i for i, (env_id, _) in enumerate(pairs)}
    representatives = [ids[0] for ids in groups.values()]
    sketches = {i: _sketch(sources[i], shingle_size, num_perm, seed) for i in representatives}
    # LSH only proposes candidate pairs, each then judged by its estimated Jaccard, so its bands
    # are chosen for recall: with equal weights (9 bands of 13 rows at 0.8) a pair at Jaccard
    # 0.87 was never proposed one time in five; weighted 0.05 / 0.95 (16 bands of 8 rows) it is
    # missed about once in 600, at the cost of more candidates to estimate.
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=RECALL_WEIGHTS)
    for env_id in representatives:
        lsh.insert(env_id, sketches[env_id])
    edges = [
        (env_id, other, similarity)
        for env_id in representatives
        for other in lsh.query(sketches[env_id])
        if order[other] > order[env_id]
        and (similarity := sketches[env_id].jaccard(sketches[other])) >= threshold
    ]
    clusters += _near_clusters(representatives, edges, order)
    clusters.sort(key=lambda c: order[c.ids[0]])
    return DedupReport(len(pairs), tuple(clusters), threshold, num_perm, shingle_size, seed)


def _near_clusters(
    representatives: list[str], edges: list[tuple[str, str, float]], order: dict[str, int]
) -> list[DuplicateCluster]:
    """The connected components of the near-duplicate ``edges`` (union-find; a component's
    root is always its first member), each with its weakest edge's similarity."""
    parent = {i: i for i in representatives}

    def root(i: str) -> str:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b, _ in edges:
        a, b = root(a), root(b)
        if a != b:
            first, second = sorted((a, b), key=order.__getitem__)
            parent[second] = first
    components: dict[str, list[str]] = {}
    for env_id in representatives:
        components.setdefault(root(env_id), []).append(env_id)
    weakest: dict[str, float] = {}
    for a, _, similarity in edges:
        weakest[root(a)] = min(similarity, weakest.get(root(a), 1.0))
    return [
        DuplicateCluster(tuple(ids), "near", weakest[r])
        for r, ids in components.items()
        if len(ids) > 1
    ]


def drop_duplicates(corpus: se.Corpus, report: DedupReport) -> se.Corpus:
    """The corpus without the records ``report`` drops (validation rows of dropped ids removed;
    the validation summary is kept as it was: it describes the validation run)."""
    dropped = set(report.dropped_ids())
    records = tuple(r for r in corpus.records if r.id not in dropped)
    sources = {r.id: corpus.sources[r.id] for r in records}
    validation = {k: v for k, v in corpus.validation.items() if k not in dropped}
    return se.Corpus(corpus.path, records, sources, validation, corpus.summary)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spade-corpus dedup``."""
    parser.add_argument("path", help="corpus directory, .jsonl or .parquet file, or 'example'")
    parser.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help=f"near-duplicate Jaccard threshold in (0, 1] (default {DEFAULT_THRESHOLD})",
    )
    parser.add_argument("--seed", type=int, default=1, help="MinHash seed (default 1)")
    parser.add_argument("--out", help="write the report as JSON to this file")
    parser.add_argument(
        "--write-deduped",
        metavar="OUT",
        help="write the corpus without the dropped records (directory, .jsonl or .parquet)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace --out / --write-deduped targets that exist",
    )


def run(args: argparse.Namespace) -> int:
    """``spade-corpus dedup PATH``: print the clusters; 0 on success, 2 on bad input."""
    try:
        if not 0.0 < args.threshold <= 1.0:
            raise ValueError(f"--threshold must be in (0, 1], got {args.threshold}")
        corpus = read_corpus(args.path)
        report = find_duplicates(corpus, threshold=args.threshold, seed=args.seed)
        if args.out:
            with atomic_output(args.out, overwrite=args.overwrite) as temp:
                temp.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
        if args.write_deduped:
            write_packed(
                drop_duplicates(corpus, report),
                args.write_deduped,
                format_of(args.write_deduped),
                overwrite=args.overwrite,
            )
    except (se.CorpusError, ValueError) as exc:
        print(f"spade-corpus dedup: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"spade-corpus dedup: error: {exc.strerror or exc}: {exc.filename}", file=sys.stderr)
        return 2
    for cluster in report.clusters:
        print(
            f"{cluster.kind:5}  jaccard {cluster.jaccard:.2f}  keep {cluster.keep}  drop {', '.join(cluster.drop)}"
        )
    dropped = report.dropped_ids()
    print(f"{len(report.clusters)} clusters among {report.total} records; {len(dropped)} to drop")
    if args.write_deduped:
        print(f"wrote {args.write_deduped} ({report.total - len(dropped)} records)")
    return 0
