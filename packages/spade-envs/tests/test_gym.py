import gymnasium
import pytest
import spade_envs as se
from conftest import GUESS_HINT, GUESS_SOURCE
from gymnasium.utils.env_checker import check_env as gymnasium_check_env


def example_ids():
    path = se.example_corpus_path() / "manifest.jsonl"
    return se.load_corpus("example").ids() if path.is_file() else []


def test_the_fixture_env_passes_gymnasiums_own_checker(guess_factory):
    env = se.SpadeGymEnv(guess_factory, hint=GUESS_HINT)
    gymnasium_check_env(env, skip_render_check=True)
    assert isinstance(env, gymnasium.Env)


@pytest.mark.parametrize("env_id", example_ids())
def test_every_shipped_environment_passes_gymnasiums_checker(env_id):
    env = gymnasium.make(f"spade/{env_id}", hint=True).unwrapped
    gymnasium_check_env(env, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("env_id", example_ids())
def test_make_by_id_plays_the_solution_to_a_win(env_id):
    env = gymnasium.make(f"spade/{env_id}")
    env.reset(seed=11)
    for action in env.unwrapped.solution():
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert terminated and info["episode_return"] == 1.0
    env.close()


def test_text_spaces_admit_punctuation_and_reject_astral_characters(guess_factory):
    env = se.SpadeGymEnv(guess_factory)
    assert env.observation_space.contains("Hello, world! (x=1; y=[2]) \\boxed{3}\n\tÄ→")
    assert not env.observation_space.contains("emoji 🎲")
    assert env.observation_space.contains("")


def test_reset_is_reproducible_and_seedless_resets_follow_the_seeded_rng(guess_factory):
    a, b = se.SpadeGymEnv(guess_factory), se.SpadeGymEnv(guess_factory)
    assert a.reset(seed=5)[1]["seed"] == b.reset(seed=5)[1]["seed"]
    assert a.reset()[1]["seed"] == b.reset()[1]["seed"]
    assert a.reset(seed=6)[1]["seed"] != a.reset(seed=7)[1]["seed"]


def test_truncation_at_max_turns_and_reset_needed_after_the_end(guess_factory):
    env = se.SpadeGymEnv(guess_factory, max_turns=3)
    env.reset(seed=0)
    results = [env.step("\\boxed{0}") for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert results[-1][4]["episode_return"] == 0.0
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step("\\boxed{1}")


def test_an_out_of_charset_observation_is_a_contract_error():
    factory = se.load_env(
        GUESS_SOURCE.replace('"Correct!"', '"Correct! 🎉"').replace('"Higher."', '"Higher 🎉"')
    )
    env = se.SpadeGymEnv(factory)
    env.reset(seed=0)
    with pytest.raises(se.ContractError, match="observation_charset"):
        for guess in range(1, 51):
            env.step(f"\\boxed{{{guess}}}")


def _vector_factory():
    return se.SpadeGymEnv(se.load_env(GUESS_SOURCE), max_turns=8)


@pytest.mark.slow  # four worker processes each import spade_envs: about 10 s on 2 busy cores
def test_sync_and_async_vector_stepping_agree():
    sync = gymnasium.vector.SyncVectorEnv([_vector_factory] * 4)
    asyn = gymnasium.vector.AsyncVectorEnv([_vector_factory] * 4, shared_memory=False)
    try:
        obs_s, _ = sync.reset(seed=42)
        obs_a, _ = asyn.reset(seed=42)
        assert list(obs_s) == list(obs_a) and all(o.startswith("Guess my number") for o in obs_s)
        for guess in (25, 12, 37):
            actions = (f"\\boxed{{{guess}}}",) * 4
            out_s, out_a = sync.step(actions), asyn.step(actions)
            assert list(out_s[0]) == list(out_a[0])
            assert list(out_s[1]) == list(out_a[1])
    finally:
        sync.close()
        asyn.close()


def test_register_corpus_registers_every_id(tmp_path):
    from test_corpus import make_records

    records, sources = make_records(2)
    path = se.write_corpus(tmp_path / "c", records, sources)
    ids = se.register_corpus(path, namespace="spadetest")
    assert ids == ["spadetest/guess_0", "spadetest/guess_1"]
    env = gymnasium.make("spadetest/guess_1", max_turns=4)
    obs, _ = env.reset(seed=0)
    assert "between 1 and 51" in obs
    env.close()
    with pytest.raises(se.CorpusError, match="already registered"):
        se.register_corpus(path, namespace="spadetest", overwrite=False)
