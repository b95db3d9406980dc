"""The ray backend's GPU shape on a multi-node ``ray.cluster_utils.Cluster`` with logical GPUs:
per-GPU bundles in node order, SGLang servers launched by the backend (the stand-in engine in
place of SGLang's, same command line), weights pushed in memory (gloo in place of NCCL), and
faults: a server process killed, a server actor killed, a node removed in the middle of a cycle.
Each node has one CPU (two cores on the test machine)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import torch

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402
from spade_train.backends import make_backend  # noqa: E402
from spade_train.errors import PlacementError  # noqa: E402
from spade_train.types import SamplingParams, TrainSample  # noqa: E402
from standin_servers import standin_env  # noqa: E402

CHATS = [[{"role": "user", "content": f"Say {w}."}] for w in ("one", "two", "three", "four")]


def fleet_options(delay_s: float = 0.0, **over):
    opts = dict(
        model="tiny:qwen3", seed=0, lr=1e-2, device="cpu", dtype="float32", max_seq_len=2048,
        inner="local", trainer_gpus=1, rollout_gpus=2, colocate=False, cpus_per_gpu=0.25,
        call_timeout_s=180, worker_threads=1,
        sglang={"tp_size": 1, "sync": "distributed", "group_backend": "gloo",
                "module": "spade_standin_server", "env": standin_env(delay_s),
                "start_timeout_s": 180, "request_base_s": 60, "deterministic": True},
    )  # fmt: skip
    opts.update(over)
    return opts


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    nodes = [c.add_node(num_cpus=1, num_gpus=2) for _ in range(2)]
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    yield c, nodes
    ray.shutdown()
    c.shutdown()


def _samples(gens):
    out = []
    for i, g in enumerate(gens):
        n = len(g.prompt_ids)
        out.append(TrainSample(g.prompt_ids + g.completion_ids, [0] * n + [1] * len(g.completion_ids),
                               [0.0] * n + list(g.logprobs), 1.0 if i % 2 else -1.0, "agent"))  # fmt: skip
    return out


def test_a_placement_the_cluster_cannot_hold_is_one_line(cluster):
    with pytest.raises(PlacementError) as info:
        make_backend("ray", **fleet_options(trainer_gpus=8, rollout_gpus=8))
    assert "\n" not in str(info.value) and "needs 16 bundles" in str(info.value)


def test_servers_on_their_bundles_weights_in_memory_and_dead_servers_restarted(cluster):
    backend = make_backend("ray", **fleet_options())
    try:
        layout, fleet = backend.layout, backend.fleet
        trainer_node = layout.trainer[0].node
        assert [s.bundle for s in layout.trainer] and len(layout.engines) == 2
        assert len({s.node for span in layout.engines for s in span} | {trainer_node}) == 2
        assert fleet.version == "1" and fleet.client.expected_version == "1"
        params = SamplingParams(max_new_tokens=8, temperature=1.0, seed=3)
        first = backend.generate(CHATS, params)
        assert backend.generate(CHATS, params)[0].completion_ids == first[0].completion_ids
        backend.train_step(_samples(first))
        backend.publish_weights()
        assert fleet.version == "2"
        for url in fleet.urls():
            from spade_train.backends.sglang import SGLangClient

            assert SGLangClient(url).weight_version() == "2"  # each server got the push once
        reference = backend.generate(CHATS, params)
        assert [g.logprobs for g in reference] != [g.logprobs for g in first]
        # a server process killed: its requests go elsewhere, the actor starts it again and
        # it is brought to version 2 before it serves
        info = ray.get(fleet.servers[0].actor.info.remote())
        os.kill(int(info["pid"]), signal.SIGKILL)
        again = backend.generate(CHATS, params)
        assert [g.completion_ids for g in again] == [g.completion_ids for g in reference]
        backend.generate(CHATS, params)
        info2 = ray.get(fleet.servers[0].actor.info.remote())
        assert info2["launches"] == 2 and info2["url"] != info["url"]
        assert fleet.servers[0].version == "2"
        # a server actor killed: Ray restarts it on its bundle, the fleet catches it up
        ray.kill(fleet.servers[1].actor, no_restart=False)
        deadline = time.monotonic() + 120
        while fleet.restarts_seen < 2 and time.monotonic() < deadline:
            out = backend.generate(CHATS, params)
            assert [g.completion_ids for g in out] == [g.completion_ids for g in reference]
            time.sleep(1)
        assert fleet.restarts_seen >= 2 and all(s.version == "2" for s in fleet.servers)
    finally:
        backend.close()


def test_seeds_per_sample_keep_a_group_apart(cluster):
    backend = make_backend("ray", **fleet_options())
    try:
        group = backend.generate([CHATS[0]] * 8, SamplingParams(max_new_tokens=8, seed=1))
        assert len({tuple(g.completion_ids) for g in group}) > 1
    finally:
        backend.close()
