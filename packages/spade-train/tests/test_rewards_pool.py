"""Designer rewards, the delay queue, the environment pool and the procedural curriculum."""

import json
import random

import pytest
import spade_corpus as sc
from spade_train.config import RewardConfig
from spade_train.core import rewards as rw
from spade_train.core.delayed_rewards import DelayedRewards
from spade_train.core.pool import EnvPool, PoolEntry
from spade_train.core.procedural import ProceduralCurriculum, generator_names, make_source

VALID = dict(valid=True, skill="Math")


def test_regret_is_hinted_mean_minus_unhinted_mean():
    assert rw.regret([1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]) == pytest.approx(0.5)
    assert rw.regret([0.0], [1.0]) == -1.0
    assert rw.regret([], [1.0]) == 0.0


def test_designer_reward_modes_by_hand():
    out = rw.EnvOutcome(hinted_returns=[1, 1, 1, 0], unhinted_returns=[1, 0, 0, 0], **VALID)
    assert rw.designer_reward(out, RewardConfig(designer="regret")) == pytest.approx(0.5)
    assert rw.designer_reward(out, RewardConfig(designer="regret-pure")) == pytest.approx(0.5)
    # solve-rate is the plateau of the mean return: 0.25 is 0.15 below the band, ramp 0.25
    assert rw.designer_reward(out, RewardConfig(designer="solve-rate")) == pytest.approx(0.4)
    # blend (launcher weights): 0.6 * plateau(0.25) + 0.4 * min(1, 0.5 / 0.15)
    assert rw.designer_reward(out, RewardConfig(designer="blend")) == pytest.approx(0.6 * 0.4 + 0.4)
    inside = rw.EnvOutcome(hinted_returns=[0.8], unhinted_returns=[1, 0], **VALID)
    assert rw.designer_reward(inside, RewardConfig(designer="blend")) == pytest.approx(1.0)
    # negative regret: floored under regret, kept under regret-pure, adds nothing to the blend
    worse = rw.EnvOutcome(hinted_returns=[0, 0], unhinted_returns=[1, 0], **VALID)
    assert rw.designer_reward(worse, RewardConfig(designer="regret")) == 0.0
    assert rw.designer_reward(worse, RewardConfig(designer="regret-pure")) == -0.5
    assert rw.designer_reward(worse, RewardConfig(designer="blend")) == pytest.approx(0.6)


def test_penalties_for_invalid_and_timed_out():
    cfg = RewardConfig(invalid_penalty=-1.0, timeout_penalty=-0.3)
    assert rw.designer_reward(rw.EnvOutcome(valid=False, reason="syntax_error"), cfg) == -1.0
    timed = rw.EnvOutcome(valid=False, reason="timeout", timed_out=True)
    assert rw.designer_reward(timed, cfg) == -0.3


def test_a_complete_program_can_be_penalized_less_than_an_unclosed_reply():
    unclosed = rw.EnvOutcome(valid=False, reason="unterminated_code_block", parsed=False)
    crashed = rw.EnvOutcome(valid=False, reason="step_raised", parsed=True)
    timed = rw.EnvOutcome(valid=False, reason="sandbox_timeout", timed_out=True)
    upstream = RewardConfig()  # one penalty for every invalid design
    assert [rw.designer_reward(o, upstream) for o in (unclosed, crashed)] == [-1.0, -1.0]
    graded = RewardConfig(parsed_invalid_penalty=-0.8)
    assert [rw.designer_reward(o, graded) for o in (unclosed, crashed, timed)] == [-1.0, -0.8, -0.5]
    # a batch of invalid designs alone now has a spread for the advantages
    scores = rw.score_designers([unclosed, crashed], graded)
    assert scores.rewards == [-1.0, -0.8]


def test_reason_penalties_rank_failures_of_the_same_parse_kind():
    def failed(reason, **kw):
        return rw.EnvOutcome(valid=False, reason=reason, **kw)

    batch = [failed("step_raised"), failed("solution_fails"), failed("duplicate")]
    batch += [failed("unterminated_code_block", parsed=False)]
    batch += [failed("sandbox_timeout", timed_out=True)]
    flat = RewardConfig(parsed_invalid_penalty=-0.8)
    assert rw.score_designers(batch, flat).rewards == [-0.8, -0.8, -0.8, -1.0, -0.5]
    ranked = RewardConfig(
        parsed_invalid_penalty=-0.8,
        reason_penalties={"solution_fails": -0.7, "duplicate": -0.9, "sandbox_timeout": -2.0},
    )
    # listed reasons take their own penalty; a timeout keeps timeout_penalty
    assert rw.score_designers(batch, ranked).rewards == [-0.8, -0.7, -0.9, -1.0, -0.5]


