"""Prefill each distinct prompt of a generation batch once.

A GRPO group samples ``group_size`` completions of one prompt, so a designer batch holds each
prompt several times and transformers' ``generate`` would encode every copy. Here the batch's
first forward pass (the prefill) runs on the distinct rows only; its key/value cache and
logits are then copied out to every row. A row's numbers do not depend on the other rows of
the batch, so the cache, the logits and the sampled tokens are the same bit for bit (tested);
the decoding steps after the prefill run on the whole batch as before.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

NO_BATCH_DIM = frozenset({"cache_position"})
"""Tensor arguments of a forward pass that have no batch dimension."""


def distinct_rows(
    input_ids: torch.Tensor, attention: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(first, inverse)``: the index of the first row of each distinct (ids, mask) pair, and
    for every row the position of its pair in ``first``; ``None`` when no two rows are equal."""
    keys: dict[tuple[bytes, bytes], int] = {}
    first: list[int] = []
    inverse: list[int] = []
    for row in range(input_ids.shape[0]):
        key = (input_ids[row].numpy().tobytes(), attention[row].numpy().tobytes())
        if key not in keys:
            keys[key] = len(first)
            first.append(row)
        inverse.append(keys[key])
    if len(first) == len(inverse):
        return None
    return torch.tensor(first), torch.tensor(inverse)


def _select(value: Any, rows: torch.Tensor, batch: int) -> Any:
    """``value`` cut to ``rows`` where its first dimension is the batch (dicts of masks too)."""
    if isinstance(value, dict):
        return {k: _select(v, rows, batch) for k, v in value.items()}
    if torch.is_tensor(value) and value.dim() and value.shape[0] == batch:
        return value[rows.to(value.device)]
    return value


@contextmanager
def shared_prefill(
    model: torch.nn.Module, rows: torch.Tensor, inverse: torch.Tensor
) -> Iterator[None]:
    """While active, ``model``'s next forward pass with an empty cache runs on ``rows`` only,
    then its cache and logits are expanded by ``inverse``. Later passes are untouched. A
    pass whose arguments do not look like a prefill (positional arguments, no cache, a
    cache already filled) runs unchanged."""
    original = model.forward
    patched_before = model.__dict__.get("forward")
    done = False

    @functools.wraps(original)  # generate inspects the signature (logits_to_keep)
    def forward(*args: Any, **kwargs: Any) -> Any:
        nonlocal done
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        ids = kwargs.get("input_ids")
        if done or args or cache is None or ids is None or cache.get_seq_length() != 0:
            return original(*args, **kwargs)
        done = True
        batch = ids.shape[0]
        small = {k: v if k in NO_BATCH_DIM else _select(v, rows, batch) for k, v in kwargs.items()}
        out = original(**small)
        cache.batch_select_indices(inverse.to(ids.device))
        out.logits = out.logits[inverse.to(out.logits.device)]
        return out

    model.forward = forward  # type: ignore[method-assign]
    try:
        yield
    finally:
        if patched_before is None:
            del model.forward  # the class's method again
        else:
            model.forward = patched_before  # type: ignore[method-assign]
