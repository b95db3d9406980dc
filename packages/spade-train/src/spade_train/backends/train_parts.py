"""Micro-batches of a local train step whose rows share their prompt.

A GRPO group's completions share one prompt, which for a designer is most of each sample
(~1,300 prompt tokens against at most 520 generated in the quickstart). Samples whose untrained
head (every token before the first trained one) is the same go into one micro-batch, and the
loss runs that head through the model once (``loss.token_logprobs(shared_prefix=...)``). The
rest keep the length-sorted micro-batches.
"""

from __future__ import annotations

from collections.abc import Sequence

from spade_train.types import TrainSample

MIN_SHARED = 32
"""Heads shorter than this are not worth a separate pass."""


def untrained_head(sample: TrainSample, max_seq_len: int) -> int:
    """Tokens before the first trained one; 0 for a sample cut to ``max_seq_len`` (its head
    would be cut differently from its group's) or with nothing trained."""
    if len(sample.input_ids) > max_seq_len:
        return 0
    return next((i for i, m in enumerate(sample.loss_mask) if m), 0)


def shared_head_parts(
    samples: Sequence[TrainSample],
    max_seq_len: int,
    max_rows: int,
    max_tokens: int | None,
) -> tuple[list[tuple[list[TrainSample], int]], list[TrainSample]]:
    """``(parts, rest)``: parts of 2 or more samples with the same untrained head, each with
    that head's length, cut to at most ``max_rows`` rows and ``head + rows x widest tail``
    tokens; ``rest`` are the other samples, in their given order."""
    groups: dict[tuple[int, ...], list[TrainSample]] = {}
    rest: list[TrainSample] = []
    for s in samples:
        head = untrained_head(s, max_seq_len)
        if head < MIN_SHARED:
            rest.append(s)
        else:
            groups.setdefault(tuple(s.input_ids[:head]), []).append(s)
    parts: list[tuple[list[TrainSample], int]] = []
    for key, members in groups.items():
        head = len(key)
        chunk: list[TrainSample] = []
        for s in sorted(members, key=lambda x: len(x.input_ids)):
            tail = len(s.input_ids) - head  # the widest so far (sorted)
            over = max_tokens is not None and head + (len(chunk) + 1) * tail > max_tokens
            if chunk and (len(chunk) >= max_rows or over):
                parts.append((chunk, head))
                chunk = []
            chunk.append(s)
        parts.append((chunk, head))
    for chunk, _ in [p for p in parts if len(p[0]) < 2]:
        rest.extend(chunk)  # alone: nothing to share
    kept = [p for p in parts if len(p[0]) >= 2]
    order = {id(s): i for i, s in enumerate(samples)}
    rest.sort(key=lambda s: order[id(s)])
    return kept, rest
