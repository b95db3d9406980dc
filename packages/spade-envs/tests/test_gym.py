import gymnasium
import pytest
import spade_envs as se
from conftest import GUESS_HINT, GUESS_SOURCE
from gymnasium.utils.env_checker import check_env as gymnasium_check_env


def example_ids():
    path = se.example_corpus_path() / "manifest.jsonl"
    return se.load_corpus("example").ids() if path.is_file() else []


def shipped_gym_ids():
    """Every shipped corpus's Gymnasium ids, from its own manifest and namespace."""
    return [
        f"{namespace}/{env_id}"
        for name, namespace in se.SHIPPED_NAMESPACES.items()
        for env_id in se.load_corpus(name).ids()
    ]


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


def test_every_shipped_corpus_is_registered_under_its_own_namespace():
    registered = {
        i for i in gymnasium.registry if i.split("/")[0] in se.SHIPPED_NAMESPACES.values()
    }
    assert registered == set(shipped_gym_ids())
    assert set(se.SHIPPED_NAMESPACES) == {"example", "starter", "tool_use"}
    assert len(set(se.SHIPPED_NAMESPACES.values())) == 3


@pytest.mark.parametrize(
    "gym_id", [i for i in shipped_gym_ids() if not i.startswith(f"{se.NAMESPACE}/")]
)
def test_starter_and_tool_use_games_are_made_by_id_and_their_solution_wins(gym_id):
    env = gymnasium.make(gym_id)
    env.reset(seed=3)
    for action in env.unwrapped.solution():
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert terminated and info["episode_return"] == 1.0
    env.close()


def test_spaces_print_short_and_stay_gymnasium_text_spaces(guess_factory):
    import pickle

    from gymnasium import spaces

    env = se.SpadeGymEnv(guess_factory)
    assert repr(env.action_space) == "Text(0, 8192, charset=TEXT_CHARSET)"
    assert (
        str(env.observation_space) == f"Text(0, {se.MAX_OBSERVATION_CHARS}, charset=TEXT_CHARSET)"
    )
    assert isinstance(env.action_space, spaces.Text)
    plain = spaces.Text(8192, min_length=0, charset=se.TEXT_CHARSET)
    assert env.action_space == plain and len(repr(plain)) > 60_000
    copy = pickle.loads(pickle.dumps(env.action_space))
    assert copy == env.action_space and repr(copy) == repr(env.action_space)
    env.close()


def test_closing_closes_the_environment_once_and_a_shared_factory_only_when_owned():
    closed = []

    class Env:
        def __init__(self, max_turns=10, **kwargs):
            pass

        def reset(self, seed=None):
            return "start", {}

        def step(self, action):
            return "done", 1.0, True, False, {}

        def close(self):
            closed.append("env")

    class Factory:
        def __call__(self, max_turns=10, **kwargs):
            return Env()

        def close(self):
            closed.append("factory")

    shared = Factory()
    se.SpadeGymEnv(shared, close_factory=False).close()
    assert closed == ["env"]
    owner = se.SpadeGymEnv(shared)
    owner.close()
    owner.close()
    assert closed == ["env", "env", "factory"]
    se.SpadeGymEnv(Env).close()  # a class as the factory: its close() is the environment's
    assert closed == ["env", "env", "factory", "env"]
