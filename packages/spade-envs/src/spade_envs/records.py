"""One environment of a corpus as data: :class:`EnvRecord` (a ``manifest.jsonl`` line), its schema
and :func:`record_digest`. Reading and writing corpora build on it (:mod:`spade_envs.corpus_dir`
reads a directory, :mod:`spade_envs.corpus_files` writes one, :mod:`spade_envs.corpus` loads any
format)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .core import DEFAULT_MAX_TURNS
from .errors import CorpusError

__all__ = ["EnvRecord", "RECORD_SCHEMA", "record_digest"]

REQUIRED_FIELDS: dict[str, type] = {"id": str, "skill": str, "hint": str, "sha256": str}
OPTIONAL_FIELDS: dict[str, tuple[type, Any]] = {
    "file": (str, ""),
    "class_name": (str, None),
    "origin": (str, "unknown"),
    "max_turns": (int, DEFAULT_MAX_TURNS),
    "split": (str, "train"),
    "title": (str, ""),
    "description": (str, ""),
    "difficulty": (dict, None),
}

#: JSON Schema of one manifest line, for writers in other packages and languages.
RECORD_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "SPADE EnvRecord",
    "type": "object",
    "required": list(REQUIRED_FIELDS),
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "skill": {"type": "string"},
        "hint": {"type": "string"},
        "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "file": {"type": "string"},
        "class_name": {"type": ["string", "null"]},
        "origin": {"type": "string"},
        "max_turns": {"type": "integer", "minimum": 1},
        "split": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "difficulty": {
            "type": ["object", "null"],
            "description": "measured statistics, e.g. win_rate, win_rate_hint, regret, episodes",
        },
    },
    "additionalProperties": True,
}


@dataclass(frozen=True)
class EnvRecord:
    """One environment of a corpus (one line of ``manifest.jsonl``).

    ``sha256`` is the digest of the module source as UTF-8; ``difficulty`` holds measured
    statistics (``win_rate``, ``win_rate_hint``, ``regret``, ``episodes``…) or None; ``extra``
    keeps fields this schema does not know, so round trips are lossless.
    """

    id: str
    skill: str
    hint: str
    sha256: str
    file: str = ""
    class_name: str | None = None
    origin: str = "unknown"
    max_turns: int = DEFAULT_MAX_TURNS
    split: str = "train"
    title: str = ""
    description: str = ""
    difficulty: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "record") -> EnvRecord:
        """Build from a manifest dict, raising CorpusError naming ``where`` on a bad field."""
        if not isinstance(data, Mapping):
            raise CorpusError(f"{where}: expected a JSON object, got {type(data).__name__}")
        rid = data.get("id")
        label = f"{where} (id {rid!r})" if isinstance(rid, str) else where
        values: dict[str, Any] = {}
        for name, kind in REQUIRED_FIELDS.items():
            if name not in data or data[name] is None:
                raise CorpusError(
                    f"{label}: missing required field {name!r}; re-pack the corpus with spade-corpus"
                )
            if not isinstance(data[name], kind):
                raise CorpusError(
                    f"{label}: field {name!r} must be {kind.__name__}, got {type(data[name]).__name__}"
                )
            values[name] = data[name]
        if not values["id"]:
            raise CorpusError(f"{label}: field 'id' is empty")
        for name, (kind, _) in OPTIONAL_FIELDS.items():
            if name in data and data[name] is not None:
                value = data[name]
                if kind is dict and isinstance(value, str):  # Parquet stores dicts as JSON text
                    try:
                        value = json.loads(value)
                    except json.JSONDecodeError:
                        raise CorpusError(f"{label}: field {name!r} is not valid JSON") from None
                if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                    raise CorpusError(
                        f"{label}: field {name!r} must be {kind.__name__}, got {type(value).__name__}"
                    )
                values[name] = value
        known = set(REQUIRED_FIELDS) | set(OPTIONAL_FIELDS) | {"source", "validation", "extra"}
        values["extra"] = {k: v for k, v in data.items() if k not in known}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The manifest dict (unknown fields from ``extra`` merged back in)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**out, **self.extra}


def record_digest(record: EnvRecord) -> str:
    """SHA-256 of a record's manifest dict as canonical JSON (sorted keys, no spaces, UTF-8).

    It covers the module source through the record's ``sha256`` field.
    """
    text = json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
