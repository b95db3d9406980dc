"""The GEM adapter: real GEM games played by the SPADE chat runner and Gymnasium adapter.

GEM (``gem-llm``) is not a dependency of spade-envs; the tests that need it skip, saying so,
where it is not installed. The tests of the missing-GEM path run only where it is absent.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys

import pytest
import spade_envs as se
from spade_envs.gem import GemEnvironment, GemFactory, GemUnavailableError, gem_env_ids

HAVE_GEM = importlib.util.find_spec("gem") is not None and "gem-llm" in {
    d.metadata["Name"].lower() for d in importlib.metadata.distributions()
}
needs_gem = pytest.mark.skipif(
    not HAVE_GEM, reason="gem-llm is not installed (pip install gem-llm)"
)
GUESS = "game:GuessTheNumber-v0-easy"  # 1..10 within 4 turns
#: GEM games that need neither downloaded data (nltk word lists) nor undeclared packages (pandas).
OFFLINE_GAMES = [
    "game:GuessTheNumber-v0-hard",
    "game:Mastermind-v0-easy",
    "game:Minesweeper-v0-easy",
    "game:Sudoku-v0-easy",
    "game:TowerofHanoi-v0-easy",
    "game:Game2048-v0-easy",
    "game:Sokoban-v0-easy",
]


def test_the_adapter_module_imports_without_gem():
    proc = subprocess.run(
        [sys.executable, "-c", "import sys, spade_envs.gem; print('gem' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"  # imported lazily, on the first environment built


@pytest.mark.skipif(
    HAVE_GEM, reason="gem-llm is installed here; this checks the message shown without it"
)
def test_without_gem_the_first_environment_raises_a_clear_import_error():
    factory = GemFactory(GUESS)  # constructing the factory needs nothing
    with pytest.raises(GemUnavailableError, match=r"pip install gem-llm") as info:
        factory(max_turns=4)
    assert isinstance(info.value, ImportError) and isinstance(info.value, se.SpadeEnvsError)
    assert "\n" not in str(info.value)
    # Through the runner it is an episode error, not a crash of the batch.
    result = se.run_episode(
        se.EpisodeSpec(factory, seed=0, env_id=GUESS), se.ReplayAgent(["\\boxed{1}"])
    )
    assert result.error is not None and result.error.kind == "GemUnavailableError"


def bisect_agent(messages: list[se.Message]) -> str:
    """Binary search over GEM Guess The Number's range, from its 'higher/lower than N' replies."""
    first = next(m["content"] for m in messages if m["role"] == "user")
    low, high = map(int, re.search(r"between (\d+) and (\d+)", first).groups())
    for m in messages:
        if m["role"] == "user":
            found = re.search(r"target number is (higher|lower) than (\d+)", m["content"])
            if found:
                n = int(found.group(2))
                low, high = (
                    (max(low, n + 1), high)
                    if found.group(1) == "higher"
                    else (low, min(high, n - 1))
                )
    return f"Halving the range {low}..{high}: \\boxed{{{(low + high) // 2}}}"


@needs_gem
def test_gem_ids_are_listed():
    ids = gem_env_ids("game:")
    assert GUESS in ids and all(i.startswith("game:") for i in ids) and ids == sorted(ids)


@needs_gem
def test_the_runner_wins_gem_guess_the_number_by_bisection():
    factory = GemFactory(GUESS)
    max_turns = factory.default_max_turns()
    assert max_turns == 4
    for seed in range(5):
        result = se.run_episode(
            se.EpisodeSpec(factory, seed=seed, env_id=GUESS, max_turns=max_turns), bisect_agent
        )
        assert result.error is None, result.error
        assert (
            result.won
            and result.episode_return == 1.0
            and result.terminated
            and not result.truncated
        )
        assert result.turns[-1].observation.startswith("Congratulations")
        assert 1 <= len(result.turns) <= 4


@needs_gem
def test_the_same_seed_replays_the_same_episode_and_seeds_differ():
    factory = GemFactory(GUESS)

    def feedback(seed: int) -> list[str]:
        agent = se.ReplayAgent([f"\\boxed{{{n}}}" for n in (5, 2, 8, 9)])
        result = se.run_episode(
            se.EpisodeSpec(factory, seed=seed, env_id=GUESS, max_turns=4), agent
        )
        assert result.error is None
        return [t.observation for t in result.turns]

    assert feedback(3) == feedback(3)
    assert len({tuple(feedback(s)) for s in range(8)}) > 1


