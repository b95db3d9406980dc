"""The Megatron world: its layout (the same object the dry run prints and the launch starts),
the torchrun environment of each rank, node-grouped rank order; and real worlds of two ranks
on CPU (gloo, one Ray actor per rank): tensor parallel with sequence parallel, and expert
parallel over two data-parallel ranks, each against a world of one on the same weights."""

from __future__ import annotations

import os
import socket

import pytest
from spade_train.backends import BackendError
from spade_train.backends.megatron import MegatronBackend
from spade_train.backends.megatron_world import free_port, rank_order, torchrun_env, world_layout
from spade_train.config import list_recipes, load_recipe
from test_megatron import SMALL, batch, tiny_qwen3

pytest.importorskip("megatron.core", reason="megatron-core: pip install 'spade-train[megatron]'")


def test_the_layout_comes_from_the_options():
    lay = world_layout({"tensor_parallel": 4, "expert_parallel": 2, "sequence_parallel": True})
    assert (lay.world_size, lay.dp, lay.parallel.tp, lay.parallel.ep) == (8, 2, 4, 2)
    assert lay.plan()["parallel"] == {"tp": 4, "pp": 1, "ep": 2, "dp": 2, "sp": True}
    assert world_layout({"tensor_parallel": 2, "world_size": 8}).dp == 4
    # sequence parallelism splits a tensor-parallel group's sequence: off without one
    assert not world_layout({"sequence_parallel": True}).parallel.sequence_parallel
    assert world_layout({}).plan()["ranks"] == "in this process"
    with pytest.raises(BackendError, match="pipeline_parallel=2.*set pipeline_parallel: 1"):
        world_layout({"pipeline_parallel": 2})
    with pytest.raises(BackendError, match="not a multiple"):
        world_layout({"tensor_parallel": 2, "world_size": 3})


def _megatron_recipes() -> list[str]:
    def inner(name: str) -> str | None:
        backend = load_recipe(name).backend
        return backend.options.get("inner") if backend.name == "ray" else backend.name

    return [n for n in list_recipes() if inner(n) == "megatron"]


@pytest.mark.parametrize("name", _megatron_recipes())
def test_every_gpu_recipes_plan_is_the_world_its_launch_starts(name):
    cfg = load_recipe(name)
    plan = cfg.backend.plan()["inner"]
    kwargs = cfg.backend.backend_kwargs(cfg.seed)  # what the trainer actor passes the backend
    launched = world_layout(kwargs)
    assert (
        plan["world_size"] == launched.world_size
        and plan["parallel"] == launched.plan()["parallel"]
    )
    # every shared key the recipes set is honoured: kl_coef, tis_clip, dtype, ...
    assert plan["ignored"] == []
    assert plan["loss"]["tis_clip"] == cfg.backend.tis_clip
    assert plan["recompute"] == ("full layers" if cfg.backend.gradient_checkpointing else "off")


def test_the_spade_games_worlds():
    worlds = {
        s: load_recipe(f"spade-games-{s}").backend.plan()["inner"] for s in ("4b", "8b", "30b")
    }
    assert {s: (w["world_size"], w["parallel"]["dp"]) for s, w in worlds.items()} == {
        "4b": (8, 4), "8b": (8, 4), "30b": (8, 2)}  # fmt: skip
    assert worlds["30b"]["parallel"]["ep"] == 2 and worlds["8b"]["loss"]["reference_model"]


def test_each_rank_gets_the_environment_torchrun_gives_it():
    env = torchrun_env(5, 8, 1, 4, "10.0.0.2", 29500)
    assert env == {"MASTER_ADDR": "10.0.0.2", "MASTER_PORT": "29500", "RANK": "5",
                   "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}  # fmt: skip


def test_ranks_of_one_node_are_consecutive():
    # actors came up on nodes a, b, a, b: ranks 0-1 on a, 2-3 on b (a tensor-parallel pair
    # of consecutive ranks stays inside one node)
    assert rank_order(["a", "b", "a", "b"]) == [(0, 0, 2), (2, 0, 2), (1, 1, 2), (3, 1, 2)]
    assert rank_order(["x"]) == [(0, 0, 1)]


def test_free_port_can_be_bound():
    port = free_port()
    with socket.socket() as s:
        s.bind(("", port))  # nothing holds it


# -- worlds of two ranks (gloo on CPU, one Ray actor per rank) ---------------------------------
@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="ray: pip install 'spade-train[ray]'")
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _run(backend: MegatronBackend, rows: list[list[int]]) -> dict:
    """Log-probs, two train steps, greedy generations and the exported weights."""
    from spade_train.types import SamplingParams

    try:
        out = {"describe": backend.ranks.call("describe"), "logprobs": backend.logprobs(rows)}
        chats = [[{"role": "user", "content": "t5 t9"}], [{"role": "user", "content": "t7"}]]
        greedy = SamplingParams(max_new_tokens=4, temperature=0.0)
        out["generate"] = [g.completion_ids for g in backend.generate(chats, greedy)]
        out["steps"] = [backend.train_step(batch()) for _ in range(2)]
        out["weights"] = {k: v for b in backend.export_hf_buckets(1 << 16) for k, v in b}

        def sink(bucket: list) -> None:  # nested: pickled by value into the rank's process
            assert os.environ["RANK"] == "0" and all(t.is_contiguous() for _, t in bucket)

        out["pushed"] = backend.push_hf_buckets(sink, 1 << 16)
        return out
    finally:
        backend.close()


