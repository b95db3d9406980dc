"""The ``designer.skeleton: holes`` template: the policy writes only the hole of ``reset()``,
the template's parts close the program, and the assembled program is judged by the real
strict validator in the sandbox."""

from __future__ import annotations

import pytest
import spade_corpus as sc
import torch
from spade_train.backends.local import LocalBackend
from spade_train.config import load_recipe
from spade_train.core import skeleton as sk
from spade_train.core.design import build_designer_messages
from spade_train.core.scaffold import SCAFFOLD_PREFILL, copies_of_references
from spade_train.errors import RecipeError
from spade_train.loss import token_logprobs
from spade_train.play import samples_from_generations
from spade_train.resources import NO_GROUNDING, QUIET
from spade_train.steps import design as s_design
from spade_train.steps.design import reply_text
from spade_train.types import Generation

PRODUCT = (
    "\n        a, b = rng.randint(11, 49), rng.randint(11, 49)\n"
    "        self.answer = a * b\n"
    '        return f"What is {a} times {b}?"\n'
)


def _program(hole: str, skill: str = "Math") -> str:
    reply = sk.assemble(SCAFFOLD_PREFILL + sk.prefix(skill), hole)
    assert reply.startswith(SCAFFOLD_PREFILL) and reply.endswith("\n```")
    return reply[len(SCAFFOLD_PREFILL) : -len("```")]


def test_the_hole_ends_where_a_new_method_or_block_starts() -> None:
    assert sk.hole_of(PRODUCT + "\n    def step(self, action):\n") == PRODUCT.rstrip()
    assert sk.hole_of(PRODUCT + "\n```\nHINT: multiply") == PRODUCT.rstrip()
    assert sk.hole_of(PRODUCT + "\nif __name__ == '__main__':\n") == PRODUCT.rstrip()
    assert sk.hole_of("        x = 1\n        y = 2") == "        x = 1\n        y = 2"  # no stop


def test_an_assembled_program_with_a_real_puzzle_passes_the_strict_validator() -> None:
    report = sc.validate_source(_program(PRODUCT), "Multiply the tens first.", skill="Math")
    assert report.valid, report.message
    assert report.checks.get("class_name") == sk.class_name("Math") == "MathPuzzleEnv"


def test_an_assembled_program_that_shows_its_answer_is_rejected() -> None:
    leak = "\n        self.answer = rng.randint(100, 999)\n        return f'Say {self.answer}.'\n"
    report = sc.validate_source(_program(leak), "Read it.", skill="Math")
    assert not report.valid and report.reason == "solution_leaked"


def test_a_starter_style_pair_is_read_and_a_missing_question_fails_in_reset() -> None:
    pair = PRODUCT.replace("return f", "text = f") + "        return text, {}\n"
    assert sc.validate_source(_program(pair), "Multiply.", skill="Math").valid
    report = sc.validate_source(
        _program("\n        self.answer = rng.randint(1, 99)\n"), "Guess.", skill="Math"
    )
    assert not report.valid and "make() must return the question text" in (report.message or "")


def test_the_template_alone_is_no_near_copy_of_a_shipped_game() -> None:
    assert copies_of_references([("d", _program(PRODUCT))]) == {}


def test_the_skeleton_prefills_the_scaffolded_prompt_with_the_template_prefix() -> None:
    conv = build_designer_messages("Logic", compact=True, scaffold=True, skeleton=True)
    assert conv[-1] == {"role": "assistant", "content": SCAFFOLD_PREFILL + sk.prefix("Logic")}
    assert 'class LogicPuzzleEnv:\n    skill = "Logic"' in conv[-1]["content"]
    plain = build_designer_messages("Logic", compact=True, scaffold=True)
    assert plain[-1]["content"] == SCAFFOLD_PREFILL and plain[:-1] == conv[:-1]


def test_a_skeleton_reply_is_the_prefill_the_hole_and_the_suffix() -> None:
    cfg = load_recipe("quickstart", ["designer.skeleton=holes"])
    conv = build_designer_messages("Math", compact=True, scaffold=True, skeleton=True)
    text = reply_text(cfg, conv, PRODUCT + "\n    def step(")
    assert text == SCAFFOLD_PREFILL + sk.prefix("Math") + PRODUCT.rstrip() + sk.suffix() + "```"
    off = load_recipe("quickstart", [])
    assert off.designer.skeleton == "off"
    scaffold_conv = build_designer_messages("Math", compact=True, scaffold=True)
    assert reply_text(off, scaffold_conv, "x = 1\n```") == SCAFFOLD_PREFILL + "x = 1\n```"


