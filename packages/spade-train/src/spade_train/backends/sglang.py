"""SGLang integration: an HTTP client for a running server and an in-process engine launcher.

``SGLangClient(url)`` talks to ``python -m sglang.launch_server`` (``/health``, ``/generate`` with
``input_ids`` and ``return_logprob``, ``/update_weights_from_disk``) with timeouts and retries.
``launch_engine`` starts ``sglang.Engine`` in-process (GPU only; sglang is imported lazily).
``generate_chat`` renders chat conversations with the policy's tokenizer and returns
:class:`~spade_train.types.Generation` objects, the same shape the local backend returns.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx

from spade_train.backends.render import render_prompt
from spade_train.errors import BALANCED_STOP_UNSUPPORTED, BackendError
from spade_train.types import Generation, Message, SamplingParams

INSTALL_HINT = "install sglang on a GPU machine: pip install 'sglang[all]'"


def sampling_payload(params: SamplingParams) -> dict[str, Any]:
    """SGLang ``sampling_params`` for our :class:`SamplingParams` (top_k 0 → -1, i.e. off)."""
    if params.balanced_stop:
        raise BackendError(BALANCED_STOP_UNSUPPORTED.format(backend="sglang"))
    out: dict[str, Any] = {
        "max_new_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else -1,
    }
    if params.stop:
        out["stop"] = list(params.stop)
    if params.seed is not None:
        out["sampling_seed"] = params.seed
    return out


def _parse_output(item: dict[str, Any]) -> tuple[list[int], list[float], str]:
    meta = item.get("meta_info") or {}
    triples = meta.get("output_token_logprobs") or []
    ids = item.get("output_ids")
    if ids is None:
        ids = [int(t[1]) for t in triples]
    logprobs = [float(t[0]) for t in triples]
    if len(logprobs) != len(ids):
        raise BackendError(
            f"SGLang returned {len(ids)} tokens but {len(logprobs)} log-probs; "
            "send return_logprob=true (is the server an SGLang /generate endpoint?)"
        )
    finish = meta.get("finish_reason") or {}
    kind = finish.get("type") if isinstance(finish, dict) else str(finish)
    return [int(i) for i in ids], logprobs, "length" if kind == "length" else "stop"


class SGLangClient:
    """A client for a running SGLang server at ``url`` (``http://host:port``)."""

    def __init__(self, url: str, timeout_s: float = 600.0, retries: int = 2) -> None:
        if not url.startswith(("http://", "https://")):
            raise BackendError(f"sglang url {url!r} must start with http:// or https://")
        self.url = url.rstrip("/")
        self.retries = retries
        self._http = httpx.Client(timeout=timeout_s)

    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                resp = self._http.request(method, self.url + path, json=payload)
            except httpx.TimeoutException as exc:
                last = exc
            except httpx.TransportError as exc:
                last = exc
            else:
                if resp.status_code < 500:
                    if resp.status_code >= 400:
                        raise BackendError(
                            f"SGLang {path} answered {resp.status_code}: {resp.text[:200]}"
                        )
                    return resp.json() if resp.content else None
                last = BackendError(f"SGLang {path} answered {resp.status_code}")
            if attempt < self.retries:
                time.sleep(0.2 * (attempt + 1))
        raise BackendError(
            f"SGLang server {self.url}{path} failed after {self.retries + 1} tries "
            f"({type(last).__name__}: {last}); is the server up (python -m sglang.launch_server)?"
        )

    def health(self) -> None:
        """Raise :class:`BackendError` unless the server answers ``/health``."""
        self._request("GET", "/health")

    def generate_ids(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams
    ) -> list[tuple[list[int], list[float], str]]:
        """Sample one completion per prompt: ``(completion_ids, logprobs, finish_reason)``."""
        if not prompts:
            return []
        payload = {
            "input_ids": [list(p) for p in prompts],
            "sampling_params": sampling_payload(params),
            "return_logprob": True,
        }
        out = self._request("POST", "/generate", payload)
        if isinstance(out, dict):
            out = [out]
        if not isinstance(out, list) or len(out) != len(prompts):
            raise BackendError(
                f"SGLang /generate returned {type(out).__name__}, not one per prompt"
            )
        return [_parse_output(item) for item in out]

    def update_weights_from_disk(self, model_path: str) -> None:
        """Make the server reload its weights from the HF checkpoint at ``model_path``."""
        out = self._request("POST", "/update_weights_from_disk", {"model_path": model_path})
        if isinstance(out, dict) and not out.get("success", True):
            raise BackendError(
                f"SGLang could not load weights from {model_path}: {out.get('message')}"
            )

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()


class EngineClient:
    """The :class:`SGLangClient` methods over an in-process ``sglang.Engine``."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def health(self) -> None:
        """An in-process engine is up once constructed."""

    def generate_ids(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams
    ) -> list[tuple[list[int], list[float], str]]:
        """Sample one completion per prompt: ``(completion_ids, logprobs, finish_reason)``."""
        out = self.engine.generate(
            input_ids=[list(p) for p in prompts],
            sampling_params=sampling_payload(params),
            return_logprob=True,
        )
        return [_parse_output(item) for item in out]

    def update_weights_from_disk(self, model_path: str) -> None:
        """Reload the weights from an HF checkpoint directory."""
        result = self.engine.update_weights_from_disk(model_path)
        ok = result[0] if isinstance(result, tuple) else True
        if not ok:
            raise BackendError(f"SGLang could not load weights from {model_path}: {result}")

    def update_weights_from_tensor(self, named_tensors: list[tuple[str, Any]]) -> None:
        """Copy ``(name, tensor)`` pairs (HF names) straight into the engine's model."""
        self.engine.update_weights_from_tensor(named_tensors)

    def close(self) -> None:
        """Shut the engine down."""
        self.engine.shutdown()


def launch_engine(model_path: str, **server_args: Any) -> EngineClient:
    """Start an in-process ``sglang.Engine`` for ``model_path`` (GPU only)."""
    try:
        import sglang
    except ImportError as exc:
        raise BackendError(f"sglang is not installed ({exc.name}); {INSTALL_HINT}") from exc
    try:
        import torch

        if not torch.cuda.is_available():
            raise BackendError(f"sglang needs a CUDA GPU and none is visible; {INSTALL_HINT}")
    except ImportError:
        pass
    return EngineClient(sglang.Engine(model_path=model_path, **server_args))


def generate_chat(
    client: SGLangClient | EngineClient,
    tokenizer: Any,
    conversations: Sequence[Sequence[Message]],
    params: SamplingParams,
    tools: Sequence[Sequence[dict[str, Any]] | None] | None = None,
) -> list[Generation]:
    """Batched chat completions with log-probs through SGLang, in input order."""
    tool_list = list(tools) if tools is not None else [None] * len(conversations)
    prompts = [
        render_prompt(tokenizer, c, t, params.enable_thinking)
        for c, t in zip(conversations, tool_list, strict=True)
    ]
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    out = []
    for prompt, (ids, logprobs, finish) in zip(
        prompts, client.generate_ids(prompts, params), strict=True
    ):
        text = tokenizer.decode([i for i in ids if i not in special], skip_special_tokens=True)
        out.append(Generation(text, prompt, ids, logprobs, finish))  # type: ignore[arg-type]
    return out
