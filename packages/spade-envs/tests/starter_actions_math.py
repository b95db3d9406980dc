"""Random but well-formed actions for the staged Math games (tools/staging_math)."""

import re


def boxed(text):
    return f"\\boxed{{{text}}}"


def _start_numbers(observation):
    return [int(n) for n in re.search(r"Numbers: ([\d, ]+)\.", observation).group(1).split(", ")]


def _number_move(rng, observation):
    if rng.random() < 0.1:
        return boxed("reset")
    a, b = rng.sample(_start_numbers(observation), 2)
    return boxed(f"{a} {rng.choice('+-*/')} {b}")


def _numeral(rng, low, high):
    return "".join(rng.choice("0123456789ABCDEF") for _ in range(rng.randint(low, high)))


RANDOM_ACTIONS = {
    "math_polynomial_probe": lambda rng, _: boxed(
        f"f({rng.randint(-5, 5)})"
        if rng.random() < 0.6
        else ", ".join(str(rng.randint(-9, 9)) for _ in range(5))
    ),
    "math_number_build": _number_move,
    "math_smooth_gcd": lambda rng, _: boxed(
        f"gcd {rng.randint(2, 1000)}" if rng.random() < 0.7 else rng.randint(1000, 1_000_000)
    ),
    "math_hidden_base": lambda rng, _: boxed(
        f"{_numeral(rng, 1, 3)} + {_numeral(rng, 1, 3)}"
        if rng.random() < 0.6
        else _numeral(rng, 3, 6)
    ),
    "math_balance_weights": lambda rng, _: boxed(
        "weigh " + "".join(rng.sample("ABCDE", 3))
        if rng.random() < 0.6
        else ", ".join(f"{name}={rng.randint(1, 40)}" for name in "ABCDE")
    ),
    "math_lattice_paths": lambda rng, _: boxed(
        f"check {rng.randint(1, 7)} {rng.randint(1, 8)} = {rng.randint(0, 1000)}"
        if rng.random() < 0.6
        else rng.randint(60, 1716)
    ),
    "math_egyptian_fraction": lambda rng, _: boxed(f"1/{rng.randint(2, 200)}"),
    "math_number_reach": lambda rng, _: boxed(rng.choice("ABCD")),
}

MEASURED_RANDOM_WIN_RATE = {
    "math_polynomial_probe": 0.0,
    "math_number_build": 0.0,
    "math_smooth_gcd": 0.0,
    "math_hidden_base": 0.0,
    "math_balance_weights": 0.0,
    "math_lattice_paths": 0.001,
    "math_egyptian_fraction": 0.0,
    "math_number_reach": 0.0015,
}
