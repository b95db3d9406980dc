"""The leak detector: each normalised form is found, multiple choice stays legal, a short
answer needs a label, and one seed alone is not enough."""

from __future__ import annotations

import base64

import pytest
from spade_envs.leaks import SeedView, answer_of, find_leak, info_text, leak_evidence, spelled


@pytest.mark.parametrize(
    ("answer", "text", "form"),
    [
        ("42", "Debug: 42", "number"),
        ("42", "I rolled dice.\n42\nNow guess.", "number"),
        ("42", "The hidden total is 42.0 today.", "number_format"),
        ("42", "The hidden total is 4.2e1 today.", "number_format"),
        ("1000", "Stock level is 1,000 units.", "number_format"),
        ("42", "A little bird says forty-two.", "spelled"),
        ("42", "A little bird says Forty Two.", "spelled"),
        ("orange", "Mystery word (backwards): egnaro", "reversed"),
        ("Orange", "Mystery word: ORANGE", "case_or_spacing"),
        ("new york", "City clue:  New   York", "case_or_spacing"),
        ("orange", "Token " + base64.b64encode(b"orange").decode() + " ends here", "base64"),
        ("orange", "Token " + b"orange".hex() + " ends here", "hex"),
    ],
)
def test_each_form_is_found(answer: str, text: str, form: str) -> None:
    leak = find_leak(answer, text, "first_observation")
    assert leak is not None and leak.form == form


def test_spelled_numbers() -> None:
    assert spelled(42) == ["forty-two", "forty two"]
    assert spelled(7) == ["seven"]
    assert "three hundred and five" in spelled(305)
    assert spelled(1000) == []


def test_answer_of_reads_the_last_box() -> None:
    assert answer_of("think \\boxed{ 42 }") == "42"
    assert answer_of("  plain ") == "plain"


@pytest.mark.parametrize(
    "text",
    [
        "Pick the colour of the sky: red, blue, green or yellow.",
        "Options:\nA) red\nB) blue\nC) green",
        "Which is prime? 12 15 17 21",
        "Numbers on the board: 3, 17, 40. Which one is prime?",
    ],
)
def test_answer_among_candidates_is_not_a_leak(text: str) -> None:
    answer = "17" if "prime" in text else "blue"
    assert find_leak(answer, text, "first_observation") is None


@pytest.mark.parametrize(
    "text",
    [
        "Options: red, blue, green. The answer is blue.",
        "Options:\nA) red\nB) blue\nC) green\nCorrect: blue",
        "Options: red, blue, green\nAnswer:\nblue",
    ],
)
def test_answer_singled_out_among_candidates_is_a_leak(text: str) -> None:
    assert find_leak("blue", text, "first_observation") is not None


def test_short_answers_need_a_label() -> None:
    assert find_leak("7", "Roll a die 7 times and tell me the sum of 2 and 5.", "o") is None
    assert find_leak("yes", "Answer yes or no: is 9 prime?", "o") is None
    assert find_leak("7", "Roll the dice. (secret: 7)", "o") is not None
    assert find_leak("yes", "Is 9 odd? The answer is yes", "o") is not None
    assert find_leak("seven", "one two three", "o") is None


def test_info_values_are_singled_out() -> None:
    info = {"turn": 3, "target_word": "orange"}
    assert find_leak("orange", info_text(info), "probe:empty:info", in_info=True) is not None
    assert find_leak("orange", info_text({"turn": 3}), "probe:empty:info", in_info=True) is None


def view(seed: int, text: str) -> SeedView:
    return SeedView(seed, str(40 + seed), [("first_observation", text.format(40 + seed))], [])


def test_most_seeds_decide() -> None:
    leaky = [view(s, "Guess. (debug {})") for s in range(4)]
    shown = leak_evidence(leaky)
    assert shown is not None and shown[1].seed == 3 and "debug 43" in shown[1].excerpt
    one_seed = [view(0, "Guess. (debug {})")] + [view(s, "Guess.") for s in range(1, 4)]
    assert leak_evidence(one_seed) is None
    most = [view(s, "Guess. (debug {})") for s in range(3)] + [view(3, "Guess.")]
    assert leak_evidence(most) is not None


def test_a_fixed_format_example_is_not_a_leak() -> None:
    views = [
        SeedView(
            s,
            answer,
            [("first_observation", "Answer A, B, C or D, e.g. \\boxed{C}.")],
            [],
            f"\\boxed{{{answer}}}",
        )
        for s, answer in enumerate("CCCAC")
    ]
    assert leak_evidence(views) is None
    moving = [
        SeedView(
            s,
            answer,
            [("first_observation", f"Answer A-D, e.g. \\boxed{{{answer}}}.")],
            [],
            f"\\boxed{{{answer}}}",
        )
        for s, answer in enumerate("CABDC")
    ]
    assert leak_evidence(moving) is not None


def digit_view(seed: int, answer: int, text: str) -> SeedView:
    return SeedView(seed, str(answer), [("first_observation", text)], [])


def test_a_spelled_single_digit_singled_out_on_most_seeds_is_a_leak() -> None:
    answers = [7, 3, 9, 4, 7]
    views = [
        digit_view(i, a, f"Last digit of 1{a}^5? A little bird whispers: {_word(a)}.")
        for i, a in enumerate(answers)
    ]
    shown = leak_evidence(views)
    assert shown is not None and "spelled out" in shown[0] and shown[1].probe == "first_observation"


def test_a_digit_word_of_the_game_text_is_not_a_leak() -> None:
    # "one of boxes" on every seed, and the answer is 1 on most seeds by chance
    text = "A prize is in one of boxes 1 to 6. Which box holds it?"
    views = [digit_view(i, a, text) for i, a in enumerate([1, 1, 1, 4, 2])]
    assert leak_evidence(views) is None
    # digit words all over the text: the answer's word is no rarer than the decoys'
    busy = "Pick zero, one, two, three, four, five, six, seven, eight or nine."
    assert leak_evidence([digit_view(i, a, busy) for i, a in enumerate([3, 5, 8])]) is None


def _word(n: int) -> str:
    return spelled(n)[0]
