import pytest
import spade_envs as se
from conftest import GUESS_HINT, GUESS_SOURCE, broken
from spade_envs.probes import PROBE_NAMES


def test_a_good_environment_passes_and_reports_what_was_played(guess_factory):
    report = se.check_env(guess_factory, seeds=(0, 1, 2), hint=GUESS_HINT)
    assert report.seeds == (0, 1, 2)
    # every probe plays the first seed; settled ones stop (the sentinels play every seed)
    assert len(PROBE_NAMES) + 4 <= report.probe_episodes < 3 * len(PROBE_NAMES)
    assert report.probe_win_rate == 0.0 and set(report.probe_wins) == set(PROBE_NAMES)
    assert report.solution_turns == 1
    assert report.steps >= 12


CASES = {
    "construct_failed": {
        "self.max_turns = max_turns\n": "self.max_turns = max_turns\n        raise RuntimeError('no')\n"
    },
    "reset_raised": {"self.secret = self.rng.randint(1, self.high)": "self.secret = 1 / 0"},
    "reset_return_type": {'), {"turn": 0}': "), None"},
    "step_raised": {"guess = int(found[-1])": "guess = int(found[-1]) / 0"},
    "step_return_type": {
        'return obs, reward, term, trunc, {"turn": self.turn}': "return obs, reward, term, trunc"
    },
    "reward_not_finite": {
        'obs = "Higher." if guess < self.secret else "Lower."\n                reward, term = 0.0, False': 'obs = "Higher." if guess < self.secret else "Lower."\n                reward, term = float("nan"), False'
    },
    "reward_out_of_bounds": {
        'obs, reward, term = "Correct!", 1.0, True': 'obs, reward, term = "Correct!", 10.0, True'
    },
    "no_termination": {"trunc = not term and self.turn >= self.max_turns": "trunc = False"},
    "nondeterministic": {"self.rng = random.Random(seed)": "self.rng = random.Random()"},
    "seed_ignored": {"self.rng = random.Random(seed)": "self.rng = random.Random(7)"},
    "solution_fails": {"{{{self.secret}}}": "{{{self.secret + 1}}}"},
    "solution_type": {'return f"': 'return 42 or f"'},
    "info_not_json": {'{"turn": self.turn}': '{"turn": object()}'},
    "observation_empty": {'"Higher." if guess < self.secret else "Lower."': '""'},
    "close_raised": {
        "    def close(self):\n        pass": "    def close(self):\n        raise OSError('x')"
    },
    "observation_charset": {'"Higher." if guess': '"\\x1b[1mHigher." if guess'},
    "probe_wins:common": {"if guess == self.secret:": "if guess in (self.secret, 0):"},
    "reward_ignores_action": {
        "        self.turn += 1\n": "        self.turn += 1\n        self.done = True\n        return 'Correct!', 1.0, True, False, {}\n"
    },
    "reward_contract:after_end": {
        '"The episode is over.", 0.0, True': '"The episode is over.", 1.0, True'
    },
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_contract_violation_gets_its_reason_code(code):
    factory = se.load_env(broken(CASES[code]))
    with pytest.raises(se.ContractError) as info:
        se.check_env(factory, seeds=(0, 1, 2))
    assert info.value.code == code, str(info.value)
    assert code in se.REASON_CODES
    assert "\n" not in str(info.value)


def test_environment_exceptions_are_kept_as_the_cause():
    factory = se.load_env(broken(CASES["step_raised"]))
    with pytest.raises(se.ContractError) as info:
        se.check_env(factory)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_hint_checks():
    factory = se.load_env(GUESS_SOURCE)
    with pytest.raises(se.ContractError, match="hint_empty"):
        se.check_env(factory, hint="  ")
    with pytest.raises(se.ContractError, match="hint_leaked"):
        se.check_env(factory, hint="Guess my number")
    leaky = se.load_env(broken({"self.secret = self.rng.randint(1, self.high)": "self.secret = 7"}))
    with pytest.raises(se.ContractError, match="hint_is_answer"):
        se.check_env(leaky, seeds=(0,), hint="The answer is \\boxed{7}")


def test_a_too_long_observation_is_rejected():
    factory = se.load_env(broken({'"Higher." if guess': '"x" * 20000 if guess'}))
    with pytest.raises(se.ContractError, match="observation_too_long"):
        se.check_env(factory)


def test_step_result_checker_accepts_ints_and_rejects_bools_as_rewards():
    se.check_step_result(("ok", 1, True, False, {}))
    with pytest.raises(se.ContractError, match="step_return_type"):
        se.check_step_result(("ok", True, True, False, {}))
    with pytest.raises(se.ContractError, match="step_return_type"):
        se.check_step_result(("ok", 0.0, 1, False, {}))


def test_a_second_instance_must_play_the_same_seed_alike():
    factory = se.load_env(
        broken({"self.rng = random.Random(seed)": "self.rng = random.Random(seed + id(self))"})
    )
    with pytest.raises(se.ContractError, match="second instance") as info:
        se.check_env(factory, seeds=(0, 1, 2))
    assert info.value.code == "nondeterministic"


def test_checks_are_named_and_declare_their_reason_codes():
    from spade_envs.checks import CHECKS

    names = [name for name, *_ in CHECKS]
    assert len(set(names)) == len(names)
    declared = {code for *_, codes in CHECKS for code in codes}
    assert declared <= set(se.REASON_CODES)
    # Raised by check_env itself: constructing, the empty hint and close(); "probe_wins" is
    # the family of the per-probe "probe_wins:<probe>" codes.
    assert (
        set(se.REASON_CODES) - declared
        == {"construct_failed", "hint_empty", "close_raised", "probe_wins"} - declared
    )


def test_probe_results_are_in_the_report(guess_factory):
    report = se.check_env(guess_factory, seeds=(0, 1, 2, 3, 4))
    assert report.probe_win_rate == 0.0
    assert report.probe_wins == dict.fromkeys(PROBE_NAMES, 0)


def test_contract_error_evidence_pickles_and_cuts_its_excerpt():
    import pickle

    text = "x" * 500 + " Psst: 42 " + "y" * 500
    ev = se.Evidence.of("first_observation", 3, text, "Psst")
    assert "Psst: 42" in ev.excerpt and len(ev.excerpt) <= 160
    err = se.ContractError("solution_leaked", "the answer is shown", ev)
    back = pickle.loads(pickle.dumps(err))
    assert back.code == "solution_leaked" and back.evidence == ev
    assert ev.to_dict() == {"probe": "first_observation", "seed": 3, "excerpt": ev.excerpt}
