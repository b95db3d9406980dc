"""The joint GRPO / PPO-clip policy loss on token level.

For each trained token (mask 1) with log-prob ``logp`` under the current policy and ``old``
under the sampling policy, ``ratio = exp(logp - old)`` and the per-token objective is
``min(ratio * A, clip(ratio, 1 - eps, 1 + eps_high) * A)``. The loss is its negative,
averaged over all trained tokens of the batch (``token-mean``) or per sequence first
(``seq-mean-token-mean``). Optional terms: a k3 KL estimate against reference log-probs and an
entropy bonus.

Truncated importance sampling (TIS, ``tis_clip`` set), as the released code runs it for its
delayed and off-policy rollouts: the PPO ratio is taken against the *proximal* log-probs (the
trainer's policy before this update; ``proximal_logprobs``, by default the current log-probs
detached, which is exact for one optimizer step per batch), and each token's loss is
multiplied by the detached weight ``clamp(exp(proximal - old), tis_clip_low, tis_clip)``,
``old`` being the sampling log-probs. A token the sampler found likelier than the trainer now
does is down-weighted; one it found less likely is up-weighted, at most ``tis_clip`` times.
"""

from __future__ import annotations

import inspect

import torch

_HEAD_ONLY = frozenset({"llama", "mistral", "qwen2", "qwen3"})
"""Model types whose causal-LM logits are exactly the output embedding of the decoder's last
hidden state (no logit scaling or soft-capping), so they can be taken at chosen positions."""


