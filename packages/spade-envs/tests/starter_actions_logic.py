"""Random but well-formed actions for the staged Logic games (tools/staging_logic)."""


def _boxed(text):
    return f"\\boxed{{{text}}}"


def _latin(rng, _observation):
    triples = [
        f"{rng.randint(1, 5)} {rng.randint(1, 5)} {rng.randint(1, 5)}"
        for _ in range(rng.randint(1, 3))
    ]
    return _boxed("; ".join(triples))


def _bits(rng, _observation):
    return _boxed("".join(rng.choice("01") for _ in range(12)))


def _colouring(rng, _observation):
    pairs = [f"{rng.choice('ABCDEFGHIJKL')}={rng.choice('RGB')}" for _ in range(rng.randint(1, 4))]
    return _boxed(", ".join(pairs))


def _guard(rng, _observation):
    if rng.random() < 0.7:
        low = rng.randint(1, 100)
        return _boxed(f"ask {low}-{rng.randint(low, 100)}")
    return _boxed(f"open {rng.randint(1, 100)}")


def _houses(rng, _observation):
    columns = [
        rng.sample(items, 4)
        for items in (
            ["red", "green", "blue", "white"],
            ["cat", "dog", "fish", "bird"],
            ["tea", "coffee", "milk", "juice"],
        )
    ]
    houses = [f"{h + 1}: {columns[0][h]} {columns[1][h]} {columns[2][h]}" for h in range(4)]
    return _boxed("; ".join(houses))


def _picture(rng, _observation):
    density = rng.uniform(0.3, 0.7)
    rows = ["".join("#" if rng.random() < density else "." for _ in range(6)) for _ in range(6)]
    return _boxed(";".join(rows))


def _seating(rng, _observation):
    guests = ["Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hal"]
    return _boxed(" ".join(["Ada", *rng.sample(guests, 7)]))


def _gate(rng, _observation):
    if rng.random() < 0.7:
        return _boxed("test " + "".join(rng.choice("01") for _ in range(5)))
    kind = rng.choice(["AND", "OR", "XOR", "NAND", "NOR", "XNOR"])
    return _boxed(f"faulty G{rng.randint(1, 12)} {kind}")


RANDOM_ACTIONS = {
    "logic_latin_fill": _latin,
    "logic_clause_repair": _bits,
    "logic_three_colouring": _colouring,
    "logic_alternating_guard": _guard,
    "logic_four_houses": _houses,
    "logic_nonogram": _picture,
    "logic_round_table": _seating,
    "logic_gate_fault": _gate,
}

# Measured over 2,000 seeded episodes per game (seeds 10000-11999, rng random.Random(seed)).
MEASURED_RANDOM_WIN_RATE = {
    "logic_latin_fill": 0.0,
    "logic_clause_repair": 0.001,
    "logic_three_colouring": 0.0,
    "logic_alternating_guard": 0.001,
    "logic_four_houses": 0.0,
    "logic_nonogram": 0.0,
    "logic_round_table": 0.0,
    "logic_gate_fault": 0.0155,
}
