"""Conformance with the released SPADE rollout (spade-rl/spade ``spade/slime/spade_rollout.py``,
``spade/core/orchestrator.py``, ``spade/tinker/rollout.py``, ``spade/slime/fixed_env_rollout.py``
and the ``cmd/`` launchers): how many times each game is played per update, and how often the
game set is regenerated.

Facts restated from upstream (in our words):

* The SPADE rollout (games, tool use, the fixed GPT-5.5 pool, Tinker) plays every selected game
  ``ceil(global batch / selected games)`` times: 192 / 24 = 8 in the games launchers and the
  fixed GPT-5.5 launcher (whose ``--spade-trajectories-per-game 16`` that rollout never reads for
  play), 256 / 16 = 16 for tool use 4B, 192 / 24 = 8 for tool use 8B/30B, 128 / 16 = 8 on Tinker.
  With fewer games the count rises: 192 over 20 games is 10 each.
* The fixed-environment rollout (the RLVE launchers) plays ``--spade-trajectories-per-game`` (16)
  per environment, whatever the batch.
* A new game set is generated when ``rollout_id % interval == 0`` (4 for games and Tinker, 32 for
  tool use 4B, 8 for tool use 8B/30B); in between the same games are played again, without hint
  plays; the active skills rotate per regeneration epoch (``rollout_id // interval``), a window
  of ``skills_per_regen`` skills advancing by that many each epoch.
"""

from __future__ import annotations

import json

import pytest
from spade_train.config import load_recipe
from spade_train.loop import start_run
from spade_train.resources import NO_GROUNDING
from spade_train.steps.design import current_set, design_round, designer_prompts, regenerates
from spade_train.steps.play import episodes_per_env
from test_loop import ForcedDesigner, good_reply, small

# recipe: (upstream launcher, regeneration interval, plays per game at full batch)
UPSTREAM = {
    "spade-games-4b": ("games/train_spade_4b.sh", 4, 8),
    "spade-games-8b": ("games/train_spade_8b.sh", 4, 8),
    "spade-games-30b": ("games/train_spade_30b.sh", 4, 8),
    "fixed-static-4b": ("games/train_fixed_gpt55_4b.sh", None, 8),
    "fixed-static-8b": ("games/train_fixed_gpt55_8b.sh", None, 8),
    "fixed-static-30b": ("games/train_fixed_gpt55_30b.sh", None, 8),
    "fixed-rlve-4b": ("games/train_fixed_rlve_4b.sh", None, 16),
    "fixed-rlve-8b": ("games/train_fixed_rlve_8b.sh", None, 16),
    "fixed-rlve-30b": ("games/train_fixed_rlve_30b.sh", None, 16),
    "spade-tool-use-4b": ("tool_use/train_spade_4b.sh", 32, 16),
    "spade-tool-use-8b": ("tool_use/train_spade_8b.sh", 8, 8),
    "spade-tool-use-30b": ("tool_use/train_spade_30b.sh", 8, 8),
    "tinker-qwen3-8b": ("tinker/qwen3_8b/train_spade_tinker.sh", 4, 8),
    "tinker-qwen3-8b-base": ("tinker/qwen3_8b_base/train_spade_tinker.sh", 4, 8),
    "tinker-qwen3-4b-instruct": ("tinker/qwen3_4b_instruct/train_spade_tinker.sh", 4, 8),
    "tinker-qwen3-30b-instruct": ("tinker/qwen3_30b_instruct/train_spade_tinker.sh", 4, 8),
    "tinker-gpt-oss-20b": ("tinker/gpt_oss_20b/train_spade_tinker.sh", 4, 8),
}
ABLATIONS = (
    "ablation-no-grounding",
    "ablation-no-memory",
    "ablation-no-ed-training-no-memory",
    "ablation-two-skill",
    "ablation-learning-potential",
    "ablation-solve-rate",
    "ablation-fixed-gpt55",
)


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_plays_per_game_at_a_full_batch(name: str) -> None:
    cfg = load_recipe(name)
    _launcher, _interval, plays = UPSTREAM[name]
    assert episodes_per_env(cfg, cfg.agent.envs_per_cycle) == plays


@pytest.mark.parametrize("name", ABLATIONS)
def test_ablations_play_as_the_30b_games_launcher(name: str) -> None:
    cfg = load_recipe(name)
    assert episodes_per_env(cfg, cfg.agent.envs_per_cycle) == 8
    if cfg.mode == "spade":
        assert cfg.designer.regenerate_every == 4


