"""Sampling from the Megatron model, for checks at small scale (at scale SGLang generates).

Conversations go in batches of ``gen_batch_size``; every step runs the whole right-padded batch
(no key/value cache) and reads each row's logits at its last token, gathered over the
tensor-parallel ranks, which all draw the same token from one seeded generator. Temperature,
top-k and top-p act as in transformers' warpers; stop strings and the end-of-turn token end a
row. The recorded log-probs are the raw policy's (temperature 1, no filtering), as the local
backend records them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from spade_train.backends.megatron_model import full_logits
from spade_train.backends.stops import first_stop
from spade_train.types import Generation, SamplingParams


def _warp(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    from transformers import TopKLogitsWarper, TopPLogitsWarper

    scores = logits / params.temperature
    if params.top_k:
        scores = TopKLogitsWarper(params.top_k)(None, scores)  # type: ignore[arg-type]
    if 0.0 < params.top_p < 1.0:
        scores = TopPLogitsWarper(params.top_p)(None, scores)  # type: ignore[arg-type]
    return scores


@torch.no_grad()
def generate_batch(
    model: torch.nn.Module,
    tokenizer: object,
    prompts: Sequence[list[int]],
    params: SamplingParams,
    generator: torch.Generator,
    pad_to: int = 1,
) -> list[Generation]:
    """Complete each prompt once (see the module doc); ``pad_to``: widths are padded to a
    multiple of this (sequence parallelism needs a multiple of the tensor-parallel size)."""
    device = generator.device
    eos = tokenizer.eos_token_id  # type: ignore[attr-defined]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos  # type: ignore[attr-defined]
    rows = [list(p) for p in prompts]
    logps: list[list[float]] = [[] for _ in rows]
    finish: list[Literal["stop", "length"]] = ["length"] * len(rows)
    live = list(range(len(rows)))
    for _ in range(params.max_new_tokens):
        if not live:
            break
        width = -(-max(len(rows[i]) for i in live) // pad_to) * pad_to
        ids = torch.full((len(live), width), pad, dtype=torch.long)
        for j, i in enumerate(live):
            ids[j, : len(rows[i])] = torch.tensor(rows[i])
        ids = ids.to(device)
        pos = torch.arange(width, device=device)[None]
        logits = model(ids, pos, attention_mask=None)
        last = torch.tensor([len(rows[i]) - 1 for i in live], device=device)
        picked = full_logits(logits[torch.arange(len(live), device=device), last]).float()
        raw = torch.log_softmax(picked, -1)
        if params.temperature > 0:
            probs = torch.softmax(_warp(picked, params), -1)
            tokens = torch.multinomial(probs, 1, generator=generator)[:, 0]
        else:
            tokens = picked.argmax(-1)
        still = []
        for j, i in enumerate(live):
            t = int(tokens[j])
            rows[i].append(t)
            logps[i].append(float(raw[j, t]))
            completion = rows[i][len(prompts[i]) :]
            text = tokenizer.decode([x for x in completion if x != eos])  # type: ignore[attr-defined]
            if t == eos or (params.stop and first_stop(text, params.stop) is not None):
                finish[i] = "stop"
            else:
                still.append(i)
        live = still
    out = []
    for i, prompt in enumerate(prompts):
        completion = rows[i][len(prompt) :]
        text = tokenizer.decode(  # type: ignore[attr-defined]
            [x for x in completion if x != eos], skip_special_tokens=False
        )
        out.append(Generation(text, list(prompt), completion, logps[i], finish[i]))
    return out
