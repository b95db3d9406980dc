"""HFClient against a real (tiny, randomly initialised) transformers checkpoint built here."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from spade_eval import HFClient  # noqa: E402

TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<assistant> {% endif %}"
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.set_num_threads(1)
    torch.manual_seed(0)
    words = ["<pad>", "<eos>", "<unk>", "<user>", "<assistant>", "<system>"]
    words += [f"w{i}" for i in range(40)] + ["hello", "world", "2+2", "?"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    fast.chat_template = TEMPLATE
    cfg = transformers.LlamaConfig(
        vocab_size=len(words), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
        pad_token_id=0, eos_token_id=1, bos_token_id=1,
    )  # fmt: skip
    path = tmp_path_factory.mktemp("tiny")
    transformers.LlamaForCausalLM(cfg).save_pretrained(path)
    fast.save_pretrained(path)
    return str(path)


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
