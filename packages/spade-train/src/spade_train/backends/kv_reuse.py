"""Reuse of attention keys and values across the turns of multi-turn play (local backend).

Each turn of an episode renders the whole conversation again: the previous turn's prompt and
reply are a prefix of the next prompt. After a generation the local backend keeps, per row,
the keys and values of ``prompt + completion[:-1]`` (the last sampled token was never fed to
the model); the next generation looks up, for each prompt, the kept row with the longest
common token prefix and feeds the model only the tokens after it.

A batch then has two left-padded regions per row: the reused prefix (``cached`` positions,
its keys and values copied into a fresh cache) and the new tokens. Padding between them is
masked out, and positions come from the attention mask's running count, so every real token
sits at the position it would have had in a full re-encode: the log-probs agree with a full
re-encode to float32 rounding (tested). Kept rows are dropped when the weights change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

MIN_REUSE = 16
"""Shorter common prefixes are re-encoded (not worth a copy)."""


@dataclass
class _Row:
    tokens: np.ndarray  # int64 token ids the keys and values belong to
    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: (heads, len, dim) each


@dataclass
class Hit:
    """A prompt's reusable prefix: ``length`` tokens and their per-layer keys and values."""

    length: int
    kv: list[tuple[torch.Tensor, torch.Tensor]] = field(repr=False)


def _nbytes(kv: list[tuple[torch.Tensor, torch.Tensor]]) -> int:
    return sum(k.nbytes + v.nbytes for k, v in kv)


class PrefixStore:
    """The kept rows, at most ``max_bytes`` of keys and values (oldest dropped first)."""

    def __init__(self, max_bytes: int = 1 << 30):
        self.max_bytes = max_bytes
        self.bytes = 0
        self.rows: list[_Row] = []
        self.reused_tokens = 0
        self.encoded_tokens = 0

    def clear(self) -> None:
        self.rows.clear()
        self.bytes = 0

    def take(self, prompt: list[int]) -> Hit | None:
        """The longest kept prefix of ``prompt`` (leaving at least one token to feed); None when
        none reaches :data:`MIN_REUSE` tokens. A row the prompt extends whole is removed (the
        next generation keeps the longer one); a row that only shares a beginning stays."""
        ids = np.asarray(prompt, dtype=np.int64)
        best, best_len = -1, 0
        for i, row in enumerate(self.rows):
            n = min(len(row.tokens), len(ids) - 1)
            if n <= best_len:
                continue
            diff = np.flatnonzero(row.tokens[:n] != ids[:n])
            common = int(diff[0]) if diff.size else n
            if common > best_len:
                best, best_len = i, common
        if best < 0 or best_len < MIN_REUSE:
            return None
        row = self.rows[best]
        if best_len == len(row.tokens):  # the episode went on: its longer row replaces this one
            self.rows.pop(best)
            self.bytes -= _nbytes(row.kv)
        kv = [(k[:, :best_len], v[:, :best_len]) for k, v in row.kv]
        return Hit(best_len, kv)

    def keep(self, tokens: list[int], kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.rows.append(_Row(np.asarray(tokens, dtype=np.int64), kv))
        self.bytes += _nbytes(kv)
        while self.bytes > self.max_bytes and self.rows:
            self.bytes -= _nbytes(self.rows.pop(0).kv)


def layout(
    prompts: list[list[int]], hits: list[Hit | None], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``input_ids`` and ``attention_mask`` of a batch whose rows reuse ``hits``: per row,
    ``[pad | reused prefix | pad | new tokens]``; returns them and the reused region's width."""
    reused = [h.length if h else 0 for h in hits]
    width_c = max(reused)
    width_n = max(len(p) - r for p, r in zip(prompts, reused, strict=True))
    ids = torch.full((len(prompts), width_c + width_n), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, (p, r) in enumerate(zip(prompts, reused, strict=True)):
        ids[row, width_c - r : width_c] = torch.tensor(p[:r], dtype=torch.long)
        mask[row, width_c - r : width_c] = 1
        new = p[r:]
        ids[row, ids.shape[1] - len(new) :] = torch.tensor(new, dtype=torch.long)
        mask[row, ids.shape[1] - len(new) :] = 1
    return ids, mask, width_c


def batch_cache(
    hits: list[Hit | None], width: int, like: list[tuple[torch.Tensor, torch.Tensor]]
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer ``(keys, values)`` of shape (rows, heads, width, dim): each hit right-aligned
    in the reused region, zeros (masked out) elsewhere. ``like`` is one hit's kv (shapes)."""
    out = []
    for layer, (k0, v0) in enumerate(like):
        keys = k0.new_zeros((len(hits), k0.shape[0], width, k0.shape[2]))
        values = v0.new_zeros((len(hits), v0.shape[0], width, v0.shape[2]))
        for row, hit in enumerate(hits):
            if hit is not None:
                k, v = hit.kv[layer]
                keys[row, :, width - hit.length :] = k
                values[row, :, width - hit.length :] = v
        out.append((keys, values))
    return out


def split_rows(
    cache: Any, mask: torch.Tensor, lengths: list[int]
) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    """Each row's keys and values from a generation's cache: the prompt positions the mask
    keeps, then the first ``lengths[row]`` generated positions (copies, not views)."""
    layers = cache.layers
    width = mask.shape[1]
    out = []
    for row, n in enumerate(lengths):
        keep = torch.cat([mask[row].nonzero().squeeze(1), torch.arange(width, width + n)])
        out.append(
            [(lay.keys[row][:, keep].clone(), lay.values[row][:, keep].clone()) for lay in layers]
        )
    return out
