"""The one OpenAI-compatible chat client of SPADE, on the official ``openai`` SDK.

Every package that talks to an OpenAI-compatible server goes through :class:`Endpoint`: the
``openai`` agent of ``spade-envs play``, spade-eval's :class:`~spade_eval.OpenAIClient`, and in
spade-train the hint endpoint, the LLM validator and the fixed-model evaluation.

**Base URL (the one convention).** Pass the server root (``http://127.0.0.1:8000``) or a URL
with a path (``http://127.0.0.1:8000/v1``, ``https://api.openai.com/v1``). A root gets ``/v1``
appended; a URL with a path is kept as it is (trailing ``/`` dropped). The result is what the
SDK expects, and requests go to ``{base_url}/chat/completions``.

**Key.** ``api_key`` when given, else the environment variable ``api_key_env``
(``OPENAI_API_KEY``), else ``"EMPTY"``: local servers ignore it, so none is needed for them.

**Retries and timeouts are the SDK's.** ``timeout_s`` bounds each HTTP attempt; a connection
error, a timeout, HTTP 408, 409, 429 or 5xx is tried again up to ``max_retries`` times with the
SDK's exponential backoff (0.5 s doubling to 8 s, with jitter; a ``Retry-After`` header from the
server wins). Any other HTTP error is final at once. A call that fails for good raises one
:class:`~spade_envs.errors.EndpointError` whose one-line message names the URL and the cause.

The SDK is an optional extra of spade-envs (``pip install 'spade-envs[endpoint]'``), imported
when the first endpoint is made.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from .chat import Message
from .errors import EndpointError, EndpointUnavailableError

__all__ = ["Endpoint", "normalise_base_url", "SDK_SAMPLING_KEYS"]

SDK_SAMPLING_KEYS = frozenset(
    {"temperature", "top_p", "max_tokens", "seed", "stop", "n", "presence_penalty",
     "frequency_penalty", "logit_bias", "logprobs", "top_logprobs"}
)  # fmt: skip
"""Sampling options passed to the SDK by name; any other (``top_k``, ``min_p``,
``repetition_penalty``: vLLM's and SGLang's extensions) goes in the request body as it is."""


def normalise_base_url(url: str) -> str:
    """The SDK's base URL for ``url``: a server root gets ``/v1``; a URL with a path is kept
    (without a trailing ``/``). Raises EndpointError for a URL that is not http(s)."""
    text = url.strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise EndpointError(
            f"{url!r}: not an http:// or https:// URL of an OpenAI-compatible server"
        )
    return text if parts.path else text + "/v1"


def _sdk() -> Any:
    try:
        import openai
    except ImportError:
        raise EndpointUnavailableError(
            "an OpenAI-compatible endpoint needs the openai SDK: pip install 'spade-envs[endpoint]'"
        ) from None
    return openai


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


class Endpoint:
    """Chat completions from one OpenAI-compatible server (see the module docstring for the
    base-URL convention, the key, the retries and the errors).

    ``complete`` asks once; ``complete_many`` asks for many chats with up to ``concurrency``
    calls in flight and returns the replies in order; ``try_many`` does the same but puts each
    failure in its chat's place instead of raising. ``requests`` counts the HTTP attempts
    sent, retries included. Thread-safe; close it (or use it as a context manager) to free
    its connections.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int = 2,
        concurrency: int = 8,
    ) -> None:
        if concurrency < 1 or max_retries < 0 or timeout_s <= 0:
            raise ValueError(
                f"endpoint needs concurrency >= 1, max_retries >= 0 and timeout_s > 0; got "
                f"{concurrency}, {max_retries}, {timeout_s}"
            )
        self.base_url = normalise_base_url(base_url)
        self.url = self.base_url + "/chat/completions"
        self.model = model
        self.timeout_s, self.max_retries, self.concurrency = timeout_s, max_retries, concurrency
        self.requests = 0
        self._lock = threading.Lock()
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        openai = _sdk()
        self._errors = openai
        http = openai.DefaultHttpxClient(event_hooks={"request": [self._sent]})
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=key or "EMPTY",
            timeout=timeout_s,
            max_retries=max_retries,
            http_client=http,
        )

    def _sent(self, request: Any) -> None:
        with self._lock:
            self.requests += 1

    def complete(self, messages: Sequence[Message], **sampling: Any) -> str:
        """The assistant's reply to ``messages`` (``""`` when the server sent no content);
        ``sampling`` holds ``temperature``, ``max_tokens``, ``top_p``, ``seed``... ."""
        named = {k: v for k, v in sampling.items() if k in SDK_SAMPLING_KEYS}
        extra = {k: v for k, v in sampling.items() if k not in SDK_SAMPLING_KEYS}
        try:
            completion = self._client.chat.completions.create(
                model=self.model, messages=list(messages), extra_body=extra or None, **named
            )
        except self._errors.OpenAIError as exc:
            raise EndpointError(self._cause(exc)) from None
        try:
            return completion.choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError):
            body = _one_line(str(completion))
            raise EndpointError(f"{self.url}: not a chat completion: {body}") from None

    def complete_many(
        self, conversations: Sequence[Sequence[Message]], **sampling: Any
    ) -> list[str]:
        """The replies to ``conversations`` in order; raises the first chat's EndpointError."""
        out = self.try_many(conversations, **sampling)
        for reply in out:
            if isinstance(reply, EndpointError):
                raise reply
        return [r for r in out if isinstance(r, str)]

    def try_many(
        self, conversations: Sequence[Sequence[Message]], **sampling: Any
    ) -> list[str | EndpointError]:
        """One reply or one EndpointError per conversation, in order (never raises for a call)."""

        def one(messages: Sequence[Message]) -> str | EndpointError:
            try:
                return self.complete(messages, **sampling)
            except EndpointError as exc:
                return exc

        if len(conversations) <= 1:
            return [one(m) for m in conversations]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(conversations))) as pool:
            return list(pool.map(one, conversations))

    def _cause(self, exc: Exception) -> str:
        """One line: the URL, then why the call failed (and after how many attempts)."""
        e = self._errors
        tries = f"failed after {self.max_retries + 1} attempts"
        if isinstance(exc, e.APITimeoutError):  # before APIConnectionError: it is one
            return f"{self.url}: {tries}: no answer within {self.timeout_s:g} s"
        if isinstance(exc, e.APIConnectionError):
            why = _one_line(str(exc.__cause__ or exc))
            return f"{self.url}: {tries}: cannot connect ({why or type(exc).__name__})"
        if isinstance(exc, e.APIStatusError):
            status = exc.status_code
            body = _one_line(exc.response.text)
            if status in (408, 409, 429) or status >= 500:  # the SDK retried these
                return f"{self.url}: {tries}: HTTP {status}: {body}"
            return f"{self.url}: HTTP {status}: {body}"
        return f"{self.url}: not a chat completion: {_one_line(str(exc))}"

    def close(self) -> None:
        """Free the connections."""
        self._client.close()

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Endpoint({self.base_url!r}, model={self.model!r})"