def test_a_named_probe_reason_takes_its_own_penalty_else_its_familys():
    batch = [
        rw.EnvOutcome(valid=False, reason=r)
        for r in ("probe_wins:common", "probe_wins:echo_action")
    ]
    family = RewardConfig(parsed_invalid_penalty=-0.8, reason_penalties={"probe_wins": -0.7})
    assert rw.score_designers(batch, family).rewards == [-0.7, -0.7]
    named = RewardConfig(
        parsed_invalid_penalty=-0.8,
        reason_penalties={"probe_wins": -0.7, "probe_wins:common": -0.9},
    )
    assert rw.score_designers(batch, named).rewards == [-0.9, -0.7]


def test_an_unknown_reason_in_reason_penalties_is_refused_with_a_suggestion():
    with pytest.raises(
        ValueError, match="unknown rejection reason 'duplicat' .did you mean duplicate"
    ):
        RewardConfig(reason_penalties={"duplicat": -0.9})
    assert RewardConfig(reason_penalties={"llm_validator_rejected": -0.9}).reason_penalties


def test_a_copied_design_gets_the_copy_reward_outside_the_centering():
    def valid(unhinted, copy_of=None):
        return rw.EnvOutcome(
            hinted_returns=[1.0], unhinted_returns=unhinted, copy_of=copy_of, **VALID
        )

    batch = [valid([0.0]), valid([0.5]), valid([0.0], copy_of="ref:starter/math_sum_tries")]
    plain = rw.score_designers(batch, RewardConfig(env_reward_scale=1.0))
    assert plain.raw == [1.0, 0.5, 1.0]  # the copy is scored like the others
    assert plain.rewards == pytest.approx([1 / 6, -1 / 3, 1 / 6])
    cfg = RewardConfig(env_reward_scale=1.0, copy_reward=-0.5)
    scores = rw.score_designers(batch, cfg)
    assert scores.raw == [1.0, 0.5, -0.5]
    assert scores.rewards == pytest.approx([0.25, -0.25, -0.5])  # centered over the other two
    assert scores.metrics["designer/masked_frac"] == 0.0  # a copy is scored, not masked
    assert rw.designer_reward(batch[2], cfg) == -0.5 and rw.designer_reward(batch[0], cfg) == 1.0


def test_plateau_shape():
    assert [rw.plateau(x) for x in (0.0, 0.15, 0.2, 0.4, 0.5, 0.6, 0.8, 0.85, 1.0)] == (
        pytest.approx([0.0, 0.0, 0.2, 1.0, 1.0, 1.0, 0.2, 0.0, 0.0])
    )


def test_center_per_skill():
    out = rw.center_per_skill([1.0, 3.0, 10.0, 10.0, 4.0], ["a", "a", "b", "b", "c"])
    assert out == [-1.0, 1.0, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="skills"):
        rw.center_per_skill([1.0], [])


def test_delayed_rewards_release_after_k_cycles_and_survive_a_checkpoint():
    q = DelayedRewards(2)
    q.push(1, [{"r": 1}])
    q.push(2, [{"r": 2}, {"r": 3}])
    assert q.pop_ready(2) == []
    state = json.loads(json.dumps(q.state_dict()))
    restored = DelayedRewards(0)
    restored.load_state_dict(state)
    assert restored.pop_ready(3) == [{"r": 1}]
    assert len(restored) == 2
    assert restored.pop_ready(4) == [{"r": 2}, {"r": 3}]
    assert DelayedRewards(0).pop_ready(1) == []
    now = DelayedRewards(0)
    now.push(5, [{"r": 9}])
    assert now.pop_ready(5) == [{"r": 9}]


def entry(i, source=None, skill="Math", cycle=0):
    return PoolEntry(
        env_id=f"e{i}",
        source=source or f"class E{i}Env: pass\n",
        class_name=f"E{i}Env",
        hint="h",
        skill=skill,
        max_turns=5,
        cycle_added=cycle,
        origin="test",
    )


def test_pool_dedups_by_source_and_id():
    pool = EnvPool(capacity=10)
    assert pool.add(entry(1)) is not None
    assert pool.add(entry(1)) is None
    assert pool.add(entry(2, source="  class E1Env: pass\n\n")) is None  # same source, padded
    assert len(pool) == 1