@pytest.mark.parametrize(
    ("batch", "games", "plays"),
    # upstream: math.ceil(global_batch_size / len(selected_game_files))
    [(192, 24, 8), (192, 20, 10), (192, 7, 28), (256, 16, 16), (128, 16, 8), (128, 15, 9)],
)
def test_fewer_games_play_more_each(batch: int, games: int, plays: int) -> None:
    cfg = load_recipe("spade-games-4b", [f"agent.batch_episodes={batch}"])
    assert episodes_per_env(cfg, games) == plays
    # without a batch, the fixed count (the RLVE rollout's trajectories-per-game)
    fixed = load_recipe("spade-games-4b", ["agent.batch_episodes=null"])
    assert episodes_per_env(fixed, games) == fixed.agent.episodes_per_env


@pytest.mark.parametrize("name", sorted(n for n, v in UPSTREAM.items() if v[1]))
def test_regeneration_cadence_of_each_launcher(name: str) -> None:
    cfg = load_recipe(name)
    interval = UPSTREAM[name][1]
    assert cfg.designer.regenerate_every == interval
    assert cfg.reward.regeneration_interval == interval  # env reward scale 'auto' reads it
    # rollout r (0-based) regenerates iff r % interval == 0; our cycle c is rollout c - 1
    assert [regenerates(cfg, r + 1) for r in range(3 * interval)] == [
        r % interval == 0 for r in range(3 * interval)
    ]


def _upstream_active_skills(skills, rollout_id, interval, per_regen):
    """Upstream's select_active_skills, restated: a window of ``per_regen`` skills per epoch."""
    n = len(skills)
    if per_regen <= 0 or per_regen >= n or interval <= 0:
        return list(skills)
    start = (rollout_id // interval * per_regen) % n
    return [skills[(start + j) % n] for j in range(per_regen)]


def test_skills_rotate_once_per_regeneration_epoch() -> None:
    cfg = load_recipe("spade-games-4b", ["designer.grounding.enabled=false"])
    import spade_corpus as sc

    memory = sc.EnvironmentMemory()
    seen = []
    for cycle in range(1, 13):
        if not regenerates(cfg, cycle):
            continue
        _prompts, skills = designer_prompts(cfg, cycle, memory, NO_GROUNDING)
        seen.append(skills)
        expected = _upstream_active_skills(cfg.designer.skills, cycle - 1, 4, 3)
        assert skills == expected
    assert seen == [
        ["Math", "Logic", "Spatial"],
        ["Pattern", "Optimization", "Causal"],
        ["Math", "Logic", "Spatial"],
    ]
    assert [design_round(cfg, c) for c in (1, 4, 5, 8, 9)] == [0, 0, 1, 1, 2]
    # two skills, two per regeneration: both, every epoch (upstream disables rotation)
    two = load_recipe("ablation-two-skill", ["designer.grounding.enabled=false"])
    for cycle in (1, 5, 9):
        assert designer_prompts(two, cycle, memory, NO_GROUNDING)[1] == ["Math", "Pattern"]


def test_one_designer_round_is_played_until_the_next(tmp_path) -> None:
    cfg = small(
        "quickstart",
        "cycles=5",
        "designer.regenerate_every=2",
        "reward.delay_cycles=2",
        "reward.designer=regret",
        "agent.envs_per_cycle=1",
        "agent.batch_episodes=2",
    )
    backend = ForcedDesigner(good_reply(), **cfg.backend.backend_kwargs(cfg.seed))
    loop = start_run(cfg, tmp_path / "run", backend=backend, progress=False)
    rows = loop.train()
    assert [r["design/regenerated"] for r in rows] == [True, False, True, False, True]
    # the designer writes only at rounds (cycles 1, 3, 5)
    assert [r.get("design/completions") for r in rows] == [2, None, 2, None, 2]
    # every cycle plays one environment twice (batch 2 over 1 environment) ...
    assert all(r["play/envs"] == 1 for r in rows)
    # ... with hint plays only at rounds, where the designer's regret reads them
    assert [r["play/return_hint"] is not None for r in rows] == [True, False, True, False, True]
    assert [r["play/episodes"] for r in rows] == [3, 2, 3, 2, 3]
    # between rounds the round's own environment is played again (it entered the pool at 1)
    pool = json.loads((tmp_path / "run/pool.json").read_text())
    designed = [e for e in pool["entries"] if e["origin"] == "designer"]
    first = next(e for e in designed if e["cycle_added"] == 1)
    assert first["plays"] == 4 and first["hinted_plays"] == 1  # cycles 1 and 2
    assert current_set(cfg, loop.state.pool, 2) == [loop.state.pool.get(first["env_id"])]
    # the designer items of cycle 1 come back at cycle 3, scored over cycles 1-2's plays
    assert [r["reward/designer/released"] for r in rows] == [0, 0, 2, 0, 4]
