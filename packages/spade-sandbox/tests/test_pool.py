"""SandboxPool: warm workers, one environment per worker, recycling, a clean close."""

from __future__ import annotations

import threading

import pytest
from conftest import GAME, child_pids, make_env_source, open_fds
from spade_sandbox import ReasonCode, SandboxError, SandboxPool

pytestmark = pytest.mark.timeout(90)


def test_pool_keeps_spares_and_serves_fresh_workers(config):
    fds, children = open_fds(), child_pids()
    with SandboxPool(config, size=2) as pool:
        assert pool.wait_ready(30)
        assert pool.ready == 2
        envs = [pool.open_env(GAME, kwargs={"n": 5}) for _ in range(3)]  # one more than the spares
        assert len({env.work_dir for env in envs}) == 3  # never shared
        for i, env in enumerate(envs):
            env.reset(seed=i)
            assert env.step(env.call("solution"))[1] == 1.0
        assert pool.wait_ready(30)
        envs[0].close()
    assert all(repr(env).endswith("closed>") for env in envs)
    assert child_pids() == children
    assert open_fds() <= fds


def test_state_does_not_leak_between_environments_of_a_pool(config):
    src = make_env_source(init="self.visits = 0",
                          step="self.visits += 1\nreturn str(self.visits), 0.0, False, False, {}")  # fmt: skip
    with SandboxPool(config, size=1) as pool:
        for _ in range(3):
            with pool.open_env(src) as env:
                env.reset()
                assert env.step("x")[0] == "1"


def test_a_violation_recycles_the_worker_and_the_pool_carries_on(config):
    src = make_env_source(
        step="if action == 'bomb':\n    x = bytearray(10**10)\nreturn 'ok', 0.0, False, False, {}"
    )
    with SandboxPool(config, size=1) as pool:
        env = pool.open_env(src)
        env.reset()
        dir_before = env.work_dir
        with pytest.raises(SandboxError) as caught:
            env.step("bomb")
        assert caught.value.reason is ReasonCode.MEMORY
        env.reset()
        assert env.work_dir != dir_before
        assert env.step("fine")[0] == "ok"
        assert pool.run("print(6 * 7)").stdout == "42\n"


def test_environments_from_many_threads(config):
    errors: list[BaseException] = []
    with SandboxPool(config, size=2) as pool:

        def play(seed: int) -> None:
            try:
                with pool.open_env(GAME) as env:
                    env.reset(seed=seed)
                    assert env.step(env.call("solution"))[1] == 1.0
            except BaseException as exc:  # collected for the main thread
                errors.append(exc)

        threads = [threading.Thread(target=play, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_closed_pool_refuses_and_closes_its_environments(config):
    pool = SandboxPool(config, size=1)
    env = pool.open_env(GAME)
    pool.close()
    pool.close()
    with pytest.raises(SandboxError, match="closed") as caught:
        pool.open_env(GAME)
    assert caught.value.is_infrastructure
    with pytest.raises(ValueError, match="closed"):
        env.reset()


def test_pool_rejects_another_config(config):
    with SandboxPool(config, size=0) as pool:
        with pytest.raises(ValueError, match="one config"):
            pool.open_env(GAME, config=config.replace(recycle_after_episodes=1))
        with pool.open_env(GAME, config=config) as env:  # size 0: started on demand
            assert env.reset(seed=0)[0].startswith("Guess")
