"""Episodes played on sandbox actors (``RaySandboxPool.open_env``) on a real local Ray cluster
(2 CPUs), against the same episodes on a local ``spade_sandbox.SandboxPool``."""

from __future__ import annotations

import time

import pytest

ray = pytest.importorskip("ray")
se = pytest.importorskip("spade_envs")
ss = pytest.importorskip("spade_sandbox")

from ray.exceptions import GetTimeoutError, RayActorError  # noqa: E402
from spade_train.backends.ray import RaySandboxPool  # noqa: E402

GAMES = ["math_modular_chain", "logic_code_breaker"]
SEEDS = [1, 2]
TURNS = 8  # the observations name it, so the scripts are keyed with the same value
CONFIG = ss.SandboxConfig()

BOOM = """
class BoomEnv:
    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        return "Say anything.", {}

    def step(self, action):
        if action == "shape":
            return "not a tuple"
        raise KeyError("boom " + action)

    def solution(self):
        return "x"
"""

SLOW = """
import time


class SlowEnv:
    def __init__(self, max_turns=10, **kwargs):
        pass

    def reset(self, seed=None):
        return "Wait.", {}

    def step(self, action):
        time.sleep(2)
        return "done", 1.0, True, False, {}
"""


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_pool():
    pool = RaySandboxPool(
        num_workers=2, call_timeout_s=120, sandbox_config=CONFIG, sandbox_pool_size=1
    )
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def local_pool():
    with ss.SandboxPool(CONFIG, size=1) as pool:
        yield pool


def _kill(actor) -> None:
    """Kill ``actor`` and wait until Ray reports it dead (``ray.kill`` is asynchronous)."""
    ray.kill(actor)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get(actor.sessions.remote(), timeout=5)
        except RayActorError:
            return
        except GetTimeoutError:
            pass
        time.sleep(0.05)
    raise AssertionError("the killed actor still answers")


def _without_times(results):
    rows = [r.to_dict() for r in results]
    for row in rows:
        row.pop("wall_s")
    return rows


class SolutionAgent:
    """Replies from a fixed script per episode (found by its first observation): a malformed
    reply first, then the reference solution's actions."""

    def __init__(self, scripts: dict[str, list[str]]):
        self.scripts = scripts

    def __call__(self, batch):
        replies = []
        for chat in batch:
            first = next(m["content"] for m in chat if m["role"] == "user")
            script = next(s for obs, s in self.scripts.items() if first.startswith(obs))
            turn = sum(m["role"] == "assistant" for m in chat)
            replies.append(script[min(turn, len(script) - 1)])
        return replies


def test_episodes_match_the_local_pool(ray_pool, local_pool):
    corpus = se.load_corpus("example")
    scripts, specs = {}, {"ray": [], "local": []}
    for env_id in GAMES:
        rec, source = corpus.record(env_id), corpus.source(env_id)
        for seed in SEEDS:
            with local_pool.open_env(source, rec.class_name, {"max_turns": TURNS}) as env:
                obs, _ = env.reset(seed)
                solution = env.call("solution")
            with ray_pool.open_env(source, rec.class_name, {"max_turns": TURNS}) as handle:
                assert handle.reset(seed)[0] == obs
                assert handle.call("solution") == solution
                assert handle.class_name == rec.class_name and handle.episodes == 1
            lines = [f"<action>{line}</action>" for line in solution.splitlines()]
            scripts[obs] = ["I am not sure yet.", *lines]
        for name, pool in (("ray", ray_pool), ("local", local_pool)):
            factory = se.SandboxedFactory(source, rec.class_name, pool=pool, origin=env_id)
            for seed in SEEDS:
                for hint in (None, rec.hint):
                    specs[name].append(se.EpisodeSpec(factory, seed, hint, env_id, max_turns=TURNS))
    agent = SolutionAgent(scripts)
    got = se.run_episodes(specs["ray"], agent, workers=8)
    want = se.run_episodes(specs["local"], agent, workers=8)
    assert _without_times(got) == _without_times(want)
    assert all(r.error is None and r.won for r in got)
    assert all(r.turns[0].malformed for r in got)
    assert ray_pool.sessions() == [0, 0]  # run_episodes closed every environment


