"""`spade experiment rq1-mini`: planning, equal budgets, held-out disjointness, the t-interval
against scipy, run states for resuming, the results table and plot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from spade_train import experiment as ex
from spade_train.cli import main
from spade_train.cycle import regret_quantiles


@pytest.mark.parametrize(
    "values",
    [[0.1, 0.3, 0.2], [0.0, 1.0], [0.25, 0.31, 0.4, 0.22, 0.5], [1.0, 1.0, 1.5, -2.0]],
)
def test_t_interval_matches_scipy(values: list[float]) -> None:
    mean, lo, hi = ex.t_interval(values)
    want = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert mean == pytest.approx(np.mean(values))
    assert (lo, hi) == pytest.approx(want, abs=1e-9)


def test_t_interval_of_one_seed_has_no_bounds() -> None:
    mean, lo, hi = ex.t_interval([0.4])
    assert mean == 0.4 and math.isnan(lo) and math.isnan(hi)


@pytest.mark.parametrize("regrets", [[0.5], [0.0, 0.2], [0.3, -0.1, 0.7, 0.25, 0.0]])
def test_regret_quantiles_match_numpy(regrets: list[float]) -> None:
    got = regret_quantiles(regrets)
    for q in (10, 50, 90):
        assert got[f"reward/regret_p{q}"] == pytest.approx(np.percentile(regrets, q))
    assert regret_quantiles([]) == {}


def test_plan_budgets_are_equal_across_arms(tmp_path: Path) -> None:
    runs = ex.plan("tiny", 3, tmp_path)
    assert len(runs) == 15 and {r.arm for r in runs} == set(ex.ARMS)
    shared = ex.check_budgets(runs)
    assert shared["cycles"] == 1 and shared["envs_per_cycle"] == 6
    mini = ex.plan("mini", 1, tmp_path)
    assert {r.cycles for r in mini} == {ex.SIZES["mini"]} and ex.SIZES["mini"] > 1
    assert ex.check_budgets(mini)["cycles"] == ex.SIZES["mini"]  # the untrained arm: no budget


def test_every_arm_starts_and_is_scored_alike(tmp_path: Path) -> None:
    """Every arm starts from the same warmed weights (the cold start runs in every mode, with
    the same settings, so one cached warm-up serves them all), and every arm plays the held-out
    games the same way: no hinted plays, the same held-out corpus and schedule."""
    from spade_train.cold_start import designer_pairs
    from spade_train.config import load_recipe

    cfgs = {r.arm: load_recipe("quickstart", r.overrides()) for r in ex.plan("tiny", 1, tmp_path)}
    assert not load_recipe("quickstart", ["mode=fixed-rlve"]).cold_start_applies  # alone: no
    assert all(c.cold_start_applies for c in cfgs.values())
    assert len({json.dumps(designer_pairs(c)) for c in cfgs.values()}) == 1
    assert len({c.cold_start.model_dump_json() for c in cfgs.values()}) == 1
    assert {(c.fixed.corpus, c.fixed.split) for c in cfgs.values() if c.mode != "spade"} == {
        (ex.STATIC_CORPUS, "train"),
        ("starter", "train"),
    }
    assert {
        (c.eval.heldout, c.eval.heldout_every, c.eval.heldout_hints) for c in cfgs.values()
    } == {(ex.HELDOUT_CORPUS, 1, False)}
    # held-out play: the same episodes per game and the same seeds (seed, cycle) in every arm,
    # the untrained arm's one training game a cycle included
    assert {(c.agent.episodes_per_env, c.agent.batch_episodes) for c in cfgs.values()} == {
        (4, None)
    }
    assert {(c.seed, c.cycles) for c in cfgs.values()} == {(0, 1)}
    assert cfgs[ex.UNTRAINED].agent.envs_per_cycle == 1
    assert cfgs["spade"].agent.hint_plays_per_env > 0  # training still plays hinted episodes


def test_unequal_budget_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arms = {**ex.ARMS, "short": ["mode=spade", "agent.episodes_per_env=2"]}
    monkeypatch.setattr(ex, "ARMS", arms)
    with pytest.raises(ValueError, match="arm short budget"):
        ex.check_budgets(ex.plan("tiny", 1, tmp_path, ["spade", "short"]))


def test_plan_refuses_unknown_size_and_arm(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown size"):
        ex.plan("huge", 3, tmp_path)
    with pytest.raises(ValueError, match="unknown arm"):
        ex.plan("tiny", 3, tmp_path, ["spade", "bogus"])


def test_heldout_games_are_disjoint_from_static_corpus() -> None:
    assert ex.TRAIN_CORPORA == (ex.STATIC_CORPUS, "starter")  # both fixed arms' games checked
    assert ex.heldout_disjoint() == 6


def _write_rows(run: ex.Run, rows: list[dict[str, object]]) -> None:
    run.run_dir.mkdir(parents=True, exist_ok=True)
    (run.run_dir / "config.yaml").write_text("name: quickstart\n")
    (run.run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_states_collect_and_table(tmp_path: Path) -> None:
    runs = ex.plan("tiny", 3, tmp_path, ["spade", "no-training"])
    assert {ex.state(r) for r in runs} == {"new"}
    values = {"spade": [0.2, 0.3, 0.4], "no-training": [0.1, 0.1, 0.25]}
    for r in runs:
        row = {"cycle": 1, ex.METRIC: values[r.arm][r.seed], "heldout/episodes": 48}
        _write_rows(r, [{**row, "time/cycle_s": 10.0, "play/return_nohint": 0.1}])
    partial = ex.Run("spade", 9, 1, tmp_path)
    _write_rows(partial, [])
    assert ex.state(partial) == "partial"
    assert {ex.state(r) for r in runs} == {"finished"}
    results = ex.collect(runs)
    assert results["spade"]["values"] == [0.2, 0.3, 0.4] and results["spade"]["episodes"] == 144
    md = ex.table(results)
    lo, hi = stats.t.interval(0.95, 2, loc=0.3, scale=stats.sem([0.2, 0.3, 0.4]))
    assert f"0.300 [{lo:.3f}, {hi:.3f}]" in md and "| no training | 3 |" in md
    diffs = [0.1, 0.2, 0.15]  # SPADE minus no training, seed by seed
    lo, hi = stats.t.interval(0.95, 2, loc=0.15, scale=stats.sem(diffs))
    assert f"| no training | 3 | +0.150 [{lo:+.3f}, {hi:+.3f}] | +0.100, +0.200, +0.150 |" in md
    ex.write_results(runs, tmp_path)
    assert (tmp_path / "rq1.png").stat().st_size > 1000
    assert "SPADE self-play" in (tmp_path / "results.md").read_text()


def test_finished_run_is_not_rerun(tmp_path: Path) -> None:
    run = ex.Run("spade", 0, 1, tmp_path)
    _write_rows(run, [{"cycle": 1, ex.METRIC: 0.5}])
    assert ex.run_one(run) == 0  # nothing started: a training run would take minutes
    assert json.loads((run.run_dir / "metrics.jsonl").read_text())[ex.METRIC] == 0.5


def test_cli_dry_run_prints_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["experiment", "rq1-mini", "--dry-run", "--root", str(tmp_path), "--seeds", "3"])
    out = capsys.readouterr().out
    assert rc == 0 and "15 runs" in out and "'cycles': 1" in out and "disjoint" in out
    bad = main(["experiment", "rq1-mini", "--dry-run", "--root", str(tmp_path), "--arms", "x"])
    assert bad == 2


def test_wall_times_keep_whole_runs_only(tmp_path: Path) -> None:
    root = tmp_path / "tiny"
    ex.record_wall(root, ex.Run("spade", 0, 1, root), "new", 130.25)
    ex.record_wall(root, ex.Run("spade", 1, 1, root), "partial", 12.0)  # resumed: not whole
    ex.record_wall(root, ex.Run("no-training", 0, 1, root), "new", 50.0)
    ex.record_wall(root, ex.Run("no-training", 0, 1, root), "new", 48.5)  # a rerun replaces
    assert ex.read_walls(root) == {("spade", 0): 130.25, ("no-training", 0): 48.5}
    assert ex.read_walls(tmp_path / "none") == {}


def test_a_finished_run_drops_its_optimizer_state_only(tmp_path: Path) -> None:
    done, going = ex.Run("spade", 0, 1, tmp_path), ex.Run("spade", 1, 2, tmp_path)
    for run in (done, going):
        _write_rows(run, [{"cycle": 1, ex.METRIC: 0.5}])
        ckpt = run.run_dir / "checkpoints" / "cycle_0001"
        (ckpt / "policy").mkdir(parents=True)
        (ckpt / "policy" / "model.safetensors").write_bytes(b"w" * 10)
        (ckpt / "policy.trainer.pt").write_bytes(b"o" * 20)
    assert ex.drop_optimizer_state(done) == 20 and ex.drop_optimizer_state(going) == 0
    assert not (done.run_dir / "checkpoints/cycle_0001/policy.trainer.pt").exists()
    assert (done.run_dir / "checkpoints/cycle_0001/policy/model.safetensors").exists()
    assert (going.run_dir / "checkpoints/cycle_0001/policy.trainer.pt").exists()  # resumes
