"""Random but well-formed actions for the staged Pattern games (tools/staging_pattern)."""

import string


def _boxed(text):
    return f"\\boxed{{{text}}}"


def _letters(rng, alphabet, low, high):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))


_UPPER = string.ascii_uppercase

RANDOM_ACTIONS = {
    "pattern_string_machine": lambda rng, _: _boxed(
        "ask " + _letters(rng, _UPPER, 1, 6)
        if rng.random() < 0.7
        else "answer " + _letters(rng, _UPPER, 10, 10)
    ),
    "pattern_automaton_rule": lambda rng, _: _boxed(
        "row " + _letters(rng, "01", 3, 6)
        if rng.random() < 0.6
        else "rule "
        + (_letters(rng, "01", 8, 8) if rng.random() < 0.5 else str(rng.randrange(256)))
    ),
    "pattern_hidden_formula": lambda rng, _: _boxed(
        f"f({rng.randint(0, 5)}, {rng.randint(0, 5)})"
        if rng.random() < 0.7
        else f"answer {rng.randint(-20000, 20000)}"
    ),
    "pattern_tile_completion": lambda rng, _: _boxed(
        f"reveal {rng.randint(1, 8)} {rng.randint(1, 12)}"
        if rng.random() < 0.75
        else "answer " + _letters(rng, "ABCDEF", 3, 3)
    ),
    "pattern_odd_one_out": lambda rng, _: _boxed(rng.randint(1, 5)),
    "pattern_repeating_unit": lambda rng, _: _boxed(
        f"show {rng.randint(1, 1000)}"
        if rng.random() < 0.7
        else "answer " + _letters(rng, "ABCD", 5, 5)
    ),
    "pattern_alien_numerals": lambda rng, _: _boxed(
        f"write {rng.randint(0, 9999)}"
        if rng.random() < 0.7
        else f"answer {rng.randint(243, 531440)}"
    ),
    "pattern_growth_rules": lambda rng, _: _boxed(
        "grow " + _letters(rng, "ABC", 2, 4)
        if rng.random() < 0.7
        else "answer " + _letters(rng, "ABC", 12, 40)
    ),
}

# Measured over 2,000 seeded episodes (seeds 10000-11999, agent rng random.Random(seed)).
MEASURED_RANDOM_WIN_RATE = {
    "pattern_string_machine": 0.0,
    "pattern_automaton_rule": 0.0125,
    "pattern_hidden_formula": 0.0,
    "pattern_tile_completion": 0.015,
    "pattern_odd_one_out": 0.0,
    "pattern_repeating_unit": 0.004,
    "pattern_alien_numerals": 0.0,
    "pattern_growth_rules": 0.0,
}
