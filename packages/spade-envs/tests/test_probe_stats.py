"""The probe battery's statistics: chance rates, unexplained wins, settled probes, seeds."""

from __future__ import annotations

import math

import pytest
import spade_envs as se
from spade_envs.probes import (
    ALPHA,
    PROBE_NAMES,
    ProbeTally,
    same_answer,
    tail_probability,
)
from spade_envs.reward_contract import contract_breach

WIN = [("\\boxed{5}", "Right.", 1.0, True, False)]


def lost(action: str = "\\boxed{0}", reward: float = 0.0, steps: int = 1):
    return [(action, "No.", reward, i == steps - 1, False) for i in range(steps)]


def won(action: str):
    return [(action, "Right.", 1.0, True, False)]


def binomial_tail(n: int, p: float, k: int) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


@pytest.mark.parametrize(("n", "p", "k"), [(5, 0.05, 3), (20, 0.01, 2), (5, 0.25, 0), (3, 0.5, 3)])
def test_tail_is_the_binomial_tail_when_rates_are_equal(n: int, p: float, k: int) -> None:
    assert tail_probability([p] * n, k) == pytest.approx(binomial_tail(n, p, k), rel=1e-9)


def test_same_answer_reads_boxes_numbers_and_option_labels() -> None:
    options = "Which is a city?\nA) Rome\nB) Blue\nC) Seven"
    assert same_answer("\\boxed{ 42 }", "\\boxed{42.0}", "")
    assert same_answer("\\boxed{A}", "\\boxed{Rome}", options)
    assert same_answer("\\boxed{rome}", "\\boxed{A}", options)
    assert not same_answer("\\boxed{B}", "\\boxed{Rome}", options)
    assert not same_answer("\\boxed{nan}", "\\boxed{12}", "")


def tally_of(wins_by_seed: list[tuple[str, str, bool]], first: str = "") -> ProbeTally:
    """One probe ``p``: per seed (its action, the solution's answer, whether it won)."""
    tally = ProbeTally()
    for action, answer, did_win in wins_by_seed:
        transcript = won(action) if did_win else lost(action)
        tally.add_seed([("p", transcript, did_win)], won(f"\\boxed{{{answer}}}"), first)
    return tally


def test_a_wrong_answer_accepted_on_three_seeds_of_five_is_a_hack() -> None:
    # "yes" wins where the answers are numbers: unexplained on 3 of 5 seeds
    tally = tally_of([("\\boxed{yes}", str(10 + i), i < 3) for i in range(5)])
    assert tally.worst() == ("p", 3)


def test_guessing_a_repeated_answer_is_chance_not_a_hack() -> None:
    # a constant 5 that is the real answer on 2 of 5 seeds of a game whose answers repeat
    answers = ["5", "5", "3", "4", "6"]
    tally = tally_of([("\\boxed{5}", a, a == "5") for a in answers])
    assert tally.collision_rate() == pytest.approx(0.1)
    assert tally.chance_rates() == [0.2] * 5
    assert tally.worst() is None


def test_options_set_the_chance_rate() -> None:
    first = "Pick one:\nA) red\nB) blue\nC) green\nD) gold"
    answers = ["red", "blue", "green", "gold", "red"]
    tally = tally_of([("\\boxed{A}", a, a == "red") for a in answers], first)
    assert tally.chance_rates() == [0.25] * 5 and tally.worst() is None


def test_settled_probes_stop_and_open_ones_go_on() -> None:
    quiet = tally_of([("\\boxed{0}", "12", False)] * 3)
    assert quiet.settled("p", 2)  # even two more wins cannot reach the threshold
    assert not quiet.settled("p", 10)
    busy = tally_of([("\\boxed{yes}", "12", True)] * 2)
    assert not busy.settled("p", 1)
    assert ProbeTally().settled("p", 0) is False  # never played: not settled
    assert ALPHA / len(PROBE_NAMES) == ProbeTally.threshold()


def test_a_game_of_several_moves_settles_its_probes_on_the_chance_test_alone() -> None:
    # With no one answer to compare (the solution takes two moves), only the chance test can
    # reject a probe: two losses of five seeds settle it, where a one-step game needs three.
    two_moves = ProbeTally()
    for _ in range(2):
        two_moves.add_seed([("p", lost(), False)], WIN + WIN, "")
    assert two_moves.settled("p", 3)
    one_move = tally_of([("\\boxed{0}", "12", False)] * 2)
    assert not one_move.settled("p", 3)  # three unexplained wins in five could still reject it
    assert one_move.settled("p", 2)


def test_an_unexplained_win_is_borderline_until_more_seeds_decide() -> None:
    one_of_five = tally_of([("\\boxed{yes}", str(i), i == 0) for i in range(5)])
    assert one_of_five.worst() is None and one_of_five.borderline()  # p = 0.049
    one_of_six = tally_of([("\\boxed{yes}", str(i), i == 0) for i in range(6)])
    assert not one_of_six.borderline()  # p = 0.059: accepted
    two = tally_of([("\\boxed{yes}", str(i), i < 2) for i in range(5)])
    assert two.worst() is None and two.borderline()


def test_drawn_seeds_are_reproducible_distinct_and_not_the_small_ones() -> None:
    a, b = se.draw_seeds(1234, 5), se.draw_seeds(1234, 5)
    assert a == b and len(set(a)) == 5 and all(0 <= s < se.SEED_SPACE for s in a)
    assert se.draw_seeds(1235, 5) != a and max(a) > 1000
    more = se.more_seeds(list(a), 3)
    assert len(set(more) | set(a)) == 8 and more == se.more_seeds(list(a), 3)
    with pytest.raises(ValueError, match="n >= 1"):
        se.draw_seeds(1, 0)
    assert 0 <= se.fresh_root() < se.SEED_SPACE


def test_reward_contract_rules() -> None:
    honest = [("common", lost(reward=0.3), False), ("empty", lost(""), False)]
    assert contract_breach(honest, WIN) is None  # partial credit for a wrong answer is fine
    farm = [("common", lost(reward=0.3, steps=5), False)]
    assert contract_breach(farm, WIN)[:2] == ("total_out_of_range", "common")
    malformed = [("common", lost(), False), ("empty", lost("", 0.5), False)]
    assert contract_breach(malformed, WIN)[:2] == ("malformed_paid", "empty")
    two_halves = [("common", lost(reward=0.5, steps=2), False)]
    assert contract_breach(two_halves, WIN)[:2] == ("lost_pays_as_won", "common")
    assert contract_breach(two_halves, None) is None  # no solution episode: nothing to compare