@needs_gem
def test_running_out_of_turns_is_truncated_and_returns_zero():
    factory = GemFactory(GUESS)
    env = factory()
    secret_agent = se.run_episode(se.EpisodeSpec(factory, seed=11, max_turns=4), bisect_agent)
    secret = int(re.search(r"\\boxed\{(\d+)\}", secret_agent.turns[-1].action).group(1))
    wrong = [n for n in range(1, 11) if n != secret][:4]
    env.reset(seed=11)
    steps = [env.step(f"\\boxed{{{n}}}") for n in wrong]
    *_, (obs, reward, terminated, truncated, info) = steps
    assert "maximum number of turns" in obs
    assert (terminated, truncated) == (False, True)  # GEM said (True, True)
    assert (
        info["gem_terminated"] is True and 0.0 < info["gem_reward"] < 1.0
    )  # GEM's closeness reward
    assert all(not s[2] and not s[3] for s in steps[:-1])
    result = se.run_episode(
        se.EpisodeSpec(factory, seed=11, max_turns=4),
        se.ReplayAgent([f"\\boxed{{{n}}}" for n in wrong]),
    )
    assert result.truncated and not result.terminated and result.episode_return == 0.0
    env.close()


@needs_gem
def test_a_format_error_ends_the_episode_with_gems_penalty_and_return_zero(tmp_path):
    factory = GemFactory(GUESS)
    result = se.run_episode(
        se.EpisodeSpec(factory, seed=0, env_id=GUESS, max_turns=4), se.ReplayAgent(["no idea"])
    )
    assert result.error is None and len(result.turns) == 1
    turn = result.turns[0]
    assert turn.malformed and turn.terminated and turn.reward == pytest.approx(-0.1)
    assert turn.info["gem_reward"] == pytest.approx(-0.1)
    assert result.episode_return == 0.0
    path = se.write_transcript(result, tmp_path / "gem.json")
    assert json.loads(path.read_text())["turns"][0]["info"]["suffix"] == "Enter your next guess."


@needs_gem
@pytest.mark.parametrize("gem_id", OFFLINE_GAMES)
def test_gem_games_play_through_the_runner_with_bounded_rewards(gem_id, tmp_path):
    factory = GemFactory(gem_id)
    agent = se.RandomAgent(0)
    max_turns = factory.default_max_turns()
    specs = [se.EpisodeSpec(factory, seed=s, env_id=gem_id, max_turns=max_turns) for s in range(3)]
    results = se.run_episodes(specs, lambda batch: [agent(m) for m in batch])
    for r in results:
        assert r.error is None, r.error
        assert r.terminated or r.truncated
        assert 0.0 <= r.episode_return <= 1.0
        assert all(se.REWARD_BOUNDS[0] <= t.reward <= se.REWARD_BOUNDS[1] for t in r.turns)
        json.dumps(r.to_dict())  # transcripts serialize


@needs_gem
def test_a_gem_game_is_a_valid_gymnasium_env():
    from gymnasium.utils.env_checker import check_env

    env = se.SpadeGymEnv(GemFactory(GUESS), max_turns=4, env_id=GUESS)
    check_env(env, skip_render_check=True)
    observation, info = env.reset(seed=2)
    assert "Guess The Number" in observation and isinstance(info["seed"], int)
    env.close()


@needs_gem
def test_override_max_turns_passes_the_runner_limit_to_gem():
    assert GemFactory(GUESS, override_max_turns=True)(max_turns=9).max_turns == 9
    assert GemFactory(GUESS)(max_turns=9).max_turns == 4  # the preset keeps its own limit


@needs_gem
def test_an_unknown_gem_id_is_a_one_line_error():
    with pytest.raises(
        se.SourceError, match=r"no GEM environment 'game:Nope-v0'.*gem_env_ids"
    ) as info:
        GemFactory("game:Nope-v0")()
    assert "\n" not in str(info.value)


@needs_gem
def test_importing_gem_through_the_adapter_leaves_logging_alone():
    code = (
        "import logging\n"
        "from spade_envs.gem import GemFactory\n"
        f"GemFactory({GUESS!r})()\n"
        "root = logging.getLogger()\n"
        "print(len(root.handlers), logging.getLevelName(root.level))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "WARNING"]


@needs_gem
def test_solution_is_not_available_for_gem_environments():
    env = GemFactory(GUESS)()
    env.reset(seed=0)
    assert isinstance(env, GemEnvironment)
    with pytest.raises(NotImplementedError, match="no solution"):
        env.solution()
