"""HFClient against a real (tiny, randomly initialised) transformers checkpoint built here."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from spade_eval import HFClient  # noqa: E402

# the `checkpoint` fixture (a tiny random Llama with a word-level tokenizer) is in conftest.py


def test_batched_left_padded_generation_matches_single(checkpoint):
    client = HFClient(checkpoint, batch_size=3, device="cpu")
    chats = [
        [{"role": "user", "content": "hello"}],
        [{"role": "user", "content": "hello world 2+2 ?"}],
        [{"role": "system", "content": "w1 w2"}, {"role": "user", "content": "w3"}],
    ]
    sampling = {"temperature": 0.0, "max_tokens": 6}
    batched = client.complete(chats, sampling)
    single = [client.complete([c], sampling)[0] for c in chats]
    assert len(batched) == 3 and all(isinstance(x, str) for x in batched)
    assert batched == single  # left padding must not change greedy outputs
    assert any(batched)


def test_bad_checkpoint_is_clear_error(tmp_path):
    from spade_eval import EvalConfigError

    with pytest.raises(EvalConfigError, match="not a loadable checkpoint"):
        HFClient(str(tmp_path), device="cpu")