def test_a_skeleton_needs_the_scaffold() -> None:
    with pytest.raises(RecipeError, match="designer.skeleton"):
        load_recipe("quickstart", ["designer.scaffold=false", "designer.skeleton=holes"])
    with pytest.raises(RecipeError):
        load_recipe("quickstart", ["designer.skeleton=blanks"])


class ForcedHole(LocalBackend):
    """The real local backend (tiny Qwen3) whose designer continuation is forced to ``hole``
    (its real tokens and log-probs under the policy) and whose hint pass says ``hint``."""

    def __init__(self, hole: str, hint: str, **kwargs):
        super().__init__(**kwargs)
        self.hole, self.hint = hole, hint

    def generate(self, conversations, params, tools=None):
        gens = super().generate(conversations, params, tools=tools)
        text = self.hole if "You design text games" in conversations[0][0]["content"] else self.hint
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        out = []
        for gen in gens:
            full = torch.tensor([gen.prompt_ids + ids])
            with torch.no_grad():
                lp, _ = token_logprobs(self.model, full, torch.ones_like(full))
            logprobs = lp[0, len(gen.prompt_ids) - 1 :].tolist()[: len(ids)]
            out.append(Generation(text, gen.prompt_ids, ids, logprobs))
        return out


def test_a_skeleton_design_trains_only_the_hole_the_policy_wrote() -> None:
    cfg = load_recipe(
        "quickstart",
        [
            "backend.model=tiny:qwen3",
            "backend.max_seq_len=4096",
            "designer.prompts_per_cycle=1",
            "designer.group_size=1",
            "designer.skeleton=holes",
            "cold_start.enabled=false",
        ],
    )
    hole = PRODUCT
    backend = ForcedHole(hole, "HINT: Multiply.", **cfg.backend.backend_kwargs(cfg.seed))
    memory = sc.EnvironmentMemory(capacity=4)
    (d,) = s_design.design(cfg, backend, 1, memory, NO_GROUNDING, QUIET)
    assert d.parsed and d.hint == "Multiply."
    assert (d.source or "").strip() == _program(hole).strip()
    prompt = backend.tokenizer.decode(d.generation.prompt_ids)
    assert prompt.endswith(sk.prefix("Math"))  # the template's prefix is prompt context
    (sample,) = samples_from_generations([d.generation], 0.0, "designer")
    trained = [t for t, m in zip(sample.input_ids, sample.loss_mask, strict=True) if m]
    assert backend.tokenizer.decode(trained) == hole  # the policy's tokens, nothing else
    assert sum(sample.loss_mask) == len(d.generation.completion_ids)
    assert "def step(self, action):" in (d.source or "")  # the suffix: validated, never trained
    assert "made = self.make(seed)" not in prompt  # nor shown to the policy


def test_a_hole_that_repeats_a_starter_puzzle_is_a_copy_though_the_program_is_not() -> None:
    odd = (
        "\n        numbers = [rng.randint(1, 30) for _ in range(7)]\n"
        "        self.answer = sum(n % 2 for n in numbers)\n"
        '        listed = " ".join(str(n) for n in numbers)\n'
        '        return f"Numbers: {listed}. How many of them are odd?"\n'
    )
    program = _program(odd, "Logic")
    assert copies_of_references([("d", program)]) == {}  # the template hides it as a whole
    ref, share = sk.shared_puzzle(program)
    assert ref == "ref:starter/logic_odd_count" and share >= sk.PUZZLE_COPY_SHARE
    letters = (
        '\n        words = ["maple", "river", "stone", "cloud", "piano"]\n'
        "        word = words[rng.randrange(len(words))]\n"
        "        self.answer = len(set(word))\n"
        '        return f"How many different letters does {word.upper()} have?"\n'
    )
    assert sk.shared_puzzle(_program(letters))[1] < sk.PUZZLE_COPY_SHARE
    # two draws and one operation: identifier- and literal-blind, a shipped game's puzzle too
    assert sk.shared_puzzle(_program(PRODUCT))[1] >= sk.PUZZLE_COPY_SHARE
    assert sk.shared_puzzle("class A:\n    pass\n") == ("", 0.0)
