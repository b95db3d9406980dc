"""spade-envs through spade-sandbox's public interface (the `sandbox` extra)."""

import gc
import os
import subprocess
import sys

import gymnasium
import pytest
import spade_envs as se
from conftest import GUESS_HINT, GUESS_SOURCE

spade_sandbox = pytest.importorskip(
    "spade_sandbox", reason="the sandbox extra (spade-sandbox) is not installed"
)


@pytest.fixture(scope="module")
def config():
    return spade_sandbox.SandboxConfig(limits=spade_sandbox.Limits(call_wall_s=2.0))


def transcript(factory, seed, actions):
    env = factory(max_turns=10)
    try:
        first, _ = env.reset(seed=seed)
        return [first] + [env.step(a) for a in actions]
    finally:
        env.close()


def test_a_sandboxed_environment_plays_exactly_like_the_in_process_one(config):
    inside = se.load_env(GUESS_SOURCE, sandbox=True, sandbox_config=config)
    outside = se.load_env(GUESS_SOURCE)
    actions = ["\\boxed{25}", "junk", "\\boxed{12}", "\\boxed{40}"]
    assert [list(x) if isinstance(x, tuple) else x for x in transcript(inside, 4, actions)] == [
        list(x) if isinstance(x, tuple) else x for x in transcript(outside, 4, actions)
    ]


def test_check_env_passes_through_the_sandbox(config):
    factory = se.load_env(GUESS_SOURCE, sandbox=True, sandbox_config=config)
    report = se.check_env(factory, seeds=(0, 1), hint=GUESS_HINT)
    assert report.solution_turns == 1


def test_a_hanging_step_ends_its_episode_as_a_sandbox_error_not_a_reward(config):
    hanging = GUESS_SOURCE.replace(
        "guess = int(found[-1])",
        "guess = int(found[-1])\n            while True:\n                pass",
    )
    specs = [
        se.EpisodeSpec(
            se.load_env(hanging, sandbox=True, sandbox_config=config), seed=0, env_id="hang"
        ),
        se.EpisodeSpec(
            se.load_env(GUESS_SOURCE, sandbox=True, sandbox_config=config), seed=0, env_id="ok"
        ),
    ]
    agent = se.ReplayAgent(["\\boxed{0}"])
    results = se.run_episodes(specs, lambda batch: [agent(m) for m in batch])
    assert results[0].error is not None and results[0].error.boundary == "sandbox"
    assert results[0].error.kind == "SandboxTimeout"
    assert results[1].error is None and len(results[1].turns) == 10


def test_a_forbidden_import_is_reported_by_the_checker_with_the_sandbox_reason(config):
    evil = "import socket\n" + GUESS_SOURCE
    factory = se.load_env(evil, sandbox=True, sandbox_config=config)
    with pytest.raises(se.ContractError) as info:
        se.check_env(factory, seeds=(0,))
    assert info.value.code == "construct_failed"
    assert (
        getattr(info.value.__cause__, "reason", None) == spade_sandbox.ReasonCode.FORBIDDEN_IMPORT
    )


def test_the_shipped_corpus_runs_sandboxed(config):
    corpus = se.load_corpus("example")
    for record in corpus.records[:3]:
        factory = corpus.factory(record.id, sandbox=True, sandbox_config=config)
        se.check_env(factory, seeds=(0,), max_turns=record.max_turns, hint=record.hint)


def example_specs(**factory_kw):
    """Two seeds of each of the example corpus's first four games."""
    corpus = se.load_corpus("example")
    return [
        se.EpisodeSpec(corpus.factory(r.id, **factory_kw), seed=s, env_id=r.id,
                       max_turns=r.max_turns)
        for r in corpus.records[:4]
        for s in range(2)
    ]  # fmt: skip


def test_threaded_sandboxed_episodes_equal_the_sequential_ones(config):
    specs = example_specs(sandbox=True, sandbox_config=config)
    agent = se.RandomAgent(5)
    threaded = se.run_episodes(specs, lambda b: [agent(m) for m in b], concurrency=5, workers=4)
    sequential = se.run_episodes(specs, lambda b: [agent(m) for m in b])
    assert all(r.error is None for r in threaded + sequential)
    assert [r.to_dict()["turns"] for r in threaded] == [r.to_dict()["turns"] for r in sequential]


