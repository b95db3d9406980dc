"""Train-step throughput: the local backend's ``train_step`` against a bare PyTorch step.

    uv run --package spade-train python packages/spade-train/benchmarks/bench_train_step.py [--samples N] [--seq-len T] [--repeats R]

Both sides train the same tiny Qwen3 (``tiny:qwen3?layers=&hidden=``, built from a config, on
CPU in float32) on the same batch of rollout samples, shaped as ``spade_train.play`` makes
them: per sample a prompt, then ``--turns`` completions separated by observations (loss mask 1
on completion tokens only), lengths spread between half and all of ``--seq-len``, old log-probs
those of the policy itself (ratio 1, as on the first update of fresh samples) and
group-normalised advantages. ``spade`` is ``LocalBackend.train_step(samples)``, the call the
self-play loop makes: tensors built from the Python lists, micro-batches of
``--micro-batch``, ``token_logprobs`` + ``policy_loss`` (PPO-clip, token mean over the whole
batch), grad clipping, AdamW, metrics. ``bare`` is the same algorithm written out in PyTorch
on tensors prepared beforehand: forward, log-softmax + gather, the clipped ratio loss,
backward per micro-batch, ``clip_grad_norm_``, ``AdamW.step``; it has its own AdamW (same
hyper-parameters) over the same parameters. The two alternate (one spade step, one bare step)
after ``--warmup`` steps each, so load from other work on the machine hits both alike; each
figure is the median of ``--repeats`` steps. Tokens/s counts every non-padding token of the
batch (what the forward and backward passes process). Goal: spade's overhead at most 10 %.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

import torch
from spade_train.backends import make_backend
from spade_train.loss import token_logprobs
from spade_train.types import TrainSample

GOAL_OVERHEAD = 0.10


def rollout_samples(backend, n: int, seq_len: int, turns: int, seed: int) -> list[TrainSample]:
    """``n`` multi-turn samples (prompt, then completion/observation spans) with the policy's
    own log-probs as old log-probs and advantages normalised within groups of 4."""
    rng = random.Random(seed)
    vocab = backend.model.config.vocab_size
    special = {backend.pad_id, backend.eos_id}
    samples = []
    for i in range(n):
        length = rng.randint(seq_len // 2, seq_len)
        ids = [rng.randrange(vocab) for _ in range(length)]
        ids = [t if t not in special else 0 for t in ids]
        # prompt ~30 %, then `turns` completions each followed by an observation span
        mask = [0] * length
        span = (length - int(0.3 * length)) // turns
        for k in range(turns):
            start = int(0.3 * length) + k * span
            for j in range(start, start + span * 2 // 3):
                mask[j] = 1
        with torch.no_grad():
            tensor = torch.tensor([ids])
            logp, _ = token_logprobs(backend.model, tensor, torch.ones_like(tensor))
        old = [float(x) if m else 0.0 for x, m in zip(logp[0].tolist(), mask, strict=True)]
        samples.append(TrainSample(ids, mask, old, 0.0, "agent", {"index": i}))
    rewards = [rng.random() for _ in samples]
    for g in range(0, n, 4):
        group = rewards[g : g + 4]
        mean, std = statistics.fmean(group), statistics.pstdev(group) or 1.0
        for k in range(g, min(g + 4, n)):
            samples[k].advantage = (rewards[k] - mean) / std
    return samples


def padded(samples: list[TrainSample], pad_id: int) -> list[torch.Tensor]:
    """Right-padded ``ids, attention, mask, old, adv`` tensors of one micro-batch."""
    width = max(len(s.input_ids) for s in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    mask, old = torch.zeros(ids.shape), torch.zeros(ids.shape)
    for row, s in enumerate(samples):
        n = len(s.input_ids)
        ids[row, :n] = torch.tensor(s.input_ids)
        attention[row, :n] = 1
        mask[row, :n] = torch.tensor(s.loss_mask, dtype=torch.float)
        old[row, :n] = torch.tensor(s.old_logprobs)
    adv = torch.tensor([s.advantage for s in samples])
    return [ids, attention, mask, old, adv]


class BareStep:
    """The same PPO-clip step in plain PyTorch, on micro-batch tensors built once up front."""

    def __init__(
        self, backend, samples, micro_batch: int, lr: float, clip_eps: float, grad_clip: float
    ):
        self.model = backend.model
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=lr)
        self.clip_eps, self.grad_clip = clip_eps, grad_clip
        self.micro = [
            padded(samples[s : s + micro_batch], backend.pad_id)
            for s in range(0, len(samples), micro_batch)
        ]
        self.normalizer = float(sum(m[:, 1:].sum() for _, _, m, _, _ in self.micro))

    def __call__(self) -> None:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        for ids, attention, mask, old, adv in self.micro:
            logits = self.model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
            logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
            ratio = torch.exp(logp - old[:, 1:])
            a = adv[:, None]
            clipped = torch.clamp(ratio, 1 - self.clip_eps, 1 + self.clip_eps)
            loss = -(torch.minimum(ratio * a, clipped * a) * mask[:, 1:]).sum() / self.normalizer
            loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.grad_clip)
        self.optimizer.step()


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument(
        "--samples", type=int, default=16, help="samples per batch (default %(default)s)"
    )
    parser.add_argument(
        "--seq-len", type=int, default=384, help="longest sample, tokens (default %(default)s)"
    )
    parser.add_argument(
        "--turns", type=int, default=3, help="completions per sample (default %(default)s)"
    )
    parser.add_argument(
        "--micro-batch",
        type=int,
        default=4,
        help="the backend's micro_batch_size (default %(default)s)",
    )
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's choice)"
    )
    parser.add_argument(
        "--check", action="store_true", help=f"exit 1 if the overhead is over {GOAL_OVERHEAD:.0%}"
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    spec = f"tiny:qwen3?layers={args.layers}&hidden={args.hidden}&vocab=4096"
    lr, clip_eps, grad_clip = 1e-5, 0.2, 1.0
    backend = make_backend(
        "local", model=spec, device="cpu", dtype="float32", lr=lr, clip_eps=clip_eps,
        grad_clip=grad_clip, micro_batch_size=args.micro_batch, max_seq_len=max(2048, args.seq_len), seed=0,
    )  # fmt: skip
    samples = rollout_samples(backend, args.samples, args.seq_len, args.turns, seed=0)
    bare = BareStep(backend, samples, args.micro_batch, lr, clip_eps, grad_clip)
    tokens = sum(len(s.input_ids) for s in samples)
    trained = sum(sum(s.loss_mask[1:]) for s in samples)

    def spade() -> None:
        backend.train_step(samples)

    for _ in range(args.warmup):
        spade()
        bare()
    spade_s, bare_s = [], []
    for _ in range(args.repeats):
        spade_s.append(timed(spade))
        bare_s.append(timed(bare))

    params = sum(p.numel() for p in backend.model.parameters())
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
        f"{spec} ({params / 1e6:.2f} M params, vocab {backend.model.config.vocab_size})"
    )
    print(
        f"batch: {args.samples} samples, {tokens:,} tokens ({trained:,} trained), longest {args.seq_len}, "
        f"micro-batch {args.micro_batch}; median of {args.repeats} steps after {args.warmup} warm-up"
    )
    print(f"{'':<28} {'step s':>8} {'min s':>8} {'max s':>8} {'tokens/s':>10}")
    rows = (("bare PyTorch (baseline)", bare_s), ("spade LocalBackend.train_step", spade_s))
    for name, times in rows:
        median = statistics.median(times)
        print(
            f"{name:<28} {median:>8.3f} {min(times):>8.3f} {max(times):>8.3f} {tokens / median:>10,.0f}"
        )
    overhead = statistics.median(spade_s) / statistics.median(bare_s) - 1
    over = overhead > GOAL_OVERHEAD
    print(
        f"overhead (spade / bare - 1): {overhead:+.1%}; goal at most {GOAL_OVERHEAD:.0%} -> {'OVER' if over else 'met'}"
    )
    return 1 if over and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
