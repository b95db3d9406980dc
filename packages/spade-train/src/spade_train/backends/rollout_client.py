"""Rollouts on SGLang servers: one request per conversation, many in flight at once.

:class:`RolloutClient` runs in the driver (it holds no GPU): it renders each conversation with
the policy's tokenizer, fits it into the server's context, and submits it as its own request
with its own seed (:func:`~spade_train.backends.sglang.request_seed` of the call's seed and the
conversation's index) and a time limit sized to the tokens it asks for. Requests go to the
router when there is one, else to the servers in turn. A request that fails in a way a retry
can cure (an abort during a weight update, a server that died, a timeout) goes to the next
server, at most ``retries`` more times; the rest come back as typed
:class:`~spade_train.errors.RolloutError` values, one per failed conversation, so one bad
request never costs the batch.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from spade_train.backends.render import render_prompt
from spade_train.backends.sglang import Completion, SGLangClient, decode, request_seed
from spade_train.errors import (
    GenerationAborted,
    PromptTooLong,
    RolloutError,
    RolloutTimeout,
    StaleWeights,
)
from spade_train.types import Generation, Message, SamplingParams

RETRYABLE = (GenerationAborted, RolloutTimeout)
"""Failures another try can cure; a plain ``RolloutError`` (server down) is retried too."""


@dataclass(frozen=True)
class RequestTiming:
    """A request's time limit: ``base_s + per_token_s * max_new_tokens``, at most ``max_s``."""

    base_s: float = 60.0
    per_token_s: float = 0.05
    max_s: float = 3600.0

    def limit(self, max_new_tokens: int) -> float:
        return min(self.max_s, self.base_s + self.per_token_s * max_new_tokens)


def fit_prompt(
    prompt: list[int], max_new_tokens: int, context_length: int | None
) -> tuple[list[int], int, bool]:
    """``(prompt, max_new_tokens, truncated)`` that fit ``context_length`` tokens.

    As the local backend does: a prompt longer than the context less the requested tokens
    keeps its last tokens (at least 16); then the requested tokens shrink to what is left.
    :class:`PromptTooLong` when nothing is left to generate.
    """
    if context_length is None:
        return prompt, max_new_tokens, False
    budget = max(16, context_length - max_new_tokens)
    truncated = len(prompt) > budget
    if truncated:
        prompt = prompt[-budget:]
    room = context_length - len(prompt)
    if room < 1:
        raise PromptTooLong(
            f"a prompt of {len(prompt)} tokens leaves no room in a context of {context_length}; "
            "lower max_new_tokens or raise backend.max_seq_len"
        )
    return prompt, min(max_new_tokens, room), truncated


class RolloutClient:
    """Per-request submission to SGLang servers (or their router); see the module doc."""

    def __init__(
        self,
        urls: Sequence[str],
        tokenizer: Any,
        context_length: int | None = None,
        router_url: str | None = None,
        concurrency: int = 256,
        timing: RequestTiming | None = None,
        retries: int = 3,
    ) -> None:
        self.tokenizer = tokenizer
        self.context_length = context_length
        self.timing = timing or RequestTiming()
        self.retries = retries
        self.expected_version: str | None = None
        """Answers must carry this weight version (set by each publish); None: unchecked."""
        self.truncated_prompts = 0
        self.retried = 0
        self._http = httpx.Client(
            timeout=self.timing.max_s,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="rollout")
        self._lock = threading.Lock()
        self._calls = itertools.count()
        self.router = SGLangClient(router_url, http=self._http) if router_url else None
        self.servers: list[SGLangClient] = []
        self.set_servers(urls)

    def set_servers(self, urls: Sequence[str]) -> None:
        """The servers requests go to (after a restart moved one); order is kept."""
        with self._lock:
            self.servers = [SGLangClient(u, http=self._http) for u in urls]

    def _target(self, index: int, attempt: int) -> SGLangClient:
        with self._lock:
            if self.router is not None:
                return self.router
            if not self.servers:
                raise RolloutError("no SGLang server is up")
            return self.servers[(index + attempt) % len(self.servers)]

    def _one(
        self,
        index: int,
        rid: str,
        prompt: list[int],
        params: SamplingParams,
        seed: int | None,
        max_new: int,
    ) -> Completion | RolloutError:
        last: RolloutError | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                with self._lock:
                    self.retried += 1
                time.sleep(min(2.0, 0.1 * 2**attempt))
            try:
                return self._target(index, attempt).generate_one(
                    prompt,
                    params,
                    seed=seed,
                    rid=f"{rid}-{attempt}",
                    timeout_s=self.timing.limit(max_new),
                    expected_version=self.expected_version,
                    max_new_tokens=max_new,
                )
            except (PromptTooLong, StaleWeights) as exc:
                return exc
            except RolloutError as exc:  # aborted, timed out, or the server is unreachable
                last = exc
        assert last is not None
        return last

    def generate_each(
        self,
        conversations: Sequence[Sequence[Message]],
        params: SamplingParams,
        tools: Sequence[Sequence[dict[str, Any]] | None] | None = None,
        indices: Sequence[int] | None = None,
    ) -> list[Generation | RolloutError]:
        """One result per conversation, in order: a Generation, or the typed failure.

        ``indices``: each conversation's place in its batch (its seed comes from it; a retry
        of some conversations keeps their seeds); default ``0..n-1``."""
        tool_list = list(tools) if tools is not None else [None] * len(conversations)
        call = next(self._calls)
        jobs: list[Any] = []
        places = list(indices) if indices is not None else list(range(len(conversations)))
        for i, conv, tool in zip(places, conversations, tool_list, strict=True):
            prompt = render_prompt(self.tokenizer, conv, tool, params.enable_thinking)
            try:
                prompt, max_new, cut = fit_prompt(
                    prompt, params.max_new_tokens, self.context_length
                )
            except PromptTooLong as exc:
                jobs.append((prompt, exc))
                continue
            self.truncated_prompts += cut
            seed = None if params.seed is None else request_seed(params.seed, i)
            rid = f"spade-{call}-{i}-{time.time_ns()}"
            jobs.append(
                (prompt, self._pool.submit(self._one, i, rid, prompt, params, seed, max_new))
            )
        out: list[Generation | RolloutError] = []
        for prompt, job in jobs:
            done = job if isinstance(job, RolloutError) else job.result()
            if isinstance(done, RolloutError):
                out.append(done)
            else:
                text = decode(self.tokenizer, done.ids)
                out.append(Generation(text, prompt, done.ids, done.logprobs, done.finish))
        return out

    def close(self) -> None:
        """Stop the submission threads and close the connection pool."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()
