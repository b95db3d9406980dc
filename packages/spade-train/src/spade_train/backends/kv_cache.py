"""A key/value cache for local generation that grows in blocks instead of by one token.

transformers' ``DynamicLayer`` concatenates each decoding step's keys and values onto the
cache, so every step allocates and copies the whole cache of every layer again: at batch 4
and ~650 tokens of context that was ~8 % of a decoding step on CPU (SmolLM2-135M). Here each
layer writes into a buffer with ``SPARE`` free positions and hands out views of the filled
part; the buffer is copied only when it is full. The keys and values are the same numbers in
the same layout, so the attention and the sampled tokens are unchanged (tested).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

SPARE = 256
"""Free positions a layer's buffer gets whenever it is (re)allocated."""


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``keys``/``values`` are views of larger buffers.

    Anything that replaces ``keys`` by another tensor (``batch_select_indices``,
    ``batch_repeat_interleave``, ``reset``) leaves a tensor that is not a view of the
    buffer; the next update then starts a new buffer from it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._key_buf: torch.Tensor | None = None
        self._value_buf: torch.Tensor | None = None

    def reset(self) -> None:
        """Drop the keys and values. Older transformers (5.17, on the GPU machine) zeroed them
        in place and kept their length, so the next update appended after the zeros."""
        self.keys = self.values = None
        self.is_initialized = False
        self._key_buf = self._value_buf = None
        super().reset()

    def _owns(self, needed: int, like: torch.Tensor) -> bool:
        buf = self._key_buf
        return (
            buf is not None
            and self.keys is not None
            and self.keys.data_ptr() == buf.data_ptr()
            and buf.shape[:-2] == like.shape[:-2]
            and buf.shape[-2] >= needed
        )

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        assert self.keys is not None and self.values is not None
        old = self.keys.shape[-2] if self.keys.numel() else 0
        end = old + key_states.shape[-2]
        if not self._owns(end, key_states):
            shape = (*key_states.shape[:-2], end + SPARE, key_states.shape[-1])
            keys, values = key_states.new_empty(shape), value_states.new_empty(shape)
            if old:
                keys[..., :old, :] = self.keys
                values[..., :old, :] = self.values
            self._key_buf, self._value_buf = keys, values
        assert self._key_buf is not None and self._value_buf is not None
        self._key_buf[..., old:end, :] = key_states
        self._value_buf[..., old:end, :] = value_states
        self.keys = self._key_buf[..., :end, :]
        self.values = self._value_buf[..., :end, :]
        return self.keys, self.values


def new_cache(
    config: Any, kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None
) -> DynamicCache:
    """A ``DynamicCache`` for ``config`` whose full-attention layers grow in blocks, filled
    with ``kv`` (per layer ``(keys, values)``) when given. Layers of other kinds (sliding
    windows) stay as transformers makes them."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(lay) is DynamicLayer else lay for lay in cache.layers]
    for layer, (keys, values) in zip(cache.layers, kv or [], strict=False):
        layer.update(keys, values)  # type: ignore[union-attr]
    return cache