# -- worker reuse (SandboxedFactory(reuse_workers=True), the default) ----------------------


def records(results):
    """Episode records without their wall time."""
    return [{k: v for k, v in r.to_dict().items() if k != "wall_s"} for r in results]


def test_reused_workers_give_the_same_episodes_as_fresh_ones(config):
    corpus = se.load_corpus("example")
    rec = corpus.records[0]

    def play(reuse):
        factory = se.SandboxedFactory(
            corpus.source(rec.id), rec.class_name, config=config, reuse_workers=reuse
        )
        specs = [se.EpisodeSpec(factory, seed=s, env_id=rec.id, max_turns=4) for s in range(8)]
        agent = se.RandomAgent(3)
        with factory:
            results = se.run_episodes(specs, lambda b: [agent(m) for m in b], concurrency=2)
        return results, factory.reused

    fresh, none_reused = play(False)
    reused, count = play(True)
    assert none_reused == 0 and count == 6  # two workers opened, then reused six times
    assert all(r.error is None for r in fresh)
    assert records(reused) == records(fresh)


BOOM_ON_SEED_1 = GUESS_SOURCE.replace(
    "self.turn += 1",
    "self.turn += 1\n        if self.secret == SECRET_1:\n            raise RuntimeError('boom')",
)


def test_a_worker_whose_step_raised_is_not_reused(config):
    secret_1 = se.load_env(GUESS_SOURCE)(max_turns=10)
    secret_1.reset(seed=1)
    source = f"SECRET_1 = {secret_1.secret}\n" + BOOM_ON_SEED_1
    with se.SandboxedFactory(source, config=config) as factory:
        env = factory(max_turns=10)
        env.reset(seed=1)
        with pytest.raises(spade_sandbox.EnvException):
            env.step("\\boxed{1}")
        env.close()
        assert factory.idle == 0  # closed, not kept
        env = factory(max_turns=10)
        env.reset(seed=2)
        env.step("\\boxed{1}")
        env.close()
        assert factory.idle == 1 and factory.reused == 0
        env = factory(max_turns=10)  # the healthy worker comes back
        assert factory.reused == 1 and factory.idle == 0
        env.close()


def test_a_closed_environment_cannot_drive_the_worker_it_handed_back(config):
    with se.SandboxedFactory(GUESS_SOURCE, config=config) as factory:
        env = factory(max_turns=10)
        env.reset(seed=0)
        env.close()
        with pytest.raises(ValueError, match="closed"):
            env.step("\\boxed{1}")


def test_the_factory_honours_the_recycle_bound(config):
    recycling = config.replace(recycle_after_episodes=2)
    with se.SandboxedFactory(GUESS_SOURCE, config=recycling) as factory:
        dirs = []
        for seed in range(5):
            env = factory(max_turns=10)
            env.reset(seed=seed)
            dirs.append(env._handle.work_dir)
            env.close()
        # Two episodes per worker: reused once, then closed (not kept) at the bound.
        assert dirs[0] == dirs[1] != dirs[2] == dirs[3] != dirs[4]
        assert factory.reused == 2


def test_different_kwargs_never_share_a_worker(config):
    with se.SandboxedFactory(GUESS_SOURCE, config=config) as factory:
        env = factory(max_turns=10, high=5)
        env.reset(seed=0)
        env.close()
        other = factory(max_turns=10, high=500)
        assert factory.reused == 0
        assert "between 1 and 500" in other.reset(seed=0)[0]
        other.close()
        assert factory.idle == 2


def test_a_kept_worker_closed_with_its_pool_is_not_handed_out(config):
    pool = spade_sandbox.SandboxPool(config, size=0)
    factory = se.SandboxedFactory(GUESS_SOURCE, pool=pool)
    env = factory(max_turns=10)
    env.reset(seed=0)
    env.close()
    assert factory.idle == 1
    pool.close()  # closes every environment it opened, the kept one too
    with pytest.raises(spade_sandbox.InfrastructureError, match="closed"):
        factory(max_turns=10)  # as without reuse: the closed pool refuses
    assert factory.idle == 0


