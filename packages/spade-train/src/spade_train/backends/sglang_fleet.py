"""The ray backend's SGLang engines: started on their bundles, fed weights, kept alive.

:class:`SGLangFleet` starts one :class:`~spade_train.backends.sglang_server.SGLangServerActor`
per engine of the placement (restarted by Ray, up to ``max_restarts``, when it or its node
dies), optionally a router, and a driver-side
:class:`~spade_train.backends.rollout_client.RolloutClient` that holds no GPU.

A publish (:meth:`SGLangFleet.publish`) pauses every live server (in-flight requests come back
aborted and are retried), has the trainer push the weights once to each server (in memory, or
from a shared directory), resumes, and reads each server's weight version back: every later
answer must carry it. A server that comes back after a restart, or answers with older weights,
is brought up to the last version before it serves again (:meth:`SGLangFleet.refresh`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import ray
from ray.exceptions import GetTimeoutError, RayError
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from spade_train.backends.placement import Layout
from spade_train.backends.rollout_client import RequestTiming, RolloutClient
from spade_train.backends.sglang import SGLangClient
from spade_train.backends.sglang_server import RouterActor, ServerSpec, SGLangServerActor
from spade_train.backends.weight_sync import ServerTarget, WeightPush
from spade_train.errors import BackendError, RolloutError, StaleWeights
from spade_train.types import Generation, Message, SamplingParams

SyncChoice = Literal["auto", "distributed", "tensor", "disk"]


@dataclass(frozen=True)
class FleetSettings:
    """How the fleet runs (from ``backend.options.sglang``)."""

    sync: SyncChoice = "auto"
    group_backend: str = "nccl"
    bucket_bytes: int = 512 << 20
    publish_dir: str | None = None
    router: bool = False
    concurrency: int = 256
    timing: RequestTiming = RequestTiming()
    max_restarts: int = 3
    call_timeout_s: float = 600.0
    env: tuple[tuple[str, str], ...] = ()


class _ServerHandle:
    def __init__(self, actor: Any, url: str | None) -> None:
        self.actor, self.url, self.version = actor, url, "0"
        self.pending: Any = None  # an unanswered url() call (the actor is restarting)

    def poll_url(self, wait_s: float) -> str | None:
        """The actor's URL, or None while it does not answer (restarting, node lost)."""
        if self.pending is None:
            self.pending = self.actor.url.remote()
        ready, _ = ray.wait([self.pending], timeout=wait_s)
        if not ready:
            return None
        ref, self.pending = self.pending, None
        try:
            return str(ray.get(ref))
        except RayError:
            return None


