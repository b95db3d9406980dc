"""SGLang's HTTP interface, as the ray backend uses it (checked against SGLang 0.5.23's app).

:class:`SGLangClient` talks to one ``python -m sglang.launch_server`` (or a router in front of
several). Generation is one request per prompt (``/generate`` with ``input_ids``,
``return_logprob`` and a seed of its own), and every answer is checked: an abort, a prompt that
does not fit, an answer from weights older than the last publish and a timeout each raise their
own :class:`~spade_train.errors.RolloutError`. The control endpoints are the ones slime and verl
drive around a weight update: ``/pause_generation`` and ``/continue_generation``,
``/flush_cache``, ``/init_weights_update_group`` + ``/update_weights_from_distributed``,
``/update_weights_from_tensor``, ``/update_weights_from_disk``, ``/update_weight_version``,
``/release_memory_occupation`` / ``/resume_memory_occupation`` and ``/model_info`` (the served
weight version). :func:`launch_engine` starts ``sglang.Engine`` in-process (GPU only).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from spade_train.backends.render import render_prompt
from spade_train.errors import (
    BALANCED_STOP_UNSUPPORTED,
    BackendError,
    GenerationAborted,
    PromptTooLong,
    RolloutError,
    RolloutTimeout,
    StaleWeights,
)
from spade_train.types import Generation, Message, SamplingParams

INSTALL_HINT = "install sglang on a GPU machine: pip install 'sglang[all]'"


def request_seed(seed: int, index: int) -> int:
    """The sampling seed of request ``index`` of a batch seeded ``seed``.

    SGLang honours ``sampling_seed`` only with ``--enable-deterministic-inference``, and then
    two requests with one seed sample the same tokens: a GRPO group of copies of one prompt
    under one seed would collapse. Each request gets its own seed, a hash of both numbers.
    """
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1  # within SGLang's int64 range


def sampling_payload(
    params: SamplingParams, seed: int | None = None, max_new_tokens: int | None = None
) -> dict[str, Any]:
    """SGLang ``sampling_params`` for our :class:`SamplingParams` (top_k 0 → -1, i.e. off)."""
    if params.balanced_stop:
        raise BackendError(BALANCED_STOP_UNSUPPORTED.format(backend="sglang"))
    out: dict[str, Any] = {
        "max_new_tokens": params.max_new_tokens if max_new_tokens is None else max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k if params.top_k > 0 else -1,
    }
    if params.stop:
        out["stop"] = list(params.stop)
    seed = params.seed if seed is None else seed
    if seed is not None:
        out["sampling_seed"] = seed
    return out


@dataclass(frozen=True)
class Completion:
    """One checked answer of ``/generate``."""

    ids: list[int]
    logprobs: list[float]
    finish: Literal["stop", "length"]
    weight_version: str | None


def parse_output(item: dict[str, Any], rid: str | None = None) -> Completion:
    """Read one ``/generate`` answer; an aborted one raises :class:`GenerationAborted`."""
    meta = item.get("meta_info") or {}
    finish = meta.get("finish_reason") or {}
    kind = finish.get("type") if isinstance(finish, dict) else str(finish)
    if kind == "abort":
        why = finish.get("message") if isinstance(finish, dict) else None
        raise GenerationAborted(f"SGLang aborted request {rid}: {why or 'no reason given'}", rid)
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
    spans = meta.get("weight_versions") or []
    versions = {str(s["version"]) for s in spans if isinstance(s, dict) and "version" in s}
    version = meta.get("weight_version")
    if len(versions) > 1:  # the answer spans a weight update: mark it by its oldest part
        version = sorted(versions)[0] if version is None else f"mixed:{sorted(versions)}"
    return Completion(
        [int(i) for i in ids],
        logprobs,
        "length" if kind == "length" else "stop",
        None if version is None else str(version),
    )


class SGLangClient:
    """A client for one SGLang server (or router) at ``url`` (``http://host:port``).

    Control calls retry transport errors and 5xx answers ``retries`` times; a 4xx answer is
    the caller's mistake and raises at once. ``http`` shares one connection pool between
    clients (the pool is thread-safe; :mod:`spade_train.backends.rollout_client` sends many
    requests at once through it).
    """

    def __init__(
        self,
        url: str,
        timeout_s: float = 600.0,
        retries: int = 2,
        http: httpx.Client | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise BackendError(f"sglang url {url!r} must start with http:// or https://")
        self.url = url.rstrip("/")
        self.retries = retries
        self.timeout_s = timeout_s
        self._own_http = http is None
        self._http = http or httpx.Client(timeout=timeout_s)

    # -- transport ----------------------------------------------------------------------
    def _request(
        self, method: str, path: str, payload: Any = None, timeout_s: float | None = None
    ) -> Any:
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                resp = self._http.request(
                    method, self.url + path, json=payload, timeout=timeout_s or self.timeout_s
                )
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = exc
            else:
                if resp.status_code < 400:
                    return _body(resp)
                if resp.status_code < 500:
                    raise BackendError(
                        f"SGLang {path} answered {resp.status_code}: {_error_text(resp)}"
                    )
                last = BackendError(f"SGLang {path} answered {resp.status_code}")
            if attempt < self.retries:
                time.sleep(0.2 * (attempt + 1))
        raise BackendError(
            f"SGLang server {self.url}{path} failed after {self.retries + 1} tries "
            f"({type(last).__name__}: {last}); is the server up (python -m sglang.launch_server)?"
        )

    def _checked(self, path: str, payload: dict[str, Any], what: str) -> None:
        """POST a control call whose answer is ``{"success": bool, "message": str}``."""
        out = self._request("POST", path, payload)
        if isinstance(out, dict) and not out.get("success", True):
            raise BackendError(f"SGLang {what} failed at {self.url}: {out.get('message')}")

    # -- state --------------------------------------------------------------------------
    def health(self) -> None:
        """Raise :class:`BackendError` unless the server answers ``/health``."""
        self._request("GET", "/health")

    def model_info(self) -> dict[str, Any]:
        """``/model_info``: the model path and the served ``weight_version``."""
        out = self._request("GET", "/model_info")
        return out if isinstance(out, dict) else {}

    def weight_version(self) -> str | None:
        """The weight version the server answers with now."""
        version = self.model_info().get("weight_version")
        return None if version is None else str(version)

    def context_length(self) -> int | None:
        """The server's context length (``/server_info``), None when it does not say."""
        out = self._request("GET", "/server_info")
        value = out.get("context_length") if isinstance(out, dict) else None
        return int(value) if value else None

    # -- generation ---------------------------------------------------------------------
    def generate_one(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        *,
        seed: int | None,
        rid: str,
        timeout_s: float,
        expected_version: str | None = None,
        max_new_tokens: int | None = None,
    ) -> Completion:
        """Sample one completion; every failure raises its :class:`RolloutError`."""
        payload = {
            "rid": rid,
            "input_ids": list(prompt_ids),
            "sampling_params": sampling_payload(params, seed, max_new_tokens),
            "return_logprob": True,
        }
        try:
            resp = self._http.post(self.url + "/generate", json=payload, timeout=timeout_s)
        except httpx.TimeoutException as exc:
            raise RolloutTimeout(
                f"SGLang {self.url} gave no answer to {rid} within {timeout_s:g}s", rid
            ) from exc
        except httpx.TransportError as exc:
            raise RolloutError(f"SGLang {self.url} unreachable for {rid}: {exc}", rid) from exc
        if resp.status_code >= 400:
            text = _error_text(resp)
            if resp.status_code == 400 and "context length" in text:
                raise PromptTooLong(f"{rid}: {text}", rid)
            raise RolloutError(f"SGLang /generate answered {resp.status_code}: {text}", rid)
        out = _body(resp)
        if isinstance(out, list) and len(out) == 1:
            out = out[0]
        if not isinstance(out, dict):
            raise RolloutError(f"SGLang /generate returned {type(out).__name__} for {rid}", rid)
        done = parse_output(out, rid)
        if expected_version is not None and done.weight_version != expected_version:
            raise StaleWeights(
                f"{self.url} answered {rid} with weight version {done.weight_version}, "
                f"expected {expected_version} (the server missed a weight update)",
                rid,
            )
        return done

    def generate_ids(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams
    ) -> list[tuple[list[int], list[float], str]]:
        """One completion per prompt, one request each, seeds per request; in order."""
        out: list[tuple[list[int], list[float], str]] = []
        for i, prompt in enumerate(prompts):
            seed = None if params.seed is None else request_seed(params.seed, i)
            c = self.generate_one(
                prompt,
                params,
                seed=seed,
                rid=f"spade-{time.time_ns()}-{i}",
                timeout_s=self.timeout_s,
            )
            out.append((c.ids, c.logprobs, c.finish))
        return out

    def abort(self, rid: str = "", abort_all: bool = False) -> None:
        """``/abort_request`` for one request id, or every request."""
        self._request("POST", "/abort_request", {"rid": rid, "abort_all": abort_all})

    # -- weight updates -----------------------------------------------------------------
    def pause(self, mode: Literal["abort", "retract", "in_place"] = "abort") -> None:
        """``/pause_generation``: ``abort`` returns in-flight requests aborted (retried)."""
        self._request("POST", "/pause_generation", {"mode": mode})

    def resume(self) -> None:
        """``/continue_generation`` after a pause."""
        self._request("POST", "/continue_generation", {})

    def flush_cache(self) -> None:
        """``/flush_cache``: drop the prefix cache (its keys were computed by old weights)."""
        self._request("POST", "/flush_cache")

    def init_weights_group(
        self,
        master_address: str,
        master_port: int,
        rank_offset: int,
        world_size: int,
        group_name: str,
        backend: str = "nccl",
    ) -> None:
        """Join the trainer's weight broadcast group (the trainer is rank 0)."""
        payload = {
            "master_address": master_address,
            "master_port": master_port,
            "rank_offset": rank_offset,
            "world_size": world_size,
            "group_name": group_name,
            "backend": backend,
        }
        self._checked("/init_weights_update_group", payload, "joining the weight group")

    def destroy_weights_group(self, group_name: str) -> None:
        """Leave the weight broadcast group."""
        self._checked(
            "/destroy_weights_update_group", {"group_name": group_name}, "leaving the weight group"
        )

    def update_from_distributed(
        self,
        names: list[str],
        dtypes: list[str],
        shapes: list[list[int]],
        group_name: str,
        version: str | None = None,
    ) -> None:
        """Receive one bucket broadcast by the trainer (call it while the trainer sends)."""
        payload: dict[str, Any] = {
            "names": names,
            "dtypes": dtypes,
            "shapes": shapes,
            "group_name": group_name,
            "flush_cache": False,
        }
        if version is not None:
            payload["weight_version"] = version
        self._checked("/update_weights_from_distributed", payload, "update from distributed")

    def update_from_tensor(
        self, serialized: list[str], version: str | None = None, load_format: str | None = None
    ) -> None:
        """Load one bucket from serialized tensors (one base64 entry per tensor-parallel rank)."""
        payload: dict[str, Any] = {"serialized_named_tensors": serialized, "flush_cache": False}
        if version is not None:
            payload["weight_version"] = version
        if load_format is not None:
            payload["load_format"] = load_format
        self._checked("/update_weights_from_tensor", payload, "update from tensor")

    def update_weights_from_disk(self, model_path: str, version: str | None = None) -> None:
        """Reload the weights from the HF checkpoint directory ``model_path``."""
        payload: dict[str, Any] = {"model_path": model_path}
        if version is not None:
            payload["weight_version"] = version
        out = self._request("POST", "/update_weights_from_disk", payload)
        if isinstance(out, dict) and not out.get("success", True):
            raise BackendError(
                f"SGLang could not load weights from {model_path}: {out.get('message')}"
            )

    def set_weight_version(self, version: str) -> None:
        """``/update_weight_version``: name the weights now served."""
        self._request(
            "POST", "/update_weight_version", {"new_version": version, "abort_all_requests": False}
        )

    def release_memory(self, tags: list[str] | None = None) -> None:
        """Free the GPU memory of weights / KV cache (colocated training runs meanwhile)."""
        self._request("POST", "/release_memory_occupation", {"tags": tags})

    def resume_memory(self, tags: list[str] | None = None) -> None:
        """Take the released GPU memory back."""
        self._request("POST", "/resume_memory_occupation", {"tags": tags})

    def close(self) -> None:
        """Close the HTTP connection pool (when this client made it)."""
        if self._own_http:
            self._http.close()


def _body(resp: httpx.Response) -> Any:
    if not resp.content:
        return None
    try:
        return resp.json()
    except ValueError:
        return resp.text


def _error_text(resp: httpx.Response) -> str:
    body = _body(resp)
    if isinstance(body, dict):
        err = body.get("error", body.get("message", body))
        if isinstance(err, dict):
            err = err.get("message", err)
        return str(err)[:300]
    return str(body)[:300]


class EngineClient:
    """Generation and weight loading over an in-process ``sglang.Engine`` (GPU only)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def health(self) -> None:
        """An in-process engine is up once constructed."""

    def generate_ids(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams
    ) -> list[tuple[list[int], list[float], str]]:
        """One completion per prompt, seeds per request (see :func:`request_seed`)."""
        seeds = [
            None if params.seed is None else request_seed(params.seed, i)
            for i in range(len(prompts))
        ]
        out = self.engine.generate(
            input_ids=[list(p) for p in prompts],
            sampling_params=[sampling_payload(params, s) for s in seeds],
            return_logprob=True,
        )
        done = [parse_output(item) for item in out]
        return [(c.ids, c.logprobs, c.finish) for c in done]

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
    """Chat completions with log-probs through one client, in input order."""
    tool_list = list(tools) if tools is not None else [None] * len(conversations)
    prompts = [
        render_prompt(tokenizer, c, t, params.enable_thinking)
        for c, t in zip(conversations, tool_list, strict=True)
    ]
    out = []
    for prompt, (ids, logprobs, finish) in zip(
        prompts, client.generate_ids(prompts, params), strict=True
    ):
        out.append(Generation(decode(tokenizer, ids), prompt, ids, logprobs, finish))  # type: ignore[arg-type]
    return out


def decode(tokenizer: Any, ids: Sequence[int]) -> str:
    """The completion's text without special tokens (the end-of-turn token)."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    return tokenizer.decode([i for i in ids if i not in special], skip_special_tokens=True)


__all__ = [
    "Completion",
    "EngineClient",
    "RolloutError",
    "SGLangClient",
    "generate_chat",
    "launch_engine",
    "parse_output",
    "request_seed",
    "sampling_payload",
]