def test_episodes_stepped_in_two_halves_equal_the_in_process_ones(config):
    # the runner sends every sandboxed step of a round before collecting any (start_step)
    def specs(sandbox):
        return example_specs(sandbox=True, sandbox_config=config) if sandbox else example_specs()

    agent = se.RandomAgent(7)
    inside = se.run_episodes(specs(True), lambda b: [agent(m) for m in b], concurrency=8)
    agent = se.RandomAgent(7)
    outside = se.run_episodes(specs(False), lambda b: [agent(m) for m in b], concurrency=8)
    probe = specs(True)[0].factory(max_turns=3)
    assert callable(probe.start_step)
    probe.close()
    assert all(r.error is None for r in inside)
    assert [r.to_dict()["turns"] for r in inside] == [r.to_dict()["turns"] for r in outside]


# -- the Gymnasium path leaves nothing behind (benchmarks/bench_gym_lifecycle.py: 1,000) ----


def _descendants() -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@pytest.fixture
def work_root(tmp_path, monkeypatch):
    """A private SPADE_SANDBOX_WORK_ROOT, so that only this test's work dirs are counted."""
    root = tmp_path / "work"
    root.mkdir(mode=0o755)
    monkeypatch.setenv("SPADE_SANDBOX_WORK_ROOT", str(root))
    return root


def _counts(root) -> tuple[int, int, int]:
    return len(_descendants()), len(os.listdir("/proc/self/fd")), len(os.listdir(root))


GYM_ID = f"spade/{se.load_corpus('example').ids()[0]}"


@pytest.mark.slow  # 50 workers started one after another: 25 s on 2 idle cores, 90 s under load
@pytest.mark.timeout(600)
def test_fifty_make_reset_close_cycles_leave_no_process_fd_or_work_dir(work_root):
    gymnasium.make(GYM_ID, sandbox=True).close()  # imports and the corpus load
    gc.collect()
    before = _counts(work_root)
    kept = []  # closed environments still referenced leave nothing either
    for i in range(50):
        env = gymnasium.make(GYM_ID, sandbox=True)
        assert env.reset(seed=i)[0]
        env.close()
        kept.append(env)
    assert _counts(work_root) == before
    assert all(e.unwrapped._finalizer.alive is False for e in kept)


def test_an_environment_never_closed_is_closed_when_collected(work_root):
    before = _counts(work_root)
    env = gymnasium.make(GYM_ID, sandbox=True)
    env.reset(seed=0)
    assert _counts(work_root) != before  # a worker, its fds and its work dir
    del env
    gc.collect()
    assert _counts(work_root) == before


def test_an_environment_never_closed_is_closed_at_interpreter_exit(work_root):
    code = (
        "import gymnasium, spade_envs\n"
        f"env = gymnasium.make({GYM_ID!r}, sandbox=True)\n"
        "env.reset(seed=0)\n"
        "print(env.unwrapped._env._handle.work_dir, flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    work_dir = proc.stdout.strip()
    assert work_dir.startswith(str(work_root))
    assert not os.path.exists(work_dir) and os.listdir(work_root) == []
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _cwd(p).startswith(work_dir)]


def _cwd(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def test_a_shared_factory_stays_open_until_its_owner_closes_it(config, work_root):
    here = config.replace(work_root=str(work_root))
    factory = se.load_env(GUESS_SOURCE, sandbox=True, sandbox_config=here)
    a = se.SpadeGymEnv(factory, close_factory=False)
    a.reset(seed=0)
    a.close()
    assert factory.idle == 1  # kept for the next environment of this factory
    b = se.SpadeGymEnv(factory)  # owns it: closing b closes the factory's idle workers
    assert factory.reused == 1
    b.reset(seed=1)
    b.close()
    assert factory.idle == 0 and os.listdir(work_root) == []