class SGLangFleet:
    """The SGLang servers of one backend and the client that feeds them."""

    def __init__(
        self,
        spec: ServerSpec,
        layout: Layout,
        pg: Any,
        gpu_share: float,
        tokenizer: Any,
        settings: FleetSettings,
        same_node_as_trainer: bool,
    ) -> None:
        self.spec, self.settings = spec, settings
        self.mode = _sync_mode(settings, same_node_as_trainer)
        env = {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1", **dict(settings.env)}
        remote: Any = ray.remote(SGLangServerActor)
        self.servers: list[_ServerHandle] = []
        for span in layout.engines:
            strategy = PlacementGroupSchedulingStrategy(pg, span[0].bundle)
            actor = remote.options(
                num_cpus=0,
                num_gpus=gpu_share,
                max_restarts=settings.max_restarts,
                scheduling_strategy=strategy,
                runtime_env={"env_vars": env},
            ).remote(spec, span[0].gpu, env)
            self.servers.append(_ServerHandle(actor, None))
        for i, s in enumerate(self.servers):
            s.url = self._get(
                s.actor.url.remote(), f"start of SGLang server {i}", spec.start_timeout_s
            )
        self.router: Any = None
        router_url = None
        if settings.router:
            self.router = (
                ray.remote(RouterActor)
                .options(num_cpus=0)
                .remote([s.url for s in self.servers], spec.python, spec.start_timeout_s)
            )
            router_url = self._get(self.router.url.remote(), "router start", spec.start_timeout_s)
        self.client = RolloutClient(
            [s.url for s in self.servers if s.url],
            tokenizer,
            spec.context_length,
            router_url,
            settings.concurrency,
            settings.timing,
        )
        self.version = spec.weight_version
        self.restarts_seen = 0

    def _get(self, ref: Any, what: str, timeout: float | None = None) -> Any:
        try:
            return ray.get(ref, timeout=timeout or self.settings.call_timeout_s)
        except GetTimeoutError as exc:
            raise BackendError(f"sglang fleet: {what} timed out; check `ray status`") from exc
        except RayError as exc:
            raise BackendError(f"sglang fleet: {what} failed: {str(exc).splitlines()[0]}") from exc

    # -- liveness -----------------------------------------------------------------------
    def refresh(self, push: Callable[[WeightPush], Any], wait_s: float = 2.0) -> list[int]:
        """Re-read every server's URL (a restarted actor has a new one), bring restarted or
        stale servers to the current version, and route requests to the live ones only.
        Returns the indices of the servers that are live."""
        live: list[int] = []
        behind: list[int] = []
        for i, s in enumerate(self.servers):
            url = s.poll_url(wait_s)
            if url is None:
                continue  # restarting (its bundle waits for a node) or gone: skip it for now
            if url != s.url:
                s.url, s.version = url, self.spec.weight_version
                self.restarts_seen += 1
            try:
                s.version = SGLangClient(url, timeout_s=wait_s, retries=0).weight_version() or ""
            except BackendError:
                continue
            live.append(i)
            if s.version != self.version:
                behind.append(i)
        if behind:
            self._push_to(behind, push)
        self.client.set_servers([self.servers[i].url or "" for i in live])
        return live

    # -- generation ---------------------------------------------------------------------
    def generate_each(
        self,
        conversations: Sequence[Sequence[Message]],
        params: SamplingParams,
        tools: Sequence[Sequence[dict[str, Any]] | None] | None,
        push: Callable[[WeightPush], Any],
    ) -> list[Generation | RolloutError]:
        """Every conversation once; servers that died or fell behind are dealt with between
        two rounds, and only the failed requests go again (at most twice)."""
        self.refresh(push)
        results = self.client.generate_each(conversations, params, tools)
        for _ in range(2):
            failed = [i for i, r in enumerate(results) if isinstance(r, RolloutError)]
            if not failed or all(_final(results[i]) for i in failed):
                break
            self.refresh(push)
            again = self.client.generate_each(
                [conversations[i] for i in failed],
                params,
                [tools[i] for i in failed] if tools is not None else None,
                indices=failed,  # each keeps the seed of its place in the batch
            )
            for i, r in zip(failed, again, strict=True):
                results[i] = r
        return results

    # -- weights ------------------------------------------------------------------------
    def publish(self, version: str, push: Callable[[WeightPush], Any]) -> None:
        """Make ``version`` the current weights: every live server is paused, sent them once,
        resumed and checked (:meth:`refresh` does it for each server behind); servers down now
        catch up when they are back. Every later answer must carry ``version``."""
        self.version = version
        self.refresh(push)
        self.client.expected_version = version

    def _push_to(self, indices: list[int], push: Callable[[WeightPush], Any]) -> None:
        clients = {i: SGLangClient(self.servers[i].url or "", timeout_s=60) for i in indices}
        for c in clients.values():
            c.pause("abort")
        try:
            targets = tuple(ServerTarget(c.url, self.spec.tp_size) for c in clients.values())
            job = WeightPush(
                self.mode,
                targets,
                self.version,
                self.settings.bucket_bytes,
                self.settings.group_backend,
                self.settings.publish_dir,
                self.settings.call_timeout_s,
            )
            if self.mode == "disk":
                self._check_shared(indices, job, push)
            push(job)
            for c in clients.values():
                c.flush_cache()
        finally:
            for c in clients.values():
                try:
                    c.resume()
                except BackendError:
                    pass
        for i, c in clients.items():
            got = c.weight_version()
            if got != self.version:
                raise StaleWeights(
                    f"SGLang server {c.url} serves weight version {got} after a push of "
                    f"{self.version}; see its log (ray logs) for the failed update"
                )
            self.servers[i].version = got

    def _check_shared(
        self, indices: list[int], job: WeightPush, push: Callable[[WeightPush], Any]
    ) -> None:
        """Disk sync: the trainer writes a marker into ``publish_dir``; the driver and every
        server must read it back, or the path is not shared (one-line error)."""
        from spade_train.backends.weight_sync import reads_marker

        token = uuid.uuid4().hex
        push(replace(job, mode="disk", version=f"marker:{token}"))
        where = {"the driver": reads_marker(str(job.publish_dir), token)}
        for i in indices:
            where[f"server {self.servers[i].url}"] = self._get(
                self.servers[i].actor.reads_marker.remote(job.publish_dir, token),
                "shared-path check",
            )
        missing = [k for k, ok in where.items() if not ok]
        if missing:
            raise BackendError(
                f"publish_dir {job.publish_dir} is not shared: {', '.join(missing)} cannot read "
                "what the trainer wrote there; mount one path on every node or use "
                "backend.options.sglang.sync: distributed"
            )

    def sleep(self) -> None:
        """Colocated with ``memory_saver``: free the servers' GPU memory (weights, KV cache)
        while the trainer steps on the same GPUs."""
        for s in self.servers:
            if s.url:
                try:
                    SGLangClient(s.url, timeout_s=120).release_memory(None)
                except BackendError:
                    pass  # a dead server holds no memory; refresh restarts it

    def wake(self) -> None:
        """Take the released memory back (before the next push reloads the weights)."""
        for s in self.servers:
            if s.url:
                try:
                    SGLangClient(s.url, timeout_s=120).resume_memory(None)
                except BackendError:
                    pass

    def urls(self) -> list[str | None]:
        return [s.url for s in self.servers]

    def close(self) -> None:
        self.client.close()
        for s in self.servers:
            try:
                ray.get(s.actor.stop.remote(), timeout=30)
            except RayError:
                pass
            try:
                ray.kill(s.actor, no_restart=True)
            except RayError:
                pass
        if self.router is not None:
            try:
                ray.kill(self.router, no_restart=True)
            except RayError:
                pass


def _final(result: Generation | RolloutError) -> bool:
    """A failure another round cannot cure (a prompt that does not fit)."""
    return isinstance(result, RolloutError) and result.kind == "prompt_too_long"


def _sync_mode(
    settings: FleetSettings, same_node: bool
) -> Literal["distributed", "tensor", "disk"]:
    if settings.sync == "auto":
        return "tensor" if same_node and settings.group_backend == "nccl" else "distributed"
    if settings.sync == "disk" and not settings.publish_dir:
        raise BackendError(
            "sglang sync: disk needs backend.options.sglang.publish_dir (a path every node mounts)"
        )
    return settings.sync