@pytest.mark.parametrize("action,kind", [("go", "EnvException"), ("shape", "BadReturn")])
def test_environment_errors_match_the_local_pool(ray_pool, local_pool, action, kind):
    errors, results = [], []
    for pool in (ray_pool, local_pool):
        with pool.open_env(BOOM) as env:
            env.reset(0)
            with pytest.raises(ss.SandboxError) as info:
                env.step(action)
            errors.append(info.value)
        spec = se.EpisodeSpec(se.SandboxedFactory(BOOM, pool=pool), seed=0, env_id="boom")
        results.append(se.run_episodes([spec], lambda batch: [f"<action>{action}</action>"])[0])
    (remote, local), (got, want) = errors, results
    assert type(remote) is type(local) and type(remote).__name__ == kind
    assert (remote.reason, remote.is_infrastructure, str(remote)) == (
        local.reason,
        local.is_infrastructure,
        str(local),
    )
    assert got.error == want.error and got.error.boundary == "sandbox" and got.error.kind == kind
    assert _without_times([got]) == _without_times([want])
    # argument errors come back as the same exception types as well
    with ray_pool.open_env(BOOM) as env:
        with pytest.raises(TypeError, match="seed must be an int"):
            env.reset("1")
    with pytest.raises(ss.SandboxError) as info:
        ray_pool.open_env("x = (")
    assert not info.value.is_infrastructure


def test_close_releases_sessions(ray_pool):
    handles = [ray_pool.open_env(BOOM) for _ in range(3)]
    assert sorted(ray_pool.sessions()) == [1, 2]  # round robin over the two actors
    for handle in handles:
        handle.close()
        handle.close()  # idempotent
    assert ray_pool.sessions() == [0, 0]
    with pytest.raises(ValueError, match="closed"):
        handles[0].reset(0)
    dropped = ray_pool.open_env(BOOM)
    del dropped  # closed best effort by the finalizer
    deadline = time.monotonic() + 10
    while sum(ray_pool.sessions()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ray_pool.sessions() == [0, 0]


def test_a_stuck_call_times_out_as_infrastructure(ray_pool):
    handle = ray_pool.open_env(SLOW)
    handle.reset(0)
    ray_pool.timeout = 0.5
    try:
        start = time.monotonic()
        with pytest.raises(ss.InfrastructureError, match="no answer within 0.5s") as info:
            handle.step("x")
        assert time.monotonic() - start < 1.5 and info.value.is_infrastructure
    finally:
        ray_pool.timeout = 120
        handle.close()


def test_killed_actor_is_an_infrastructure_error():
    pool = RaySandboxPool(
        num_workers=1, call_timeout_s=120, sandbox_config=CONFIG, sandbox_pool_size=1
    )
    try:
        handle = pool.open_env(BOOM)
        handle.reset(0)
        _kill(pool._actors[0])
        start = time.monotonic()
        with pytest.raises(ss.InfrastructureError, match="actor 0 failed: the actor died"):
            handle.step("go")
        assert time.monotonic() - start < 5
        handle.close()  # a dead actor is no error on close

        # run_episodes records it as the infrastructure's fault, not the environment's
        def agent(batch):
            if any(m["role"] == "assistant" for m in batch[0]):
                _kill(pool._actors[0])
            return ["<action>shape-free</action>"] * len(batch)

        source = se.load_corpus("example").source("math_modular_chain")
        factory = se.SandboxedFactory(source, pool=pool)  # a fresh actor replaced the dead one
        specs = [se.EpisodeSpec(factory, seed=s, env_id="m") for s in (1, 2)]
        start = time.monotonic()
        results = se.run_episodes(specs, agent, workers=2)
        assert time.monotonic() - start < 30
        for result in results:
            assert len(result.turns) == 1 and result.episode_return == 0.0
            assert (result.error.boundary, result.error.kind) == (
                "infrastructure",
                "InfrastructureError",
            )
            assert "died" in result.error.message

        # closing the actor's sessions from its side, then the pool
        handle = pool.open_env(BOOM)
        assert pool.sessions() == [1]
        ray.get(pool._actors[0].close_all.remote(), timeout=30)
        assert pool.sessions() == [0]
        with pytest.raises(ValueError, match="closed"):
            handle.reset(0)
        with pytest.raises(ss.InfrastructureError, match="closed"):
            pool.open_env(BOOM)
    finally:
        pool.close()
    with pytest.raises(ss.InfrastructureError, match="RaySandboxPool is closed"):
        pool.open_env(BOOM)