def test_pool_statistics_retirement_and_eviction():
    pool = EnvPool(capacity=3, retire_win_rate=0.9, min_plays=4)
    for i in range(3):
        pool.add(entry(i, cycle=i))
    pool.record("e0", hinted=[1.0] * 4, unhinted=[1.0] * 4, cycle=1)  # solved: retire
    pool.record("e1", hinted=[1.0, 1.0], unhinted=[1.0, 0.0], cycle=1)  # frontier
    pool.record("unknown", hinted=[1.0], unhinted=[0.0], cycle=1)  # ignored
    e1 = pool.get("e1")
    assert (e1.plays, e1.win_rate_nohint, e1.win_rate_hint, e1.regret) == (2, 0.5, 1.0, 0.5)
    assert [e.env_id for e in pool.retire_saturated()] == ["e0"]
    assert "e0" not in pool and pool.retired == ["e0"]
    pool.add(entry(3, cycle=3))
    pool.record("e3", hinted=[0.0] * 4, unhinted=[0.0] * 4, cycle=3)  # too hard: low weight
    pool.add(entry(4, cycle=4))  # full: the lowest-weight entry (e3) makes room
    assert sorted(e.env_id for e in pool) == ["e1", "e2", "e4"]
    assert pool.skill_counts() == {"Math": 3}


def test_frontier_sampling_prefers_the_frontier_and_is_reproducible():
    pool = EnvPool(capacity=10, sampling="frontier")
    for i in range(2):
        pool.add(entry(i))
    pool.record("e0", [1.0] * 10, [1.0] * 10, 1)  # solved (win rate 1): weight 0.05
    pool.record("e1", [1.0] * 10, [1.0] * 5 + [0.0] * 5, 1)  # win rate 0.5: weight 1.55
    rng = random.Random(0)
    picks = [pool.sample(1, rng)[0].env_id for _ in range(400)]
    assert picks.count("e1") > 0.9 * len(picks)
    a = [e.env_id for e in pool.sample(2, random.Random(5))]
    b = [e.env_id for e in pool.sample(2, random.Random(5))]
    assert a == b and sorted(a) == ["e0", "e1"]
    uniform = EnvPool(capacity=10, sampling="uniform")
    for i in range(2):
        uniform.add(entry(i))
    uniform.record("e0", [1.0] * 10, [1.0] * 10, 1)
    picks = [uniform.sample(1, rng)[0].env_id for _ in range(400)]
    assert 150 < picks.count("e0") < 250


def test_pool_state_round_trip():
    pool = EnvPool(capacity=4, min_plays=2, sampling="uniform", seed=3)
    for i in range(3):
        pool.add(entry(i, skill=["Math", "Logic", "Math"][i]))
    pool.record("e1", [1.0], [0.0, 1.0], 2)
    state = json.loads(json.dumps(pool.state_dict()))
    back = EnvPool.from_state_dict(state)
    assert back.state_dict() == pool.state_dict()
    assert back.add(entry(0)) is None  # the dedup index is restored too
    with pytest.raises(ValueError, match="sampling"):
        EnvPool(sampling="greedy")


@pytest.mark.parametrize("generator", generator_names())
def test_procedural_sources_pass_validation_and_their_solution_wins(generator):
    for level in (1, 10):
        design = make_source(generator, level)
        report = sc.validate_source(
            design.source, design.hint, env_id=f"{generator}_{level}", skill=design.skill
        )
        assert report.valid, (generator, level, report.reason, report.message)


def test_procedural_levels_change_the_task():
    easy, hard = make_source("chain_sum", 1), make_source("chain_sum", 10)
    ns_e, ns_h = {}, {}
    exec(easy.source, ns_e)
    exec(hard.source, ns_h)
    obs_e = ns_e["ProceduralEnv"]().reset(seed=1)[0]
    obs_h = ns_h["ProceduralEnv"]().reset(seed=1)[0]
    assert obs_e.count("+") < obs_h.count("+")


def test_curriculum_moves_levels_toward_the_band_and_resumes():
    cur = ProceduralCurriculum(["gcd", "lcm"], target=(0.3, 0.7), seed=0)
    assert [d.origin for d in cur.propose(3)] == ["gcd", "lcm", "gcd"]
    assert cur.update("gcd", 0.9) == 2
    assert cur.update("gcd", 1.0) == 3
    assert cur.update("gcd", 0.5) == 3
    assert cur.update("gcd", 0.1) == 2
    assert cur.update("lcm", 0.0) == 1  # floor
    assert cur.update("other", 1.0) is None
    assert cur.propose(1)[0].level == 1  # lcm is next
    state = json.loads(json.dumps(cur.state_dict()))
    again = ProceduralCurriculum(["gcd", "lcm"], seed=0)
    again.load_state_dict(state)
    assert [(d.origin, d.level) for d in again.propose(2)] == [("gcd", 2), ("lcm", 1)]
    with pytest.raises(ValueError, match="unknown procedural generator"):
        ProceduralCurriculum(["nope"])
