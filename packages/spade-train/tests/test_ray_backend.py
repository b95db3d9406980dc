"""The ray backend on a real local Ray cluster (2 CPUs) with the local backend inside actors."""

from __future__ import annotations

import importlib.util
import threading
import time

import pytest
import torch

ray = pytest.importorskip("ray")

from spade_train.backends import BackendError, make_backend  # noqa: E402
from spade_train.types import SamplingParams, TrainSample  # noqa: E402

torch.set_num_threads(1)

HAVE_LOCAL = importlib.util.find_spec("spade_train.backends.local") is not None
needs_local = pytest.mark.skipif(
    not HAVE_LOCAL, reason="spade_train.backends.local (the local backend) is not written yet"
)
OPTS = {"model": "tiny:qwen3", "seed": 0, "lr": 1e-3, "device": "cpu", "dtype": "float32"}
CONVS = [
    [{"role": "user", "content": "Say a number."}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}],
    [{"role": "user", "content": "Count to three."}],
]


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _samples(gens) -> list[TrainSample]:
    out = []
    for i, g in enumerate(gens):
        n = len(g.prompt_ids)
        out.append(
            TrainSample(
                input_ids=g.prompt_ids + g.completion_ids,
                loss_mask=[0] * n + [1] * len(g.completion_ids),
                old_logprobs=[0.0] * n + list(g.logprobs),
                advantage=1.0 if i % 2 == 0 else -1.0,
                role="agent" if i % 2 == 0 else "designer",
            )
        )
    return out


def test_bad_options_are_backend_errors():
    with pytest.raises(BackendError, match="num_trainers"):
        make_backend("ray", num_trainers=2, **OPTS)
    with pytest.raises(BackendError, match="num_rollout_workers"):
        make_backend("ray", num_rollout_workers=0, **OPTS)
    with pytest.raises(BackendError, match="call_timeout_s"):
        make_backend("ray", call_timeout_s=0, **OPTS)


@needs_local
def test_same_generations_and_losses_as_in_process():
    params = SamplingParams(max_new_tokens=8, temperature=1.0, seed=11)
    local = make_backend("local", **OPTS)
    remote = make_backend("ray", colocate=False, call_timeout_s=120, **OPTS)
    try:
        want, got = local.generate(CONVS, params), remote.generate(CONVS, params)
        assert [g.text for g in got] == [g.text for g in want]
        assert [g.completion_ids for g in got] == [g.completion_ids for g in want]
        for step in range(2):
            samples = _samples(want)
            m_local, m_ray = local.train_step(samples), remote.train_step(samples)
            assert abs(m_local["loss"] - m_ray["loss"]) < 1e-6, (step, m_local, m_ray)
            local.publish_weights()
            remote.publish_weights()
            want = local.generate(CONVS, params)
            got = remote.generate(CONVS, params)
            assert [g.text for g in got] == [g.text for g in want]
            for a, b in zip(got, want, strict=True):
                assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-5
    finally:
        remote.close()
        local.close()


@needs_local
def test_killed_rollout_worker_is_restarted_or_fails_clearly():
    params = SamplingParams(max_new_tokens=16, seed=5)
    backend = make_backend("ray", num_rollout_workers=1, call_timeout_s=60, **OPTS)
    try:
        before = backend.generate(CONVS, params)
        backend.train_step(_samples(before))
        backend.publish_weights()
        reference = backend.generate(CONVS, params)  # the published weights' answer
        killer = threading.Timer(0.3, lambda: ray.kill(backend._rollout[0]))
        start = time.monotonic()
        killer.start()
        try:
            after = backend.generate(CONVS, params)
        except BackendError as exc:  # restart failed too: a clear error, in bounded time
            assert "rollout worker 0" in str(exc)
        else:  # restarted from the last published weights: the same answer
            assert [g.text for g in after] == [g.text for g in reference]
        killer.join()
        assert time.monotonic() - start < 2 * 60 + 30
        # killed between cycles: the next call restarts the worker and completes
        ray.kill(backend._rollout[0])
        again = backend.generate(CONVS, params)
        assert [g.text for g in again] == [g.text for g in reference]
        # a call that cannot finish in time fails with BackendError instead of hanging
        backend.timeout = 0.2
        start = time.monotonic()
        with pytest.raises(BackendError, match="timed out|failed twice"):
            backend.generate(CONVS * 8, SamplingParams(max_new_tokens=256, seed=1))
        assert time.monotonic() - start < 30
    finally:
        backend.timeout = 60
        backend.close()


def test_sandbox_pool_matches_validate_many():
    sc = pytest.importorskip("spade_corpus")
    se = pytest.importorskip("spade_envs")
    from spade_train.backends.ray import RaySandboxPool

    corpus = se.load_corpus("example")
    recs = corpus.records[:3]
    items = [sc.ValidationItem(corpus.sources[r.id], r.hint, r.id) for r in recs]
    items.append(sc.ValidationItem("x = (", "no hint", "broken"))
    want = sc.validate_many(items, workers=1, progress=False)
    pool = RaySandboxPool(num_workers=2, num_cpus_per_worker=0.5, call_timeout_s=120)
    try:
        got = pool.validate_many(items)
    finally:
        pool.close()
    assert [r.env_id for r in got] == [r.env_id for r in want] == [i.env_id for i in items]
    assert [(r.valid, r.reason, r.stage) for r in got] == [
        (r.valid, r.reason, r.stage) for r in want
    ]
    assert got[-1].reason == "syntax_error" and all(r.valid for r in got[:3])
