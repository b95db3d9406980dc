"""Micro-batches whose rows share their prompt (backends/train_parts.py) in the local step."""

import torch
from spade_train.backends import make_backend, train_parts
from spade_train.types import SamplingParams, TrainSample

LONG = [{"role": "user", "content": "Design a game about " + "counting sheep, " * 12}]
OTHER = [{"role": "user", "content": "answer 1"}]


def _sample(head: list[int], tail: list[int], advantage: float = 1.0) -> TrainSample:
    ids = head + tail
    return TrainSample(
        ids, [0] * len(head) + [1] * len(tail), [0.0] * len(ids), advantage, "designer"
    )


def test_samples_are_grouped_by_their_untrained_head():
    p, q = list(range(100, 140)), list(range(200, 240))  # two 40-token prompts
    a1, a2, a3 = _sample(p, [1, 2]), _sample(p, [3, 4, 5, 6]), _sample(p, [7])
    b1, short = _sample(q, [8]), _sample([1, 2, 3], [4, 5])  # alone; a head under 32 tokens
    cut = _sample(p, list(range(30)))  # longer than max_seq_len below: cut, so not shared
    samples = [short, a1, b1, cut, a2, a3]
    parts, rest = train_parts.shared_head_parts(samples, 60, max_rows=8, max_tokens=None)
    assert [([id(s) for s in part], head) for part, head in parts] == [
        ([id(a3), id(a1), id(a2)], 40)  # by length within the group
    ]
    assert rest == [short, b1, cut]  # in their given order
    # rows and tokens cap a part; a part left with one row shares nothing
    parts, rest = train_parts.shared_head_parts(samples, 60, max_rows=2, max_tokens=None)
    assert [len(part) for part, _ in parts] == [2] and rest == [short, b1, cut, a2]
    parts, _ = train_parts.shared_head_parts(samples, 60, max_rows=8, max_tokens=40 + 2 * 2)
    assert [len(part) for part, _ in parts] == [2]  # a2's 4-token tail would pass the budget
    assert train_parts.untrained_head(_sample(p, []), 60) == 0  # nothing trained


def _step(share: bool, monkeypatch):
    if not share:
        monkeypatch.setattr(train_parts, "MIN_SHARED", 10**9)
    backend = make_backend("local", model="tiny:qwen3", lr=1e-2, micro_batch_size=4, seed=4,
                           dtype="float32")  # fp32 on a GPU too: the comparison's tolerance  # fmt: skip
    gens = backend.generate([LONG, LONG, LONG, OTHER], SamplingParams(max_new_tokens=6, seed=4))
    batch = [
        TrainSample(
            g.prompt_ids + g.completion_ids,
            [0] * len(g.prompt_ids) + [1] * len(g.completion_ids),
            [0.0] * len(g.prompt_ids) + g.logprobs,
            adv,
            "designer",
        )
        for g, adv in zip(gens, (1.0, -0.5, 0.25, 0.7), strict=True)
    ]
    calls = []
    hook = backend.model.get_decoder().register_forward_pre_hook(
        lambda _m, _a, kw: calls.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    metrics = backend.train_step(batch)
    hook.remove()
    grads = [p.grad.clone() for p in backend.model.parameters()]
    return metrics, grads, calls, len(gens[0].prompt_ids)


def test_a_shared_prompt_runs_once_with_the_same_step(monkeypatch):
    shared, shared_grads, shared_calls, prompt = _step(True, monkeypatch)
    plain, plain_grads, plain_calls, _ = _step(False, monkeypatch)
    assert prompt >= 32  # long enough to share (train_parts.MIN_SHARED)
    assert (1, prompt) in shared_calls  # the prompt once, then the three completions on it
    assert all(rows <= 1 or width < prompt for rows, width in shared_calls)
    assert all(width > prompt or rows == 1 for rows, width in plain_calls if rows > 1)
    assert abs(shared["loss"] - plain["loss"]) < 1e-6
    assert shared["tokens"] == plain["tokens"] and shared["trained_samples"] == 4.0
    assert abs(shared["grad_norm"] - plain["grad_norm"]) < 1e-5
    for got, want in zip(shared_grads, plain_grads, strict=True):
        assert torch.allclose(got, want, atol=1e-6)
