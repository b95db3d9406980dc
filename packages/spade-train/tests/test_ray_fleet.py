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
        call_timeout_s=900, worker_threads=1,
        sglang={"tp_size": 1, "sync": "distributed", "group_backend": "gloo",
                "module": "spade_standin_server", "env": standin_env(delay_s),
                "start_timeout_s": 900, "request_base_s": 300, "deterministic": True},
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


def _fleet_override(delay_s: float) -> list[str]:
    import json

    o = fleet_options(delay_s)
    keys = ("inner", "trainer_gpus", "rollout_gpus", "colocate", "cpus_per_gpu", "call_timeout_s",
            "worker_threads", "sglang")  # fmt: skip
    # quickstart's balanced_stop is the local backend's alone (SGLang stops at the first "}")
    return ["backend.name=ray", "backend.device=cpu", "backend.dtype=float32",
            "agent.sampling.balanced_stop=false",
            "backend.options=" + json.dumps({k: o[k] for k in keys})]  # fmt: skip


@pytest.mark.timeout(2400)
def test_a_node_lost_mid_cycle_costs_its_in_flight_work_never_the_run(cluster, tmp_path):
    from spade_train.backends.sglang import SGLangClient
    from spade_train.loop import start_run
    from test_loop import small, without_times

    c, nodes = cluster
    cfg = small("quickstart", "cycles=3", *_fleet_override(0.05))
    loop = start_run(cfg, tmp_path / "faulted", progress=False)
    removed = threading.Event()
    seen: dict[str, object] = {}

    def remove_mid_cycle_2() -> None:
        # the backend exists once training opens its resources; its fleet at the first update
        while getattr(loop.res and loop.res.backend, "fleet", None) is None:
            time.sleep(0.2)
        assert loop.res is not None
        backend = loop.res.backend
        fleet, layout = backend.fleet, backend.layout
        seen["fleet"] = fleet
        trainer_node = layout.trainer[0].node
        lone = next(i for i, span in enumerate(layout.engines) if span[0].node != trainer_node)
        victim = next(n for n in nodes if n.node_id.startswith(layout.engines[lone][0].node))
        url = fleet.servers[lone].url
        while not removed.is_set():
            try:
                info = SGLangClient(url, retries=0, timeout_s=5)._request("GET", "/server_info")
            except Exception:  # noqa: BLE001
                time.sleep(0.2)
                continue
            # cycle 2 (the weights of update 1 published) with a request in flight on that node
            if backend.publishes >= 2 and info["active"] > 0:
                print(
                    f"removing node {victim.node_id[:12]} at publish {backend.publishes}",
                    flush=True,
                )
                c.remove_node(victim)  # mid-generation: its requests are in flight
                seen["removed_at_publish"] = backend.publishes
                removed.set()
                nodes.remove(victim)
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=remove_mid_cycle_2, daemon=True)
    watcher.start()
    rows = loop.train()
    removed.set()
    assert [r["cycle"] for r in rows] == [1, 2, 3] and [r["train/step"] for r in rows] == [1, 2, 3]
    assert removed.is_set() and seen["removed_at_publish"] == 2  # during cycle 2
    fleet = seen["fleet"]
    assert fleet.client.retried > 0  # the lost node's requests went again, elsewhere
    lost_version = fleet.version
    nodes.append(c.add_node(num_cpus=1, num_gpus=2))  # a replacement node (main thread only)
    clean = start_run(cfg, tmp_path / "clean", progress=False).train()
    # nothing lost, nothing counted twice: the same rows as a run without the fault
    assert without_times(rows) == without_times(clean)
    assert lost_version == "4"  # the initial push and one per cycle
