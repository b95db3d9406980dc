"""SandboxedEnv.start_step: send a step now, collect it later, with step()'s results and errors."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import GAME, make_env_source
from spade_sandbox import LimitExceeded, SandboxPool, SandboxTimeout

# Each step reports when (on the machine-wide monotonic clock) it ran: steps sent to several
# workers before any is collected run at the same time.
NAPPER = make_env_source(
    header="import time",
    step="""
    began = time.monotonic()
    time.sleep(0.3)
    return "slept", 0.0, False, False, {"began": began, "ended": time.monotonic()}
    """,
)
SLOW = make_env_source(
    header="import time", step="time.sleep(5)\nreturn 'late', 0.0, False, False, {}"
)
ACTIONS = ("\\boxed{3}", "\\boxed{7}", "x", "\\boxed{5}")


def test_collected_steps_equal_plain_steps(config):
    with SandboxPool(config, size=2) as pool:
        plain = pool.open_env(GAME, kwargs={"n": 20})
        split = pool.open_env(GAME, kwargs={"n": 20})
        assert plain.reset(seed=3) == split.reset(seed=3)
        for action in ACTIONS:
            collect = split.start_step(action)
            assert collect() == plain.step(action)
        with pytest.raises(ValueError, match="collected already"):
            collect()
        assert split.reusable
        plain.close()
        split.close()


def test_steps_sent_to_several_workers_run_at_once(config):
    with SandboxPool(config, size=3) as pool:
        envs = [pool.open_env(NAPPER) for _ in range(3)]
        for env in envs:
            env.reset(seed=0)
        collects = [env.start_step("go") for env in envs]
        infos = [collect()[4] for collect in collects]
        # every step began before any ended: the three workers slept together
        assert max(i["began"] for i in infos) < min(i["ended"] for i in infos)
        for env in envs:
            env.close()


def test_another_call_first_collects_and_drops_the_step(config):
    with SandboxPool(config, size=1) as pool:
        env = pool.open_env(GAME)
        env.reset(seed=1)
        collect = env.start_step("\\boxed{4}")
        assert env.reset(seed=1)[0].startswith("Guess")  # took the worker back, no hang
        with pytest.raises(ValueError, match="collected already"):
            collect()
        assert not env.reusable  # nobody saw what the dropped step did
        env.start_step("\\boxed{4}")
        env.close()  # closing with a step in flight collects it first


def test_a_step_past_its_wall_time_fails_at_collection_as_step_would(config):
    with SandboxPool(config, size=1) as pool:
        env = pool.open_env(SLOW)
        env.reset()
        collect = env.start_step("go")  # sending returns at once
        with pytest.raises(SandboxTimeout, match="call_wall_s"):
            collect()
        assert not env.reusable
        env.close()
    short = config.replace(limits=dataclasses.replace(config.limits, episode_wall_s=0.5))
    with SandboxPool(short, size=1) as pool:
        env = pool.open_env(SLOW)
        env.reset()
        with pytest.raises(LimitExceeded, match="episode_wall_s"):
            env.start_step("go")()
        env.close()


def test_start_step_checks_what_step_checks(config):
    with SandboxPool(config, size=1) as pool:
        env = pool.open_env(GAME)
        with pytest.raises(ValueError, match="reset"):
            env.start_step("x")
        env.reset()
        with pytest.raises(TypeError, match="str"):
            env.start_step(3)  # type: ignore[arg-type]
        env.close()
        with pytest.raises(ValueError, match="closed"):
            env.start_step("x")


WAKER = make_env_source(
    header="import time",
    reset="""
    began = time.monotonic()
    time.sleep(0.3)
    return "up", {"began": began, "ended": time.monotonic()}
    """,
)


def test_resets_sent_together_run_at_once_and_equal_plain_resets(config):
    with SandboxPool(config, size=3) as pool:
        envs = [pool.open_env(WAKER) for _ in range(3)]
        infos = [c()[1] for c in [env.start_reset(seed=1) for env in envs]]
        assert max(i["began"] for i in infos) < min(i["ended"] for i in infos)
        plain, split = pool.open_env(GAME, kwargs={"n": 30}), pool.open_env(GAME, kwargs={"n": 30})
        assert split.start_reset(seed=5)() == plain.reset(seed=5)
        assert split.step("\\boxed{9}") == plain.step("\\boxed{9}")  # the episode is on
        for env in [*envs, plain, split]:
            env.close()


def transcript(env, seed):
    return [env.reset(seed=seed), *(env.step(a) for a in ACTIONS)]


def test_a_deferred_renew_plays_as_renew_does(config):
    with SandboxPool(config, size=2) as pool:
        env = pool.open_env(GAME, kwargs={"n": 40})
        other = pool.open_env(GAME, kwargs={"n": 40})
        first = transcript(env, 2)
        work_dir = env.work_dir
        env.start_renew()  # returns at once; the reset below waits for it
        assert not env.reusable
        assert transcript(env, 2) == first == transcript(other, 2)
        assert env.work_dir == work_dir  # renewed in the same worker
        env.start_renew()
        env.close()  # closing with a renew in flight: no hang, no fresh worker loaded


def test_a_deferred_renew_the_worker_declines_moves_to_a_fresh_worker(config):
    # the worker declines a reopen once it has used 5 % of cpu_s (here 0.1 s of 2 s)
    burn = make_env_source(
        header="import time",
        reset="t = time.process_time()\nwhile time.process_time() - t < 0.15:\n    pass\nreturn 'hot', {}",
    )
    hot = config.replace(limits=dataclasses.replace(config.limits, cpu_s=2))
    with SandboxPool(hot, size=1) as pool:
        env = pool.open_env(burn)
        env.reset()
        work_dir = env.work_dir
        env.start_renew()  # sent: the worker is reusable as far as the host can tell
        assert env.reset() == ("hot", {})
        assert env.work_dir != work_dir
        env.close()


def test_a_worker_closed_with_a_call_never_received_is_killed_not_waited_for(config):
    with SandboxPool(config, size=1) as pool:
        worker = pool.take_worker()
        worker.send({"op": "call", "method": "nothing", "args": []}, 5.0)  # type: ignore[attr-defined]
        worker.close()  # returns: the worker is killed and reaped
        assert not worker.alive