def token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    positions: torch.Tensor | None = None,
    shared_prefix: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs (and entropies) of ``input_ids``: index ``i`` is the log-prob of token
    ``i`` given tokens ``< i``; position 0 gets 0.

    ``positions`` (bool, the shape of ``input_ids``): only these tokens are needed; the others
    get 0. For the model types of ``_HEAD_ONLY`` the vocabulary projection and softmax then
    run only there (a designer sample's prompt is half its tokens and an agent sample's most
    of them); the kept values equal the full computation's to float rounding.

    ``shared_prefix`` = P > 0: every row starts with the same P tokens, none of them padding
    (a GRPO group's prompt). For those model types the decoder then runs the prefix once and
    the rows' remainders on top of its key/value cache; gradients reach the weights through
    both. Same values to float rounding (tested)."""
    config = getattr(model, "config", None)
    if positions is None or getattr(config, "model_type", None) not in _HEAD_ONLY:
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
        return _picked_and_entropy(logits, input_ids[:, 1:])
    decoder = model.get_decoder()  # type: ignore[operator]
    if 0 < shared_prefix < input_ids.shape[1]:
        hidden = _prefix_once(decoder, input_ids, attention_mask, shared_prefix)
    else:
        hidden = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    keep = positions[:, 1:].bool()
    logits = model.get_output_embeddings()(hidden[:, :-1][keep]).float()  # type: ignore[operator]
    picked, entropy = _picked_and_entropy(logits, input_ids[:, 1:][keep])
    out = []
    for values in (picked, entropy):
        full = values.new_zeros(input_ids.shape)
        full[:, 1:] = full[:, 1:].masked_scatter(keep, values)
        out.append(full)
    return out[0], out[1]


def _prefix_once(
    decoder: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, prefix: int
) -> torch.Tensor:
    """The decoder's last hidden states of every row, the shared first ``prefix`` tokens run
    once (row 0's) and the rest of each row on a copy of their key/value cache."""
    from transformers import DynamicCache

    rows = input_ids.shape[0]
    cache = DynamicCache(config=getattr(decoder, "config", None))
    name = (
        "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"
    )
    head = decoder(input_ids=input_ids[:1, :prefix], use_cache=True, **{name: cache})
    cache.batch_repeat_interleave(rows)
    tail = decoder(
        input_ids=input_ids[:, prefix:],
        attention_mask=attention_mask,
        use_cache=True,
        **{name: cache},
    )
    shared = head.last_hidden_state.expand(rows, -1, -1)
    return torch.cat([shared, tail.last_hidden_state], dim=1)


def _picked_and_entropy(
    logits: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob of each target and the entropy, from logits over the vocabulary (last axis);
    for a (batch, time) layout position 0 is prepended as 0."""
    logp_all = torch.log_softmax(logits, dim=-1)
    picked = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    if picked.dim() == 1:
        return picked, entropy
    zero = torch.zeros_like(picked[:, :1])
    return torch.cat([zero, picked], dim=1), torch.cat([zero, entropy], dim=1)


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
    aggregation: str = "token-mean",
    normalizer: float | None = None,
    tis_clip: float | None = None,
    tis_clip_low: float = 0.0,
    proximal_logprobs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Loss and metrics. ``advantages`` is per sequence ``[B]`` or per token ``[B, T]``.

    ``normalizer``: divide the summed token loss by this instead of this batch's token count
    (gradient accumulation passes the whole batch's count so micro-batches add up exactly).
    ``tis_clip``: turn on truncated importance sampling (module docstring; upstream's
    defaults are ``tis_clip=2.0``, ``tis_clip_low=0.0``).
    """
    mask = mask.to(logprobs.dtype)
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logprobs)
    tis = raw_weight = None
    base = old_logprobs
    if tis_clip is not None:
        base = logprobs.detach() if proximal_logprobs is None else proximal_logprobs
        raw_weight = torch.exp(base - old_logprobs).detach()
        tis = torch.clamp(raw_weight, min=tis_clip_low, max=tis_clip)
    ratio = torch.exp(logprobs - base)
    high = clip_eps if clip_eps_high is None else clip_eps_high
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high)
    per_token = -torch.minimum(ratio * advantages, clipped * advantages)
    if tis is not None:
        per_token = per_token * tis
    if kl_coef and ref_logprobs is not None:
        delta = ref_logprobs - logprobs
        per_token = per_token + kl_coef * (torch.exp(delta) - delta - 1.0)
    if entropy_coef and entropy is not None:
        per_token = per_token - entropy_coef * entropy
    loss = _aggregate(per_token, mask, aggregation, normalizer)
    metrics = _metrics(ratio, clipped, logprobs, base, mask, entropy, tis, raw_weight)
    return loss, metrics


def _aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, aggregation: str, normalizer: float | None
) -> torch.Tensor:
    """The summed token loss over the batch's tokens (``token-mean``) or the mean of each
    sequence's token mean (``seq-mean-token-mean``); ``normalizer`` replaces the count."""
    if aggregation == "token-mean":
        denom = normalizer if normalizer is not None else mask.sum().clamp(min=1.0)
        return (per_token * mask).sum() / denom
    if aggregation == "seq-mean-token-mean":
        per_seq = (per_token * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return per_seq.sum() / (normalizer if normalizer is not None else per_seq.numel())
    raise ValueError(f"unknown aggregation {aggregation!r}; use token-mean or seq-mean-token-mean")


@torch.no_grad()
def _metrics(
    ratio: torch.Tensor,
    clipped: torch.Tensor,
    logprobs: torch.Tensor,
    base: torch.Tensor,
    mask: torch.Tensor,
    entropy: torch.Tensor | None,
    tis: torch.Tensor | None,
    raw_weight: torch.Tensor | None,
) -> dict[str, float]:
    """Clip fraction, approximate KL, mean ratio, and entropy and TIS statistics when on."""
    n = mask.sum().clamp(min=1.0)
    was_clipped = ((ratio - clipped).abs() > 1e-9).to(mask.dtype) * mask
    metrics = {
        "clip_frac": float(was_clipped.sum() / n),
        "approx_kl": float((((ratio - 1) - (logprobs - base)) * mask).sum() / n),
        "ratio_mean": float((ratio * mask).sum() / n),
    }
    if entropy is not None:
        metrics["entropy"] = float((entropy * mask).sum() / n)
    if tis is not None and raw_weight is not None:
        metrics["tis_mean"] = float((tis * mask).sum() / n)
        metrics["tis_clipfrac"] = float(((tis != raw_weight).to(mask.dtype) * mask).sum() / n)
    return metrics
