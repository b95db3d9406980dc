"""A stand-in for SGLang's model engine: a small HF model on CPU behind SGLang's semantics.

It is what the tests put where the GPU engine (scheduler, model runner, KV cache) would be:
requests sample with their own ``sampling_seed``; ``pause`` in ``abort`` mode aborts what is in
flight (``finish_reason`` ``abort``); a prompt that does not fit the context raises SGLang's
own message; weight updates arrive by a process group (broadcast from rank 0), by serialized
tensors or from an HF directory, each naming the new ``weight_version``. Stop strings are not
honoured (end-of-sequence tokens are). ``SPADE_STANDIN_TOKEN_DELAY_S`` slows each token (tests
that kill a server mid-generation).
"""

from __future__ import annotations

import base64
import os
import pickle
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import torch


class StandinEngine:
    def __init__(self, model_path: str, weight_version: str, context_length: int | None) -> None:
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(1)
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
        self.model_path = model_path
        self.version = weight_version
        self.context_length = context_length or int(
            getattr(self.model.config, "max_position_embeddings", 4096)
        )
        eos = self.model.config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self.lock = threading.Lock()
        self.unpaused = threading.Event()
        self.unpaused.set()
        self.epoch = 0
        self.groups: dict[str, Any] = {}
        self.delay_s = float(os.environ.get("SPADE_STANDIN_TOKEN_DELAY_S", "0"))
        self.served = 0
        self.active = 0
        self.aborted = 0

    # -- generation ---------------------------------------------------------------------
    def check_fits(self, input_ids: list[int], max_new_tokens: int) -> None:
        n = len(input_ids)
        if n >= self.context_length:
            raise ValueError(
                f"The input ({n} tokens) is longer than the model's context length "
                f"({self.context_length} tokens)."
            )
        if n + max_new_tokens > self.context_length:
            raise ValueError(
                f"Requested token count exceeds the model's maximum context length of "
                f"{self.context_length} tokens."
            )

    @torch.no_grad()
    def generate(self, input_ids: list[int], sp: dict[str, Any], rid: str) -> dict[str, Any]:
        max_new = int(sp.get("max_new_tokens", 16))
        self.check_fits(input_ids, max_new)
        seed = sp.get("sampling_seed")
        gen = torch.Generator().manual_seed(
            int(seed) if seed is not None else random.getrandbits(62)
        )
        temperature = float(sp.get("temperature", 1.0))
        top_k = int(sp.get("top_k", -1))
        self.unpaused.wait()
        self.active += 1
        try:
            return self._sample(input_ids, max_new, gen, temperature, top_k, rid)
        finally:
            self.active -= 1

    def _sample(self, input_ids, max_new, gen, temperature, top_k, rid) -> dict[str, Any]:
        epoch = self.epoch
        ids, out, lps, finish = list(input_ids), [], [], {"type": "length", "length": max_new}
        past, feed = None, torch.tensor([ids])
        for _ in range(max_new):
            if self.epoch != epoch:
                self.aborted += 1
                finish = {
                    "type": "abort",
                    "message": "paused for a weight update",
                    "status_code": None,
                    "err_type": None,
                }
                break
            with self.lock:  # a weight update waits for this step (and the other way round)
                step = self.model(feed, past_key_values=past, use_cache=True)
            past, logits = step.past_key_values, step.logits[0, -1].float()
            logp = torch.log_softmax(logits, -1)
            if temperature <= 0:
                tok = int(torch.argmax(logits))
            else:
                scaled = logits / temperature
                if top_k > 0:
                    kth = torch.topk(scaled, min(top_k, scaled.numel())).values[-1]
                    scaled = scaled.masked_fill(scaled < kth, float("-inf"))
                tok = int(torch.multinomial(torch.softmax(scaled, -1), 1, generator=gen))
            ids.append(tok)
            feed = torch.tensor([[tok]])
            out.append(tok)
            lps.append(float(logp[tok]))
            if self.delay_s:
                time.sleep(self.delay_s)
            if tok in self.eos:
                finish = {"type": "stop", "matched": tok}
                break
        else:
            finish = {"type": "length", "length": max_new}
        if finish["type"] != "abort":
            self.served += 1
        meta = {
            "id": rid,
            "finish_reason": finish,
            "prompt_tokens": len(input_ids),
            "completion_tokens": len(out),
            "weight_version": self.version,
            "output_token_logprobs": [[lp, t, None] for lp, t in zip(lps, out, strict=True)],
        }
        return {"text": "", "output_ids": out, "meta_info": meta}

    def pause(self, mode: str) -> None:
        self.unpaused.clear()
        if mode == "abort":
            self.epoch += 1

    def resume(self) -> None:
        self.unpaused.set()

    # -- weights ------------------------------------------------------------------------
    def _load(self, named: list[tuple[str, torch.Tensor]], version: str | None) -> None:
        state = self.model.state_dict()
        with self.lock:
            for name, tensor in named:
                if name not in state:
                    raise KeyError(f"unknown weight {name}")
                state[name].copy_(tensor.to(state[name].dtype))
        if version is not None:
            self.version = version

    def init_group(self, body: dict[str, Any], opener: Callable[..., Any]) -> None:
        rank = int(body["rank_offset"])  # tensor-parallel rank 0: the only one here
        self.groups[body["group_name"]] = opener(
            backend=body.get("backend", "nccl"),
            init_method=f"tcp://{body['master_address']}:{body['master_port']}",
            world_size=int(body["world_size"]),
            rank=rank,
            group_name=body["group_name"],
        )

    def destroy_group(self, name: str) -> None:
        group = self.groups.pop(name)
        torch.distributed.destroy_process_group(group)

    def update_distributed(self, body: dict[str, Any]) -> None:
        group = self.groups[body["group_name"]]
        named = []
        for name, dtype, shape in zip(body["names"], body["dtypes"], body["shapes"], strict=True):
            t = torch.empty(shape, dtype=getattr(torch, dtype))
            torch.distributed.broadcast(t, src=0, group=group)
            named.append((name, t))
        self._load(named, body.get("weight_version"))

    def update_tensor(self, body: dict[str, Any]) -> None:
        raw = body["serialized_named_tensors"][0]
        named = pickle.loads(base64.b64decode(raw) if isinstance(raw, str) else raw)
        self._load(named, body.get("weight_version"))

    def update_disk(self, body: dict[str, Any]) -> None:
        from transformers import AutoModelForCausalLM

        fresh = AutoModelForCausalLM.from_pretrained(body["model_path"], dtype=torch.float32)
        self._load(list(fresh.state_dict().items()), body.get("weight_version"))
        self.model_path = body["model_path"]


def weights_digest(model: torch.nn.Module) -> float:
    """A number that changes when any weight does (for tests)."""
    return float(sum(p.double().sum() for p in model.state_dict().values()))
