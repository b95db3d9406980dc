"""Random but well-formed actions for the staged Causal games (tools/staging_causal/)."""

import random
import re


def boxed(text):
    return f"\\boxed{{{text}}}"


def _do_053(rng: random.Random) -> str:
    names = rng.sample("ABCDE", rng.randint(1, 2))
    return "do " + " ".join(f"{n}={rng.randint(-50, 50)}" for n in names)


def _edges_053(rng: random.Random) -> str:
    pairs = [(a, b) for a in "ABCDE" for b in "ABCDE" if a != b]
    chosen = rng.sample(pairs, rng.randint(3, 7))
    return ", ".join(f"{a}>{b}" for a, b in chosen)


def _lamps_055(rng: random.Random, observation: str) -> str:
    lamps = re.search(r"lamps \(([A-Z, ]+)\)", observation).group(1).split(", ")
    chosen = rng.sample(lamps, 4)
    return " ".join(f"{b}={chosen[b - 1]}{rng.randint(0, 2)}" for b in range(1, 5))


def _names_056(observation: str) -> list[str]:
    return re.search(r"quantities ([A-Z, ]+) follow", observation).group(1).split(", ")


def _names_057(observation: str) -> list[str]:
    return re.search(r"quantities ([A-Z, ]+) obey", observation).group(1).split(", ")


def _names_059(observation: str) -> list[str]:
    return re.search(r"drugs ([A-Z, ]+) each", observation).group(1).split(", ")


def _names_060(observation: str) -> list[str]:
    return re.search(r"factors ([A-Z, ]+)\. Its alarm", observation).group(1).split(", ")


RANDOM_ACTIONS = {
    "causal_edge_discovery": lambda rng, _: boxed(
        _do_053(rng) if rng.random() < 0.6 else _edges_053(rng)
    ),
    "causal_fault_root": lambda rng, _: boxed(
        f"{'test' if rng.random() < 0.7 else 'broken'} {rng.randint(1, 60)}"
    ),
    "causal_delayed_lamps": lambda rng, observation: boxed(
        rng.choice([f"press {rng.randint(1, 4)}", "wait"])
        if rng.random() < 0.75
        else _lamps_055(rng, observation)
    ),
    "causal_common_cause": lambda rng, observation: boxed(
        f"do {rng.choice(_names_056(observation))}={rng.randint(-50, 50)}"
        if rng.random() < 0.65
        else "".join(rng.choice("<>=") for _ in range(5))
    ),
    "causal_counterfactual": lambda rng, observation: boxed(
        f"inspect {rng.choice(_names_057(observation))}"
        if rng.random() < 0.6
        else rng.randint(-60, 60)
    ),
    "causal_conflict_pair": lambda rng, _: boxed(
        "run " + " ".join(str(s) for s in sorted(rng.sample(range(1, 13), rng.randint(1, 11))))
        if rng.random() < 0.7
        else "conflict " + " ".join(str(s) for s in rng.sample(range(1, 13), 2))
    ),
    "causal_dose_threshold": lambda rng, observation: boxed(
        f"test {rng.choice(_names_059(observation))} {rng.randint(0, 100)}"
        if rng.random() < 0.7
        else " ".join(f"{d}={rng.randint(5, 60)}" for d in _names_059(observation))
    ),
    "causal_sufficient_sets": lambda rng, observation: boxed(
        "try " + "".join(rng.sample(_names_060(observation), rng.randint(1, 6)))
        if rng.random() < 0.7
        else ", ".join(
            "".join(rng.sample(_names_060(observation), rng.randint(2, 3))) for _ in range(2)
        )
    ),
}

MEASURED_RANDOM_WIN_RATE = {
    "causal_edge_discovery": 0.0,
    "causal_fault_root": 0.0155,
    "causal_delayed_lamps": 0.0,
    "causal_common_cause": 0.003,
    "causal_counterfactual": 0.0135,
    "causal_conflict_pair": 0.0105,
    "causal_dose_threshold": 0.0,
    "causal_sufficient_sets": 0.001,
}
