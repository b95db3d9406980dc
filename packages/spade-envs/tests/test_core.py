import math

import pytest
import spade_envs as se


@pytest.mark.parametrize(
    "reward, terminated, expected",
    [
        (1.0, True, 1.0),
        (0.0, True, 0.0),
        (1.0, False, 0.0),
        (-0.5, True, 0.0),
        (0.25, True, 0.25),
        (5.0, True, 1.0),
        (math.nan, True, 0.0),
        (0.7, False, 0.0),
    ],
)
def test_episode_return_clips_terminated_and_zeroes_truncated(reward, terminated, expected):
    assert se.episode_return(reward, terminated) == expected


def test_hint_is_appended_to_the_first_observation_in_the_released_format():
    assert se.with_hint("Solve it.", "Think.") == "Solve it.\n\nHINT: Think."
    assert se.with_hint("Solve it.", None) == "Solve it."
    assert se.with_hint("Solve it.", "") == "Solve it."


def test_contract_text_states_every_rule_a_designer_needs():
    text = se.contract_text()
    for needle in [
        "ends in `Env`",
        "max_turns: int = 10",
        "reset(self, seed",
        "step(self, action: str)",
        "solution(self) -> str",
        "close(self)",
        "\\boxed{...}",
        "random.Random(seed)",
        "HINT",
    ]:
        assert needle in text, needle
    for skill in se.SKILLS:
        assert skill in text
    assert "{" not in text.replace("\\boxed{", "").replace("{...}", "").replace("{42}", "")


def test_skills_are_the_six_of_the_games_setting():
    assert se.SKILLS == ("Math", "Logic", "Spatial", "Pattern", "Optimization", "Causal")


def test_an_object_with_the_contract_methods_satisfies_the_protocol(guess_factory):
    env = guess_factory()
    assert isinstance(env, se.TextEnvironment)
    assert not isinstance(object(), se.TextEnvironment)


def test_the_contract_owns_the_one_import_allow_list_and_observation_limit():
    text = se.contract_text()
    assert f"Allowed imports: {', '.join(se.ALLOWED_IMPORTS)}." in " ".join(text.split())
    assert f"under {se.MAX_OBSERVATION_CHARS} characters" in text
    assert len(set(se.ALLOWED_IMPORTS)) == len(se.ALLOWED_IMPORTS)
    assert not {"os", "sys", "subprocess", "socket", "importlib", "builtins"} & set(
        se.ALLOWED_IMPORTS
    )
    long = "x" * (se.MAX_OBSERVATION_CHARS + 1)
    with pytest.raises(se.ContractError) as info:
        se.check_step_result((long, 0.0, False, False, {}))
    assert info.value.code == "observation_too_long"
    se.check_step_result((long[:-1], 0.0, False, False, {}))


def test_the_sandbox_enforces_the_contracts_allow_list():
    """spade-sandbox depends on no spade package, so it keeps a copy of the list; this is the check
    that the copy never drifts from the contract."""
    spade_sandbox = pytest.importorskip("spade_sandbox")
    assert spade_sandbox.DEFAULT_ALLOWED_IMPORTS == frozenset(se.ALLOWED_IMPORTS)
    assert spade_sandbox.SandboxConfig().allowed_imports == frozenset(se.ALLOWED_IMPORTS)
