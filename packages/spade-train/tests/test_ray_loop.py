"""The self-play loop on a real local Ray cluster (2 CPUs): the policy's trainer and rollout
workers as Ray actors (the local backend inside them) and validation on sandbox worker actors,
against the single-process run of the same recipe and seed."""

from __future__ import annotations

import json

import pytest
import torch

ray = pytest.importorskip("ray")

from spade_train.loop import resume_run, start_run  # noqa: E402
from test_loop import ForcedDesigner, good_reply, small, without_times  # noqa: E402

RAY = [
    "backend.name=ray",
    "backend.options={inner: local, num_rollout_workers: 1, worker_threads: 1,"
    " num_cpus_per_worker: 1}",
]


@pytest.fixture(scope="module", autouse=True)
def cluster():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the actors run one thread; same float reductions in the driver
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    torch.set_num_threads(threads)


def test_ray_loop_gives_the_single_process_metrics(tmp_path):
    local = small("quickstart", "cycles=2")
    rows_local = start_run(local, tmp_path / "local", progress=False).train()
    on_ray = small("quickstart", "cycles=2", *RAY, "validation.executor=ray", "agent.executor=ray")
    loop = start_run(on_ray, tmp_path / "ray", progress=False)
    rows_ray = loop.train()
    assert type(loop.backend).__name__ == "RayBackend"
    assert [r["cycle"] for r in rows_ray] == [1, 2]
    assert without_times(rows_ray) == without_times(rows_local)
    assert all(r["train/step"] == r["cycle"] for r in rows_ray)


def test_validation_on_sandbox_actors_gives_the_same_reports(tmp_path):
    def run(name, *extra):
        cfg = small("quickstart", "cycles=1", *extra)
        backend = ForcedDesigner(good_reply(), **cfg.backend.backend_kwargs(cfg.seed))
        loop = start_run(cfg, tmp_path / name, backend=backend, progress=False)
        return loop, loop.train()

    loop, rows_ray = run("ray", "validation.executor=ray")
    assert loop.res is not None
    (actors,) = [p for p in loop.res.pools if type(p).__name__ == "RaySandboxPool"]
    with pytest.raises(Exception, match="closed"):  # closed with the run
        actors.open_env("class XEnv: pass")
    _, rows_local = run("local")
    assert rows_ray[0]["design/valid"] == 1 and rows_ray[0]["design/reasons"] == {"duplicate": 1}
    assert without_times(rows_ray) == without_times(rows_local)
    designs = [
        [json.loads(x) for x in (tmp_path / n / "designs/cycle_0001.jsonl").read_text().splitlines()]
        for n in ("ray", "local")
    ]  # fmt: skip
    for ray_design, local_design in zip(*designs, strict=True):
        for d in (ray_design, local_design):  # wall times of the validation stages
            if d["report"]:
                d["report"].pop("wall_s")
                for key in ("structural_s", "runtime_s"):
                    d["report"]["checks"].pop(key, None)
        assert ray_design == local_design
    assert designs[0][0]["report"]["valid"] and designs[0][0]["report"]["checks"]["seeds"]


class Interrupt(Exception):
    pass


def test_overlapped_updates_give_every_row_and_resume_exactly(tmp_path):
    cfg = small("quickstart", "cycles=3", *RAY, "overlap=true")
    straight = start_run(cfg, tmp_path / "straight", progress=False).train()
    assert [r["cycle"] for r in straight] == [1, 2, 3]
    assert [r["train/step"] for r in straight] == [1, 2, 3]
    assert all("train/loss" in r and "time/update_wait_s" in r for r in straight)
    # cycle 1 trains on the same batch from the same weights as a run without overlap
    plain = start_run(small("quickstart", "cycles=1"), tmp_path / "plain", progress=False)
    assert without_times(straight[:1]) == without_times(plain.train())

    def stop_after_cycle_2(line: str) -> None:
        if line.startswith("cycle 1:"):  # logged after cycle 2's checkpoint, update 2 running
            raise Interrupt

    with pytest.raises(Interrupt):
        start_run(cfg, tmp_path / "killed", progress=False, log=stop_after_cycle_2).train()
    state = json.loads((tmp_path / "killed/checkpoints/cycle_0002/state.json").read_text())
    assert state["pending"]["row"]["cycle"] == 2 and state["pending"]["batch"]
    resumed = resume_run(tmp_path / "killed", progress=False).train()
    assert without_times(resumed) == without_times(straight)
