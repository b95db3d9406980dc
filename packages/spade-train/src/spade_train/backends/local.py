"""The local backend: PyTorch + transformers in one process, on CPU or one GPU.

Generation and training share one model object, so ``publish_weights`` has nothing to do.
Log-probs recorded at generation time are those of the raw policy (temperature 1, no top-p/k):
exactly what ``train_step`` recomputes, so the PPO ratio is 1 on the first update of fresh
samples. Full fine-tuning or LoRA (peft); gradient accumulation over micro-batches with the
loss normalised by the whole batch's token count, so it equals the full-batch token mean.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from transformers import StoppingCriteria, StoppingCriteriaList
from transformers.generation.utils import GenerateDecoderOnlyOutput

from spade_train.backends.blas import prefer_mkl_cnr
from spade_train.backends.kv_cache import new_cache
from spade_train.backends.kv_reuse import Hit, PrefixStore, batch_cache, layout, split_rows
from spade_train.backends.local_parts import Tick, role_metrics, trainable
from spade_train.backends.render import render_prompt
from spade_train.backends.shared_prefill import distinct_rows, shared_prefill
from spade_train.backends.stops import BalancedStop, first_stop
from spade_train.backends.threads import ThreadGovernor
from spade_train.backends.top_p import sampling_options
from spade_train.backends.train_parts import shared_head_parts
from spade_train.errors import BackendError
from spade_train.loss import policy_loss, token_logprobs
from spade_train.models import load_policy
from spade_train.types import Generation, Message, SamplingParams, TrainSample


def trainer_state_path(policy_dir: Path) -> Path:
    """Where :meth:`LocalBackend.save` keeps the training state of the model directory
    ``policy_dir``: beside it, never inside (the directory stays a plain model)."""
    return policy_dir.with_name(f"{policy_dir.name}.trainer.pt")


# transformers 5 renamed generate's ``past_key_values`` (argument and output field) ``cache``
_CACHE = "cache" if "cache" in GenerateDecoderOnlyOutput.__dataclass_fields__ else "past_key_values"


class LocalBackend:
    name = "local"

    def __init__(
        self,
        model: str = "embedded:smollm2-135m",
        device: str = "auto",
        dtype: str = "auto",
        lr: float = 1e-5,
        weight_decay: float = 0.0,
        betas: Sequence[float] = (0.9, 0.999),
        grad_clip: float = 1.0,
        micro_batch_size: int = 4,
        micro_batch_tokens: int | None = None,
        clip_eps: float = 0.2,
        clip_eps_high: float | None = None,
        kl_coef: float = 0.0,
        entropy_coef: float = 0.0,
        lora: dict[str, Any] | None = None,
        max_seq_len: int = 2048,
        gen_batch_size: int = 16,
        seed: int = 0,
        gradient_checkpointing: bool = False,
        tis_clip: float | None = None,
        tis_clip_low: float = 0.0,
        threads: int | str = "auto",
        reuse_kv: bool = True,
        **unknown: Any,
    ):
        if unknown:
            raise BackendError(
                f"local backend: unknown option(s) {', '.join(sorted(unknown))}; "
                "remove them from backend.options"
            )
        try:
            self.governor = ThreadGovernor(threads)
        except ValueError as e:
            raise BackendError(str(e)) from None
        self.mkl_mode = prefer_mkl_cnr()  # before the first matrix product (see blas.py)
        torch.manual_seed(seed)
        self.spec = model
        self.tis_clip, self.tis_clip_low = tis_clip, tis_clip_low
        self.model, self.tokenizer = load_policy(model, device, dtype)
        self.device = next(self.model.parameters()).device
        self.model, self.ref_model = trainable(self.model, lora, kl_coef)
        if gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params, lr=lr, weight_decay=weight_decay, betas=(float(betas[0]), float(betas[1]))
        )
        self.grad_clip = grad_clip
        self.micro_batch_size = max(1, micro_batch_size)
        self.micro_batch_tokens = micro_batch_tokens
        self.clip_eps, self.clip_eps_high = clip_eps, clip_eps_high
        self.kl_coef, self.entropy_coef = kl_coef, entropy_coef
        self.max_seq_len = max_seq_len
        self.gen_batch_size = max(1, gen_batch_size)
        self.steps = 0
        self.truncated_prompts = 0
        self.eos_id = self.tokenizer.eos_token_id
        self.prefixes = PrefixStore() if reuse_kv else None
        self.prompt_tokens = {"reused": 0, "new": 0, "fed": 0}
        self.pad_id = self.tokenizer.pad_token_id

    # -- generation -------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _render(
        self, messages: Sequence[Message], tools, enable_thinking: bool | None = None
    ) -> list[int]:
        return render_prompt(self.tokenizer, messages, tools, enable_thinking)

    @torch.no_grad()
    def generate(
        self,
        conversations: Sequence[Sequence[Message]],
        params: SamplingParams,
        tools: Sequence[Sequence[dict[str, Any]] | None] | None = None,
    ) -> list[Generation]:
        if tools is not None and len(tools) != len(conversations):
            raise BackendError(f"tools has {len(tools)} entries for {len(conversations)} chats")
        prompts = []
        budget = max(16, self.max_seq_len - params.max_new_tokens)
        for i, messages in enumerate(conversations):
            ids = self._render(messages, tools[i] if tools else None, params.enable_thinking)
            if len(ids) > budget:
                self.truncated_prompts += 1
                ids = ids[-budget:]
            prompts.append(ids)
        if params.seed is not None:
            torch.manual_seed(params.seed)
        self.model.eval()
        out: list[Generation] = []
        with self.governor.governing():
            for start in range(0, len(prompts), self.gen_batch_size):
                out += self._generate_batch(prompts[start : start + self.gen_batch_size], params)
        return out

    @property
    def _core(self) -> torch.nn.Module:
        """The transformers model whose forward ``generate`` calls (under LoRA: peft's base)."""
        get_base = getattr(self.model, "get_base_model", None)
        return get_base() if callable(get_base) else self.model

    def _generate_batch(self, prompts: list[list[int]], params: SamplingParams) -> list[Generation]:
        hits: list[Hit | None] = [None] * len(prompts)
        if self.prefixes is not None:
            hits = [self.prefixes.take(p) for p in prompts]
        input_ids, attention, reused_width = layout(prompts, hits, self.pad_id)
        width = input_ids.shape[1]
        kwargs = self._generate_options(params, width)
        kv = None
        if reused_width:
            like = next(h for h in hits if h is not None).kv
            kv = batch_cache(hits, reused_width, like)
        kwargs[_CACHE] = new_cache(self.model.config, kv)
        shared = None if reused_width else distinct_rows(input_ids, attention)
        with shared_prefill(self._core, *shared) if shared else nullcontext():
            result = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention.to(self.device),
                **kwargs,
            )
        self._count_prompt_tokens(prompts, hits, width - reused_width)
        sequences = result.sequences[:, width:]
        # each step's log-prob of the token it chose, not the whole (rows x steps x vocab) table
        logps = torch.stack(
            [
                torch.log_softmax(x.float(), -1).gather(1, sequences[:, k : k + 1]).squeeze(1)
                for k, x in enumerate(result.logits)
            ],
            1,
        ).cpu()
        sequences = sequences.cpu()
        generations = []
        for row, ids in enumerate(prompts):
            tokens = sequences[row].tolist()
            end, finish = self._row_end(tokens, params)
            completion = tokens[:end]
            text = self._decode(completion)
            lp = logps[row, : len(completion)].tolist()
            generations.append(Generation(text, list(ids), completion, lp, finish))
        if self.prefixes is not None:
            lengths = [max(0, len(g.completion_ids) - 1) for g in generations]
            rows = split_rows(getattr(result, _CACHE), attention, lengths)
            for g, n, kv in zip(generations, lengths, rows, strict=True):
                self.prefixes.keep(g.prompt_ids + g.completion_ids[:n], kv)
        return generations

    def _generate_options(self, params: SamplingParams, width: int) -> dict[str, Any]:
        """``generate``'s keyword arguments for ``params`` (prompts padded to ``width``)."""
        sampling = params.temperature > 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": params.max_new_tokens,
            "do_sample": sampling,
            "eos_token_id": self.eos_id,
            "pad_token_id": self.pad_id,
            "output_logits": True,
            "return_dict_in_generate": True,
        }
        if sampling:
            kwargs.update(
                sampling_options(params.temperature, params.top_p, params.top_k, self.device.type)
            )
        criteria: list[StoppingCriteria] = [Tick(self.governor)]
        if params.stop and params.balanced_stop:
            criteria.append(BalancedStop(self._decode, params.stop, width))
        elif params.stop:
            kwargs.update(stop_strings=list(params.stop), tokenizer=self.tokenizer)
        kwargs["stopping_criteria"] = StoppingCriteriaList(criteria)
        return kwargs

    def _row_end(
        self, tokens: list[int], params: SamplingParams
    ) -> tuple[int, Literal["stop", "length"]]:
        """Where a generated row ends (after EOS or the token completing a stop string) and why."""
        finish: Literal["stop", "length"] = "length"
        end = len(tokens)
        for k, t in enumerate(tokens):
            if t == self.eos_id:
                end, finish = k + 1, "stop"
                break
        if params.stop:
            # the row ends with the token that completes a stop string (generate pads the
            # rest of a stopped row); "contains a stop" only grows with k: bisect for it
            def stops(k: int) -> bool:
                text = self._decode(tokens[:k])
                return first_stop(text, params.stop, params.balanced_stop) is not None

            if stops(end):
                lo, hi = 1, end
                while lo < hi:
                    mid = (lo + hi) // 2
                    lo, hi = (lo, mid) if stops(mid) else (mid + 1, hi)
                end, finish = lo, "stop"
        return end, finish

    def _count_prompt_tokens(
        self, prompts: list[list[int]], hits: list[Hit | None], fed_width: int
    ) -> None:
        """Prompt tokens since the last train step: reused from kept rows, new (encoded), and
        fed to the model (new plus the padding of their batch)."""
        reused = sum(h.length for h in hits if h is not None)
        self.prompt_tokens["reused"] += reused
        self.prompt_tokens["new"] += sum(len(p) for p in prompts) - reused
        self.prompt_tokens["fed"] += len(prompts) * fed_width

    def _decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(
            [t for t in tokens if t != self.eos_id], skip_special_tokens=False
        )

    # -- training ---------------------------------------------------------------------------
    def _batch(self, samples: Sequence[TrainSample]):
        seqs = [s.input_ids[-self.max_seq_len :] for s in samples]
        cut = [len(s.input_ids) - len(q) for s, q in zip(samples, seqs, strict=True)]
        width = max(len(q) for q in seqs)
        shape = (len(samples), width)
        ids = torch.full(shape, self.pad_id, dtype=torch.long)
        attention = torch.zeros(shape, dtype=torch.long)
        mask = torch.zeros(shape)
        old = torch.zeros(shape)
        for row, (s, q, c) in enumerate(zip(samples, seqs, cut, strict=True)):
            n = len(q)
            ids[row, :n] = torch.tensor(q)
            attention[row, :n] = 1
            mask[row, :n] = torch.tensor(s.loss_mask[c:], dtype=torch.float)
            old[row, :n] = torch.tensor(s.old_logprobs[c:], dtype=torch.float)
        mask[:, 0] = 0  # position 0 has no prediction
        adv = torch.tensor([s.advantage for s in samples], dtype=torch.float)
        return [t.to(self.device) for t in (ids, attention, mask, old, adv)]

    def _micro_batches(self, samples: Sequence[TrainSample]) -> list[list[TrainSample]]:
        """Consecutive runs of ``samples`` (sorted by length) of at most ``micro_batch_size``
        rows and, when ``micro_batch_tokens`` is set, at most that many padded tokens (a row
        longer than the budget goes alone)."""
        parts: list[list[TrainSample]] = []
        part: list[TrainSample] = []
        longest = 0  # the widest row of ``part``
        for s in samples:
            width = min(len(s.input_ids), self.max_seq_len)
            budget = self.micro_batch_tokens
            over = budget is not None and (len(part) + 1) * max(longest, width) > budget
            if part and (len(part) >= self.micro_batch_size or over):
                parts.append(part)
                part, longest = [], 0
            part.append(s)
            longest = max(longest, width)
        return parts + [part] if part else parts

    def train_step(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        if not samples:
            raise BackendError("train_step got no samples; the cycle produced nothing to train on")
        started = time.perf_counter()
        with self.governor.governing() as threads:
            out = self._train_step(samples, started)
        out["sys/threads"] = float(threads)
        return out

    def _train_step(self, samples: Sequence[TrainSample], started: float) -> dict[str, float]:
        if self.prefixes is not None:
            self.prefixes.clear()  # the weights are about to change
        self.model.train()
        total_tokens = float(sum(sum(s.loss_mask[-self.max_seq_len :][1:]) for s in samples))
        normalizer = max(1.0, total_tokens)
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum, sums = 0.0, {"clip_frac": 0.0, "approx_kl": 0.0, "entropy": 0.0}
        # A sample with advantage 0 adds nothing to the clipped surrogate's gradient; without KL
        # and entropy terms it is left out (same gradient, none of its compute). Samples of one
        # prompt share a micro-batch whose prompt runs once (train_parts.py); the others are cut
        # from length-sorted samples so little of each is padding.
        if not (self.kl_coef or self.entropy_coef):
            trained = [s for s in samples if s.advantage != 0.0]
        else:
            trained = list(samples)
        trained.sort(key=lambda s: min(len(s.input_ids), self.max_seq_len))
        trained_tokens = max(
            1.0, float(sum(sum(s.loss_mask[-self.max_seq_len :][1:]) for s in trained))
        )
        shared, rest = shared_head_parts(
            trained, self.max_seq_len, self.micro_batch_size, self.micro_batch_tokens
        )
        for part, head in [*shared, *((p, 0) for p in self._micro_batches(rest))]:
            self.governor.tick()
            loss, metrics, tokens = self._micro_step(part, head, normalizer)
            loss.backward()
            loss_sum += float(loss.detach())
            weight = tokens / trained_tokens  # metrics: means over trained tokens
            for key in sums:
                sums[key] += metrics.get(key, 0.0) * weight
        params = [p for p in self.model.parameters() if p.requires_grad]
        for p in params:  # nothing trained: a zero gradient, so the step is the same (momentum)
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        grad_norm = torch.nn.utils.clip_grad_norm_(params, self.grad_clip)
        self.optimizer.step()
        self.steps += 1
        out = {
            "loss": loss_sum,
            "grad_norm": float(grad_norm),
            "tokens": total_tokens,
            **sums,
            "step": float(self.steps),
            "step_time_s": time.perf_counter() - started,
            "truncated_prompts": float(self.truncated_prompts),
            "trained_samples": float(len(trained)),
            # facts of the machine, not of the algorithm ("sys/": runs compare without them)
            **{f"sys/prompt_tokens_{k}": float(v) for k, v in self.prompt_tokens.items()},
        }
        self.prompt_tokens = dict.fromkeys(self.prompt_tokens, 0)
        return {**out, **role_metrics(samples)}

    def _micro_step(
        self, part: list[TrainSample], head: int, normalizer: float
    ) -> tuple[torch.Tensor, dict[str, float], float]:
        """One micro-batch's loss (not yet backpropagated), its metrics and trained tokens."""
        ids, attention, mask, old, adv = self._batch(part)
        trained_at = mask > 0  # the loss reads log-probs only where the mask is 1
        logp, entropy = token_logprobs(self.model, ids, attention, trained_at, head)
        ref = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref, _ = token_logprobs(self.ref_model, ids, attention, trained_at, head)
        loss, metrics = policy_loss(
            logp,
            old,
            adv,
            mask,
            clip_eps=self.clip_eps,
            clip_eps_high=self.clip_eps_high,
            ref_logprobs=ref,
            kl_coef=self.kl_coef,
            entropy=entropy,
            entropy_coef=self.entropy_coef,
            normalizer=normalizer,
            tis_clip=self.tis_clip,
            tis_clip_low=self.tis_clip_low,
        )
        return loss, metrics, float(mask.sum())

    # -- checkpoints ------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the policy as a standard Hugging Face model directory at ``path``
        (``config.json``, ``generation_config.json``, ``model.safetensors``, the tokenizer and
        its chat template: loadable as it is by transformers, spade-eval or an inference
        server) and the training state beside it, in ``<path>.trainer.pt`` (optimizer, step,
        every RNG; the LoRA adapters of a LoRA run, whose model directory holds the merged
        weights). Each is written to a temporary name and renamed into place."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        self._hf_model().save_pretrained(tmp)
        self.tokenizer.save_pretrained(tmp)
        state = {
            "optimizer": self.optimizer.state_dict(),
            "steps": self.steps,
            "truncated_prompts": self.truncated_prompts,
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "python_rng": random.getstate(),
            "numpy_rng": np.random.get_state(),
            "spec": self.spec,
            "adapters": self._adapter_state(),
        }
        trainer, trainer_tmp = trainer_state_path(path), tmp.with_suffix(".trainer.pt")
        torch.save(state, trainer_tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
        os.replace(trainer_tmp, trainer)

    def load(self, path: Path) -> None:
        """Restore what :meth:`save` wrote (also the older layout, ``trainer.pt`` inside)."""
        path = Path(path)
        trainer = trainer_state_path(path)
        if not trainer.exists() and (path / "trainer.pt").exists():
            trainer = path / "trainer.pt"
        if not trainer.exists() or not list(path.glob("*.safetensors")):
            raise BackendError(
                f"{path} is not a local-backend checkpoint (no weights, or no {trainer.name} "
                "beside them)"
            )
        state = torch.load(trainer, weights_only=False)
        if trainer.parent == path:  # the older layout: the whole state dict, by safetensors
            from safetensors.torch import load_model

            load_model(self.model, str(path / "model.safetensors"), device=str(self.device))
        elif state.get("adapters"):
            self.model.load_state_dict(state["adapters"], strict=False)
        else:
            self._load_weights(path)
        if self.prefixes is not None:
            self.prefixes.clear()
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])
        self.truncated_prompts = int(state.get("truncated_prompts", 0))
        torch.set_rng_state(state["torch_rng"])
        if state.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        random.setstate(state["python_rng"])
        np.random.set_state(state["numpy_rng"])

    def _hf_model(self) -> Any:
        """The model to write as a Hugging Face directory: a LoRA run's adapters merged into
        a copy of the base (the live model keeps training its adapters)."""
        if hasattr(self.model, "merge_and_unload"):
            import copy

            return copy.deepcopy(self.model).merge_and_unload()
        return self.model

    def _adapter_state(self) -> dict[str, torch.Tensor] | None:
        if not hasattr(self.model, "merge_and_unload"):
            return None
        return {n: p.detach().cpu() for n, p in self.model.named_parameters() if p.requires_grad}

    def _load_weights(self, path: Path) -> None:
        from safetensors.torch import load_file

        weights: dict[str, torch.Tensor] = {}
        for file in sorted(path.glob("*.safetensors")):
            weights.update(load_file(str(file), device=str(self.device)))
        missing, unexpected = self.model.load_state_dict(weights, strict=False)
        # save_pretrained writes a tied output embedding once, as the input embedding
        tied = getattr(getattr(self.model, "config", None), "tie_word_embeddings", False)
        if unexpected or [k for k in missing if not (tied and k == "lm_head.weight")]:
            raise BackendError(
                f"{path}: weights do not fit this model (missing {sorted(missing)[:3]}, "
                f"unexpected {sorted(unexpected)[:3]}); was it saved from another model?"
            )
        if hasattr(self.model, "tie_weights"):
            self.model.tie_weights()

    def publish_weights(self) -> None:
        """Generation uses the trained model object itself: nothing to publish, but keys and
        values kept for reuse belong to the old weights (also when a caller loaded new ones
        into ``model``, as the Ray rollout workers do)."""
        if self.prefixes is not None:
            self.prefixes.clear()

    def close(self) -> None:
        if self.prefixes is not None:
            self.prefixes.clear()
