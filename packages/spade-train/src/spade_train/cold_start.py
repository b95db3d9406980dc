"""A brief supervised warm-up of a small policy before the loop (``cold_start.enabled``).

A 135M designer shown one starter game mostly copies it, or loops until its token budget runs
out. The warm-up teaches the scaffolded designer task on the shipped starter corpus's
*training* games: each prompt is exactly the loop's scaffolded designer prompt for a skill,
showing one of the skill's games, and the target is the skill's *other* game followed by the
closing fence. So the policy learns to end its code block, and that its reply is not the game
it was shown. The held-out games are never shown or trained.

The loss is the mean negative log-likelihood of the target tokens (prompt tokens are context
only), one sample per optimizer step (AdamW, gradient norm clipped to 1), ``epochs`` passes
in an order drawn from ``cold_start.seed`` (not the run's seed, so runs that differ only in
seed share one warm-up). The warmed model is written next to the base model in
the model cache, named by a hash of everything that shapes it (the base weights and config,
the prompts and targets, the optimizer settings, its own seed), in a temporary directory renamed
into place: a second run with the same settings loads it in under a second, and a crash never
leaves half a model. Everything the loop judges still comes from this policy: its designs are
validated by the real validator and played in the real environments.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spade_train.config import RunConfig
from spade_train.core import design as dz
from spade_train.core.scaffold import SCAFFOLD_STOP, scaffold_examples
from spade_train.models import _atomic_dir, first_use_note, resolve_model

__all__ = ["designer_pairs", "cold_start_key", "policy_model", "prepare"]

Pair = tuple[list[dict[str, str]], str]


def designer_pairs(cfg: RunConfig) -> list[Pair]:
    """``(prompt messages, target text)`` per scaffold example of each designer skill: the
    loop's scaffolded prompt showing example ``i`` and, as the target, the skill's next example
    closed with the code fence. A skill with a single example teaches nothing here (its target
    would be the game shown) and is left out."""
    pairs: list[Pair] = []
    for skill in dict.fromkeys(cfg.designer.skills):
        examples = scaffold_examples(skill)
        if len(examples) < 2:
            continue
        for i in range(len(examples)):
            messages = dz.build_designer_messages(
                skill,
                setting=cfg.setting,
                max_turns=cfg.agent.max_turns,
                compact=cfg.designer.compact,
                scaffold=True,
                example_index=i,
            )
            target = examples[(i + 1) % len(examples)][0].rstrip("\n") + SCAFFOLD_STOP[0]
            pairs.append(([dict(m) for m in messages], target))
    return pairs


def _weights_digest(model_dir: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(model_dir.glob("*.safetensors")) + [model_dir / "config.json"]:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()


def cold_start_key(cfg: RunConfig, base: Path, pairs: list[Pair]) -> str:
    """The hash that names a warmed model: base weights and config, data, settings, seed."""
    c = cfg.cold_start
    blob = json.dumps(
        {
            "base": _weights_digest(base),
            "pairs": pairs,
            "epochs": c.epochs,
            "lr": c.lr,
            "seed": c.seed,
            "version": 1,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def prepare(cfg: RunConfig, log: Callable[[str], None], progress: bool = True) -> Path:
    """The warmed model's directory for ``cfg`` (trained now unless the cache holds it)."""
    base = resolve_model(cfg.backend.model)
    pairs = designer_pairs(cfg)
    if not pairs:
        raise ValueError(
            "cold_start: no designer skill has two starter games to learn from; "
            "set cold_start.enabled=false"
        )
    final = base.parent / f"{base.name}-cold-{cold_start_key(cfg, base, pairs)}"
    if (final / "config.json").exists():
        log(f"cold start: cached warm-up {final}")
        return final
    log(
        f"cold start: {len(pairs)} designer examples x {cfg.cold_start.epochs} epochs "
        f"(once; cached as {final})"
    )
    return _atomic_dir(final, lambda out: _train(cfg, base, pairs, out, progress))


def policy_model(cfg: RunConfig, log: Callable[[str], None], progress: bool = True) -> str:
    """The model a run's backend loads: the cached warm-up where ``cfg.cold_start_applies``,
    else ``backend.model`` (said in one line when a cold start was asked for but does not
    apply)."""
    note = first_use_note(cfg.backend.model)
    if note:
        log(note)
    if cfg.cold_start_applies:
        return str(prepare(cfg, log, progress))
    if cfg.cold_start.enabled:
        log("cold start: skipped (it teaches the scaffolded designer of a spade run)")
    return cfg.backend.model


def _encode(tokenizer: Any, messages: list[dict[str, str]], target: str) -> tuple[list[int], int]:
    from spade_train.backends.render import render_prompt

    prompt = render_prompt(tokenizer, messages, None)
    end = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    target_ids = list(tokenizer(target, add_special_tokens=False)["input_ids"]) + end
    return prompt + target_ids, len(prompt)


def _train(cfg: RunConfig, base: Path, pairs: list[Pair], out: Path, progress: bool) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spade_train.backends.blas import prefer_mkl_cnr
    from spade_train.progress import StepProgress

    prefer_mkl_cnr()  # before the first BLAS call, as the local backend does
    torch.manual_seed(cfg.cold_start.seed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    model.train()
    samples = [_encode(tokenizer, m, t) for m, t in pairs]
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.cold_start.lr, weight_decay=0.0)
    order_rng = random.Random(cfg.cold_start.seed)
    started = time.monotonic()
    total = cfg.cold_start.epochs * len(samples)
    with StepProgress("cold start (designer warm-up, once)", total, progress) as bar:
        for _ in range(cfg.cold_start.epochs):
            order = list(range(len(samples)))
            order_rng.shuffle(order)
            for k in order:
                ids, prompt_len = samples[k]
                loss = _nll(model, ids, prompt_len)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                bar.advance(1, note=f"loss {loss.item():.3f}")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    meta = {"pairs": len(pairs), "seconds": round(time.monotonic() - started, 1)}
    (out / "cold_start.json").write_text(json.dumps({**cfg.cold_start.model_dump(), **meta}))


def _nll(model: Any, ids: list[int], prompt_len: int) -> Any:
    """Mean negative log-likelihood of the tokens after ``prompt_len``."""
    import torch

    from spade_train.loss import token_logprobs

    input_ids = torch.tensor([ids])
    positions = torch.zeros_like(input_ids, dtype=torch.bool)
    positions[0, prompt_len:] = True
    logp, _ = token_logprobs(model, input_ids, torch.ones_like(input_ids), positions=positions)
    return -logp[0, prompt_len:].mean()
