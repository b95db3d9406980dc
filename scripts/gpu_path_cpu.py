"""A GPU recipe's ray backend on CPU, down to the device boundary.

    uv run python scripts/gpu_path_cpu.py spade-games-4b [--engines N]

Starts a ``ray.cluster_utils.Cluster`` of nodes with 8 logical GPUs each (enough for the
recipe), then builds what the ray backend builds for the recipe, with the backend's own code:
the fit check, the per-GPU placement group, the bundle probe and node-ordered layout, the
SGLang server actors with the recipe's server command (the engine swapped for the stand-in
engine of the tests, ``--model-path`` for a tiny model), a trainer actor on rank 0's bundle, one
in-memory weight push (gloo in place of NCCL) and one batch of rollouts through the servers.
The Megatron world itself (``inner: megatron``, one actor per rank) is the megatron backend's
and needs megatron-core; here a ``local`` trainer stands in for it on rank 0's bundle, and the
other trainer bundles stay reserved. ``--engines N`` starts only the first N engines (each is a
process with its own copy of the tiny model).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "packages/spade-train/tests"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("recipe")
    ap.add_argument("--engines", type=int, default=None)
    args = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster
    from ray.util.placement_group import placement_group, remove_placement_group
    from spade_train.backends.gpu_shape import fleet_settings, server_spec
    from spade_train.backends.placement import Layout, PlacementSpec, assign, check_fits
    from spade_train.backends.ray import alive_nodes
    from spade_train.backends.ray_workers import TrainerActor, probe_sites
    from spade_train.backends.sglang_fleet import SGLangFleet
    from spade_train.backends.sglang_server import server_command
    from spade_train.config import load_recipe
    from spade_train.types import SamplingParams
    from standin_servers import standin_env

    cfg = load_recipe(args.recipe)
    opts = cfg.backend.typed_options()
    sg = opts.sglang.model_dump()
    spec = PlacementSpec(
        opts.trainer_gpus, opts.rollout_gpus, sg["tp_size"], opts.colocate, opts.cpus_per_gpu
    )
    print(f"== {args.recipe}: plan (the dry run's)")
    print(json.dumps(cfg.backend.plan(), indent=1, default=str))

    n_nodes = -(-spec.n_bundles // 8)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(n_nodes):
        cluster.add_node(num_cpus=1, num_gpus=8, resources={})
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    t0 = time.monotonic()
    try:
        check_fits(
            PlacementSpec(spec.trainer_gpus, spec.rollout_gpus, spec.engine_tp, spec.colocate, 0.1),
            alive_nodes(),
        )
        cpus = 1.0 / 8  # one logical CPU per node here; the recipe asks cpus_per_gpu on real nodes
        pspec = PlacementSpec(
            spec.trainer_gpus, spec.rollout_gpus, spec.engine_tp, spec.colocate, cpus
        )
        pg = placement_group(pspec.bundles(), strategy="PACK")
        ray.get(pg.ready(), timeout=120)
        layout = assign(pspec, probe_sites(pg, pspec.n_bundles, 120))
        print(f"== world: {pspec.n_bundles} bundles on {n_nodes} node(s) of 8 logical GPUs")
        for r, s in enumerate(layout.trainer):
            print(f"trainer rank {r}: bundle {s.bundle} node {s.node} GPU {s.gpu}")
        for e, span in enumerate(layout.engines):
            print(
                f"engine {e}: bundles {[s.bundle for s in span]} node {span[0].node} GPUs {[s.gpu for s in span]}"
            )
        local_opts = dict(model="tiny:qwen3", seed=cfg.seed, device="cpu", dtype="float32",
                          max_seq_len=cfg.backend.max_seq_len, lr=cfg.backend.lr)  # fmt: skip
        real = server_spec(
            {**cfg.backend.common(), **opts.flat(), "seed": cfg.seed}, sg, resolve=False
        )
        print("== server command of engine 0 (the recipe's):")
        print(" ".join(server_command(real, "<node-ip>", 30000, layout.engines[0][0].gpu)))
        # The stand-in engine joins a weight group as one rank, where SGLang joins one per GPU:
        # engines over several GPUs get their weights from a shared directory here (the disk
        # path, with its shared-directory check); one-GPU engines by a gloo broadcast.
        sync = "distributed" if sg["tp_size"] == 1 else "disk"
        standin_sg = {**sg, "module": "spade_standin_server", "group_backend": "gloo", "sync": sync,
                      "publish_dir": f"/tmp/spade-gpu-path-{args.recipe}",
                      "env": standin_env(), "start_timeout_s": 600, "memory_saver": False,
                      "deterministic": False, "extra_args": []}  # fmt: skip
        server = server_spec({**local_opts, "max_seq_len": 2048}, standin_sg)
        shown = Layout(layout.trainer, layout.engines[: args.engines or len(layout.engines)])
        trainer = ray.remote(TrainerActor).options(
            num_cpus=0, num_gpus=pspec.trainer_share(),
            scheduling_strategy=ray.util.scheduling_strategies.PlacementGroupSchedulingStrategy(pg, layout.trainer[0].bundle),
        ).remote("local", {**local_opts, "max_seq_len": 2048}, 1, None)  # fmt: skip
        ray.get(trainer.ready.remote(), timeout=600)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(server.model_path)
        fleet = SGLangFleet(server, shown, pg, pspec.engine_share(), tok,
                            fleet_settings(standin_sg, 600.0, 3), same_node_as_trainer=False)  # fmt: skip
        print(f"== engines started: {len(fleet.servers)} of {len(layout.engines)}")
        for i, s in enumerate(fleet.servers):
            info = ray.get(s.actor.info.remote())
            print(f"engine {i}: {info['url']} base_gpu_id {info['base_gpu_id']} pid {info['pid']}")
        push = lambda job: ray.get(trainer.push_weights.remote(job), timeout=600)  # noqa: E731
        fleet.publish("1", push)
        print(f"== weight push 1 ({fleet.mode}): versions {[s.version for s in fleet.servers]}")
        chats = [[{"role": "user", "content": "Say a number."}]] * 4
        out = fleet.generate_each(
            chats, SamplingParams(max_new_tokens=8, seed=cfg.seed), None, push
        )
        print(f"== rollouts: {len(out)} answers, weight version {fleet.client.expected_version}, "
              f"distinct samples in a group of 4 copies: {len({tuple(g.completion_ids) for g in out})}")  # fmt: skip
        fleet.close()
        ray.kill(trainer)
        remove_placement_group(pg)
        print(f"== done in {time.monotonic() - t0:.1f} s")
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
