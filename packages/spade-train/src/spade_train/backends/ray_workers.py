"""The actors of the ray backend's trainer and CPU rollout workers, and the bundle probe.

:class:`TrainerActor` owns the inner training backend (``local``, or ``megatron``, which starts
its own world of one actor per rank on the bundles it is given) and sends its weights to SGLang
servers when asked (:meth:`TrainerActor.push_weights`). :class:`LocalRolloutActor` is a
generation copy of the policy for CPU runs. :func:`probe_sites` asks every bundle of a placement
group which node and GPU it landed on.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ray

from spade_train.backends.placement import BundleSite
from spade_train.backends.ray_sandbox import prepare_process
from spade_train.backends.sglang import SGLangClient
from spade_train.backends.weight_sync import (
    NamedTensors,
    PushReport,
    WeightPush,
    iter_buckets,
    send_weights,
    shared_marker,
)
from spade_train.errors import BackendError
from spade_train.types import Generation, TrainSample

_MODULE_ATTRS = ("model", "policy", "module")


def torch_module(backend: Any) -> Any | None:
    """The ``torch.nn.Module`` a backend trains, when it exposes one (``.model`` and friends)."""
    for attr in _MODULE_ATTRS:
        module = getattr(backend, attr, None)
        if module is not None and hasattr(module, "state_dict"):
            return module
    return None


def _make(inner: str, options: dict[str, Any]) -> Any:
    from spade_train.backends import make_backend

    return make_backend(inner, **options)


class TrainerActor:
    """Owns the inner training backend."""

    def __init__(self, inner: str, options: dict[str, Any], threads: int | None, imp: str | None):
        prepare_process(threads, imp)
        self.backend = _make(inner, options)

    def ready(self) -> bool:
        return True

    def train_step(self, samples: list[TrainSample]) -> dict[str, float]:
        return self.backend.train_step(samples)

    def generate(self, conversations, params, tools) -> list[Generation]:
        return self.backend.generate(conversations, params, tools)

    def save(self, path: str) -> None:
        self.backend.save(Path(path))

    def load(self, path: str) -> None:
        self.backend.load(Path(path))

    def state_dict(self) -> dict[str, Any] | None:
        module = torch_module(self.backend)
        if module is None:
            return None
        return {k: v.detach().to("cpu").clone() for k, v in module.state_dict().items()}

    def hf_buckets(self, bucket_bytes: int) -> Iterator[NamedTensors]:
        """The weights as HF-named tensors in buckets: the inner backend's own export
        (``export_hf_buckets``, Megatron) or its torch module's ``state_dict`` (HF models)."""
        export = getattr(self.backend, "export_hf_buckets", None)
        if callable(export):
            return export(bucket_bytes)
        module = torch_module(self.backend)
        if module is None:
            raise BackendError(
                f"the inner backend {type(self.backend).__name__} exposes neither "
                "export_hf_buckets nor a torch module; it cannot feed SGLang servers"
            )
        return iter_buckets(module.state_dict().items(), bucket_bytes)

    def save_hf(self, path: str) -> None:
        """Write the weights as a Hugging Face checkpoint directory (temp dir, then rename)."""
        own = getattr(self.backend, "save_hf", None)
        if callable(own):
            own(path)
            return
        module = torch_module(self.backend)
        if module is None or not hasattr(module, "save_pretrained"):
            raise BackendError("the inner trainer can write no HF checkpoint for SGLang")
        target = Path(path)
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        module.save_pretrained(tmp)
        tokenizer = getattr(self.backend, "tokenizer", None)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)  # same directory, this process: atomic on its node

    def push_weights(self, push: WeightPush) -> PushReport:
        """Send the weights to ``push.targets`` (see :mod:`~spade_train.backends.weight_sync`).

        An inner backend with its own ``push_weights`` (a Megatron world sending from rank 0
        while the other ranks take part in the gathers) does it itself."""
        if push.mode == "disk":
            assert push.publish_dir is not None
            if push.version.startswith("marker:"):
                shared_marker(push.publish_dir, push.version.split(":", 1)[1])
                return PushReport()
            path = str(Path(push.publish_dir) / f"v{push.version}")
            self.save_hf(path)
            for t in push.targets:
                SGLangClient(t.url, timeout_s=push.timeout_s).update_weights_from_disk(
                    path, push.version
                )
            return PushReport(names=[path])
        own = getattr(self.backend, "push_weights", None)
        if callable(own):
            return own(push)
        return send_weights(self.hf_buckets(push.bucket_bytes), push)

    def close(self) -> None:
        self.backend.close()


class LocalRolloutActor:
    """A generation copy of the policy: an inner backend used only for ``generate``."""

    def __init__(self, inner: str, options: dict[str, Any], threads: int | None, imp: str | None):
        prepare_process(threads, imp)
        self.backend = _make(inner, options)

    def ready(self) -> bool:
        return True

    def generate(self, conversations, params, tools) -> list[Generation]:
        return self.backend.generate(conversations, params, tools)

    def set_weights(self, state: dict[str, Any]) -> None:
        module = torch_module(self.backend)
        if module is None:
            raise BackendError("the rollout backend exposes no torch module to load weights into")
        module.load_state_dict(state)
        self.backend.publish_weights()

    def load(self, path: str) -> None:
        self.backend.load(Path(path))

    def close(self) -> None:
        self.backend.close()


class _Probe:
    def where(self) -> tuple[str, int]:
        ctx = ray.get_runtime_context()
        gpus = ray.get_gpu_ids()
        return ctx.get_node_id()[:12], int(gpus[0]) if gpus else 0


def probe_sites(pg: Any, n_bundles: int, timeout_s: float) -> list[BundleSite]:
    """Which node and GPU each bundle of ``pg`` landed on."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    remote: Any = ray.remote(_Probe)
    probes = [
        remote.options(
            num_cpus=0, num_gpus=0.01, scheduling_strategy=PlacementGroupSchedulingStrategy(pg, i)
        ).remote()
        for i in range(n_bundles)
    ]
    try:
        where = ray.get([p.where.remote() for p in probes], timeout=timeout_s)
    finally:
        for p in probes:
            ray.kill(p)
    return [BundleSite(i, node, gpu) for i, (node, gpu) in enumerate(where)]