def _compare(world: dict, one: dict) -> None:
    gap = max(abs(a - b) for r, s in zip(world["logprobs"], one["logprobs"], strict=True)
              for a, b in zip(r, s, strict=True))  # fmt: skip
    assert gap < 1e-5
    assert world["generate"] == one["generate"]
    for a, b in zip(world["steps"], one["steps"], strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5, abs=1e-7)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-5)
        assert a["tokens"] == b["tokens"]
    assert sorted(world["weights"]) == sorted(one["weights"])
    assert world["pushed"] == one["pushed"] == len(one["weights"])
    for k, v in one["weights"].items():
        diff = (world["weights"][k] - v).abs()
        assert float(diff.mean()) < 1e-6 and float(diff.max()) < 1e-4, k


OPTS = dict(device="cpu", lr=1e-2, kl_coef=0.05, tis_clip=2.0, micro_batch_size=2, seed=0)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_tensor_parallel_two_ranks_equal_one(ray_cluster, tmp_path):
    model = str(tiny_qwen3(tmp_path / "m"))
    rows = [s.input_ids for s in batch()]
    one = _run(MegatronBackend(model=model, **OPTS), rows)
    two = _run(MegatronBackend(model=model, tensor_parallel=2, sequence_parallel=True, **OPTS),
               rows)  # fmt: skip
    ranks = two["describe"]
    assert [r["env"]["RANK"] for r in ranks] == ["0", "1"]
    assert {r["env"]["WORLD_SIZE"] for r in ranks} == {"2"} and {r["backend"] for r in ranks} == {
        "gloo"
    }
    assert len({r["env"]["MASTER_PORT"] for r in ranks}) == 1
    assert [r["env"]["LOCAL_RANK"] for r in ranks] == ["0", "1"]  # one node
    assert [r["tp"] for r in ranks] == [(0, 2), (1, 2)] and ranks[0]["tp_group"] == [0, 1]
    assert [r["dp"] for r in ranks] == [(0, 1), (0, 1)]
    _compare(two, one)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_expert_parallel_over_two_data_parallel_ranks_equals_one(ray_cluster, tmp_path):
    model = str(tiny_qwen3(tmp_path / "moe", moe=True))
    rows = [s.input_ids for s in batch()]
    one = _run(MegatronBackend(model=model, **OPTS), rows)
    two = _run(MegatronBackend(model=model, expert_parallel=2, **OPTS), rows)
    ranks = two["describe"]
    assert [r["ep"] for r in ranks] == [(0, 2), (1, 2)]
    assert [r["dp"] for r in ranks] == [(0, 2), (1, 2)] and ranks[0]["dp_group"] == [0, 1]
    assert [r["tp"] for r in ranks] == [(0, 1), (0, 1)]
    # the export gathers each rank's experts under their global numbers
    experts = {k for k in two["weights"] if ".mlp.experts." in k}
    assert len(experts) == SMALL["num_hidden_layers"] * 4 * 3
    _compare(two, one)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_world_that_cannot_start_says_why_and_leaves_nothing(ray_cluster, tmp_path):
    model = tiny_qwen3(tmp_path / "m")
    (model / "model.safetensors").unlink()
    with pytest.raises(BackendError) as info:
        MegatronBackend(model=str(model), tensor_parallel=2, device="cpu")
    message = str(info.value)
    assert "\n" not in message and "start failed on a rank" in message
    assert "no model.safetensors" in message
    states = {v["state"] for v in ray_cluster.util.placement_group_table().values()}
    assert "CREATED" not in states  # its placement group was removed
