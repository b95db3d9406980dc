"""SandboxedEnv.renew(): a fresh environment in the same worker, only when that is safe."""

from __future__ import annotations

import pytest
from conftest import GAME, make_env_source
from spade_sandbox import EnvException, LimitExceeded, Limits, SandboxPool, SandboxTimeout

# State a second instance must not see: a module global, a class attribute, a file in the
# work dir, the builtins the environment's module sees, and the global `random` generator.
STATEFUL = make_env_source(
    header="""
    import random
    OPENED = []
    """,
    init="""
    OPENED.append(1)
    AttackEnv.instances = getattr(AttackEnv, "instances", 0) + 1
    self.kwargs = kwargs
    """,
    reset="""
    try:
        with open("notes.txt") as f:
            notes = f.read()
    except FileNotFoundError:
        notes = ""
    with open("notes.txt", "a") as f:
        f.write("x")
    abs_patched = abs is None
    __builtins__["abs"] = None
    if seed is not None:
        random.seed(seed)
    return f"opened={len(OPENED)} instances={AttackEnv.instances} notes={notes!r}", {
        "kwargs": self.kwargs, "abs_patched": abs_patched, "draw": random.random()}
    """,
    step='return "obs", 0.5, False, False, {"r": random.random()}',
    extra="""
    def boom(self):
        raise ValueError("boom")
    """,
)


def transcript(env, seed: int) -> list:
    return [env.reset(seed=seed), *(env.step(a) for a in ("\\boxed{3}", "\\boxed{7}", "x"))]


def test_a_renewed_environment_plays_as_a_freshly_opened_one(config):
    with SandboxPool(config, size=1) as pool:
        fresh = [transcript(pool.open_env(GAME, kwargs={"n": 50}), s) for s in range(4)]
        env = pool.open_env(GAME, kwargs={"n": 50})
        pid_dir = env.work_dir
        renewed = []
        for seed in range(4):
            if seed:
                assert env.renew() is True
            renewed.append(transcript(env, seed))
        assert renewed == fresh
        assert env.work_dir == pid_dir  # one worker served all four
        env.close()


def test_renew_leaves_nothing_of_the_previous_instance(config):
    with SandboxPool(config, size=1) as pool:
        env = pool.open_env(STATEFUL, kwargs={"k": 1})
        first = env.reset(seed=5)
        assert first[0] == "opened=1 instances=1 notes=''"
        assert first[1]["abs_patched"] is False
        assert env.reset(seed=5)[0] == "opened=1 instances=1 notes='x'"  # same instance
        env.step("a")  # moves the global generator on
        assert env.renew() is True
        # A fresh module, class, work dir and builtins; the seeded draw repeats.
        assert env.reset(seed=5) == first
        assert env.renew() is True
        obs, info = env.reset()  # unseeded: the generator was reseeded from the OS
        assert obs == "opened=1 instances=1 notes=''" and info["abs_patched"] is False
        assert info["kwargs"] == {"k": 1} and info["draw"] != first[1]["draw"]
        env.close()


def test_a_failed_call_keeps_the_worker_from_being_reused(config):
    with SandboxPool(config, size=1) as pool:
        env = pool.open_env(STATEFUL)
        env.reset(seed=1)
        assert env.reusable
        with pytest.raises(EnvException):
            env.call("boom")
        assert not env.reusable
        old = env.work_dir
        assert env.renew() is False  # the source went into a fresh worker
        assert env.work_dir != old and env.reusable
        assert env.reset(seed=1)[0] == "opened=1 instances=1 notes=''"
        env.close()


@pytest.mark.parametrize("deferred", [False, True])
def test_a_timed_out_worker_is_replaced_not_reused(config, deferred):
    hang = make_env_source(step="while True:\n    pass")
    with SandboxPool(config, size=1) as pool:
        env = pool.open_env(hang)
        env.reset(seed=0)
        with pytest.raises(SandboxTimeout):
            env.step("go")
        assert not env.reusable
        if deferred:  # start_renew on a worker that cannot be kept renews at once, fresh
            work_dir = env.work_dir
            env.start_renew()
            assert env.work_dir != work_dir
        else:
            assert env.renew() is False
        assert env.reset(seed=0) == ("start", {})
        env.close()


def test_a_step_limit_keeps_the_worker_from_being_reused(config):
    tight = config.replace(limits=Limits(**{**config.limits.to_dict(), "max_steps": 2}))
    with SandboxPool(tight, size=1) as pool:
        env = pool.open_env(GAME)
        env.reset(seed=0)
        env.step("1")
        env.step("2")
        with pytest.raises(LimitExceeded):
            env.step("3")
        assert env.renew() is False
        env.close()


def test_renew_honours_the_recycle_bound(config):
    with SandboxPool(config.replace(recycle_after_episodes=2), size=1) as pool:
        env = pool.open_env(GAME)
        dirs, kept = [], []
        for episode in range(5):
            if episode:
                kept.append(env.renew())
            env.reset(seed=episode)
            dirs.append(env.work_dir)
        assert kept == [True, False, True, False]
        assert len(set(dirs)) == 3 and dirs[0] == dirs[1] != dirs[2] == dirs[3] != dirs[4]
        env.close()


def test_a_worker_that_used_its_cpu_share_is_not_reused(config):
    # cpu_s=2: a worker is reused while it has used at most 5 % of it (0.1 s).
    burn = make_env_source(
        header="import time",
        reset="t = time.process_time()\nwhile time.process_time() - t < 0.15:\n    pass\nreturn 'hot', {}",
    )
    hot = config.replace(limits=Limits(**{**config.limits.to_dict(), "cpu_s": 2}))
    with SandboxPool(hot, size=1) as pool:
        env = pool.open_env(burn)
        env.reset()
        assert env.reusable  # nothing failed, but the worker has spent its share
        assert env.renew() is False
        env.close()
