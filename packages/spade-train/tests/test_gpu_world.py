"""Every GPU recipe's Megatron world is its trainer GPUs, computed by ``gpu_world`` (the dry
run's and the launch's), and a Ray cluster of logical GPUs places each GPU recipe family down to
the device boundary: placement group, each rank's torchrun environment, each SGLang command."""

from __future__ import annotations

import os
from typing import Any

import pytest
from spade_train.backends.gpu_world import gpu_world
from spade_train.backends.sglang_server import server_command
from spade_train.config import list_recipes, load_recipe
from spade_train.errors import RecipeError


def _gpu_recipes() -> list[str]:
    out = []
    for name in list_recipes():
        b = load_recipe(name).backend
        if b.name == "ray" and b.options.get("sglang") is not None:
            out.append(name)
    return out


GPU_RECIPES = _gpu_recipes()


def test_there_are_gpu_recipes_of_both_families() -> None:
    assert {"spade-games-4b", "spade-games-8b", "spade-games-30b"} <= set(GPU_RECIPES)


@pytest.mark.parametrize("name", GPU_RECIPES)
def test_every_gpu_recipes_world_is_its_gpu_shape(name: str) -> None:
    cfg = load_recipe(name)
    opts = cfg.backend.options
    world = gpu_world(opts)
    plan = cfg.backend.plan()
    par = plan["inner"]["parallel"]
    assert world.megatron is not None
    assert world.ranks == opts["trainer_gpus"] == plan["inner"]["world_size"]
    assert par["tp"] * par["pp"] * par["dp"] == world.ranks and par["dp"] % par["ep"] == 0
    assert plan["world"]["rollout_engines"]["count"] * par_engine(opts) == opts["rollout_gpus"]
    # the launch hands the trainer actor the same world (gpu_shape.start_trainer)
    assert cfg.backend.backend_kwargs(cfg.seed)["world_size"] == world.ranks


def par_engine(opts: dict[str, Any]) -> int:
    return int(opts["sglang"]["tp_size"])


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ("backend.options.inner_options.world_size=2", ("world_size=2", "trainer_gpus=8")),
        (
            "backend.options.inner_options.tensor_parallel=3",
            ("trainer_gpus=8", "tensor_parallel=3"),
        ),
    ],
)
def test_a_world_that_does_not_divide_the_gpus_is_refused_in_one_line(
    override: str, names: tuple[str, ...]
) -> None:
    with pytest.raises(RecipeError) as info:
        load_recipe("spade-games-4b", [override])
    msg = str(info.value)
    assert "\n" not in msg and all(n in msg for n in names) and "set " in msg


@pytest.fixture(scope="module")
def cluster():
    os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 8, "num_gpus": 8})
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


# one recipe per family: dense (TP 2 trainer, 8 engines of tp 1) and MoE (TP 4 x EP 2, one
# engine of tp 8); the other GPU recipes derive from these two with the same backend shape
FAMILIES = {
    "spade-games-4b": ((2, 4, 1), 8, 1),
    "spade-games-30b": ((4, 2, 2), 1, 8),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_cpu_cluster_places_the_recipe_down_to_the_device_boundary(cluster, name: str) -> None:
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from spade_train.backends.gpu_shape import server_spec
    from spade_train.backends.placement import assign, check_fits
    from spade_train.backends.ray import alive_nodes
    from spade_train.backends.ray_workers import probe_sites

    (tp, dp, ep), n_engines, engine_tp = FAMILIES[name]
    cfg = load_recipe(name)
    world = gpu_world(cfg.backend.options)
    check_fits(world.spec, alive_nodes())
    pg = placement_group(world.spec.bundles(), strategy="PACK")
    ray.get(pg.ready(), timeout=180)  # a loaded 2-core machine starts 8 actors slowly
    try:
        layout = assign(world.spec, probe_sites(pg, world.spec.n_bundles, 180))
    finally:
        remove_placement_group(pg)
    assert world.megatron is not None
    p = world.megatron.parallel
    assert (p.tp, world.megatron.dp, p.ep) == (tp, dp, ep)
    envs = world.rank_envs(layout, 29500)
    assert [e["RANK"] for e in envs] == [str(r) for r in range(8)]
    assert {(e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"], e["MASTER_PORT"]) for e in envs} == {
        ("8", "8", "29500")}  # fmt: skip
    assert [e["LOCAL_RANK"] for e in envs] == [str(r) for r in range(8)]
    assert len({e["MASTER_ADDR"] for e in envs}) == 1
    server = server_spec(
        {**cfg.backend.common(), **cfg.backend.backend_kwargs(cfg.seed)},
        cfg.backend.options["sglang"],
        resolve=False,
    )
    commands = [server_command(server, node, 30000 + i, base)
                for i, (node, base) in enumerate(world.engine_gpus(layout))]  # fmt: skip
    assert len(commands) == n_engines
    for i, cmd in enumerate(commands):
        assert cmd[cmd.index("--tp-size") + 1] == str(engine_tp)
        assert cmd[cmd.index("--base-gpu-id") + 1] == str(i * engine_tp)
