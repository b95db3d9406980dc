"""Stop strings that count only outside braces the reply opened (backends/stops.py)."""

import pytest
import torch
from spade_train.backends import make_backend
from spade_train.backends.sglang import sampling_payload
from spade_train.backends.stops import BalancedStop, first_stop
from spade_train.config import load_recipe
from spade_train.errors import BackendError
from spade_train.types import SamplingParams


@pytest.mark.parametrize(
    "text, stops, balanced, end",
    [
        ("6}", ["}"], False, 2),
        ("6}", ["}"], True, 2),
        ("\n\\text{Breakpoint: 6}", ["}"], False, 21),  # the plain stop cuts inside
        ("\n\\text{Breakpoint: 6}", ["}"], True, None),  # ... a balanced one keeps going
        ("\n\\text{Breakpoint: 6}}", ["}"], True, 22),
        ("\\frac{1}{2}} and more}", ["}"], True, 12),
        ("{{}", ["}"], True, None),
        ("a b", [" "], True, 2),
        ("{a b} c", [" "], True, 6),  # a space inside the reply's own braces does not count
        ("x END y}", ["}", "END"], True, 5),
        ("no stop here", ["}"], True, None),
        ("", ["}"], True, None),
    ],
)
def test_first_stop(text, stops, balanced, end):
    assert first_stop(text, stops, balanced) == end


def test_the_criterion_stops_a_row_at_the_brace_that_closes_the_box():
    backend = make_backend("local", model="tiny:qwen3", seed=0, threads=1)
    tok = backend.tokenizer
    prompt = tok.encode("Answer: \\boxed{")
    reply = tok.encode("\\text{6}} trailing")
    criterion = BalancedStop(backend._decode, ["}"], len(prompt))
    stopped_at = None
    for k in range(1, len(reply) + 1):
        ids = torch.tensor([prompt + reply[:k], prompt + reply[:1] + [reply[0]] * (k - 1)])
        done = criterion(ids, torch.zeros(2, 1))
        assert done.shape == (2,) and done.dtype == torch.bool
        assert not bool(done[1])  # the second row never closes the reply's own brace
        if bool(done[0]) and stopped_at is None:
            stopped_at = k
    assert stopped_at is not None
    assert tok.decode(reply[:stopped_at]).startswith("\\text{6}}")
    assert not tok.decode(reply[: stopped_at - 1]).startswith("\\text{6}}")


@pytest.mark.parametrize("balanced", [False, True])
def test_a_generation_ends_on_the_token_that_completes_the_first_counted_stop(balanced):
    backend = make_backend("local", model="tiny:qwen3", seed=0, threads=1, gen_batch_size=8)
    chats = [[{"role": "user", "content": f"Say something, {i}."}] for i in range(8)]
    params = SamplingParams(
        max_new_tokens=24, temperature=1.0, seed=5, stop=(" ", "}"), balanced_stop=balanced
    )
    stopped = 0
    for g in backend.generate(chats, params):
        text = backend._decode(g.completion_ids)
        if g.finish_reason == "stop" and g.completion_ids[-1] != backend.eos_id:
            stopped += 1
            assert first_stop(text, params.stop, balanced) is not None
            before = backend._decode(g.completion_ids[:-1])
            assert first_stop(before, params.stop, balanced) is None
        elif g.finish_reason == "length":
            assert first_stop(text, params.stop, balanced) is None
    assert stopped > 0


def test_backends_without_it_refuse_it():
    with pytest.raises(BackendError, match="balanced_stop.*local backend only"):
        sampling_payload(SamplingParams(stop=("}",), balanced_stop=True))
    assert "stop" in sampling_payload(SamplingParams(stop=("}",)))


def test_the_quickstart_agent_uses_it():
    cfg = load_recipe("quickstart")
    assert cfg.agent.sampling.to_params(1).balanced_stop
    assert not cfg.designer.sampling.to_params(1).balanced_stop
