"""Scaffold examples come from the starter corpus; copies of reference games are recognised."""

from __future__ import annotations

import re

import spade_envs as se
from spade_train.core.scaffold import (
    SCAFFOLD_STOP,
    close_reply,
    copies_of_references,
    fallback_example,
    pick_example,
    reference_sources,
    scaffold_examples,
)


def test_each_skill_has_two_examples_from_the_starter_training_split() -> None:
    corpus = se.load_corpus(se.starter_corpus_path())
    train = {corpus.source(r.id) for r in corpus.records if r.split == "train"}
    heldout = {corpus.source(r.id) for r in corpus.records if r.split == "heldout"}
    for skill in se.SKILLS:
        examples = scaffold_examples(skill)
        assert len(examples) == 2 and all(src in train for src, _ in examples)
        assert not any(src in heldout for src, _ in examples)  # held-out games stay unseen
        assert pick_example(skill, 2) == pick_example(skill, 0) != pick_example(skill, 1)


def test_a_skill_without_starter_games_gets_the_fallback() -> None:
    assert scaffold_examples("Juggling") == [fallback_example("Juggling")]
    assert 'skill = "Juggling"' in fallback_example("Juggling")[0]


def test_renamed_copies_are_caught_and_new_games_are_not() -> None:
    source, _ = pick_example("Math", 0)
    renamed = source.replace("SumTriesEnv", "AddEnv").replace("(2, 9)", "(1, 20)")
    renamed = re.sub(r"Too (low|high)", r"Wrong, \1", renamed)
    exact = source.replace("import re\n", "import re  # same\n")
    new = """import random


class ColourMixEnv:
    skill = "Causal"

    def __init__(self, max_turns=3, **kwargs):
        self.max_turns = max_turns
        self.mixes = {}
        self.target = ""

    def reset(self, seed=None):
        rng = random.Random(seed)
        pairs = [("red", "blue", "purple"), ("red", "yellow", "orange"), ("blue", "yellow", "green")]
        a, b, c = pairs[rng.randrange(3)]
        self.target = c
        self.mixes = {frozenset((x, y)): z for x, y, z in pairs}
        return f"Which colour do {a} and {b} paint make together? Reply \\\\boxed{{colour}}.", {}

    def step(self, action):
        said = action.lower().strip()
        won = self.target in said
        return ("Yes." if won else "No."), float(won), True, False, {}

    def solution(self):
        return "\\\\boxed{" + self.target + "}"
"""
    copies = copies_of_references([("a", renamed), ("b", exact), ("c", new), ("d", new + "\n")])
    assert copies["a"].startswith("ref:starter/") and copies["b"].startswith("ref:starter/")
    assert "c" not in copies and "d" not in copies  # like each other, but like no reference
    assert copies_of_references([]) == {}


def test_references_cover_both_shipped_game_corpora() -> None:
    ids = [i for i, _ in reference_sources()]
    assert sum(i.startswith("ref:starter/") for i in ids) == 18
    assert sum(i.startswith("ref:example/") for i in ids) == len(se.load_corpus("example"))


def test_a_script_entry_point_after_the_class_is_cut_and_the_block_closed() -> None:
    body = "class AEnv:\n    skill = 'Math'\n"
    assert close_reply(body + "```") == body + "```"  # closed by the policy: unchanged
    assert close_reply(body) == body  # out of tokens: unchanged (still unterminated)
    for marker in SCAFFOLD_STOP[1:]:
        looped = body + "\n" + marker + "():\n    x = x.to_int()\n    x = x.to"
        assert close_reply(looped) == body.rstrip() + "\n```"
    # a marker after the closing fence is outside the code: unchanged
    after = body + "```\nif __name__ == '__main__':\n"
    assert close_reply(after) == after
