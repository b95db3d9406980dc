"""Token samples from multi-turn episodes: only policy tokens are trained, turns merge when the
template extends the previous prompt, and a real spade-envs episode maps back to its turns."""

import pytest
import spade_envs as se
from spade_train.play import PolicyAgent, episode_samples, merge_turns
from spade_train.types import Generation, SamplingParams, TrainSample


def gen(prompt, completion, lp=-0.5):
    return Generation("x", list(prompt), list(completion), [lp] * len(completion))


def test_consecutive_turns_merge_with_observation_tokens_masked():
    first = gen([1, 2, 3], [10, 11])
    second = gen([1, 2, 3, 10, 11, 7, 8], [12], lp=-0.25)  # 7, 8: the observation
    [(ids, mask, logps)] = merge_turns([first, second])
    assert ids == [1, 2, 3, 10, 11, 7, 8, 12]
    assert mask == [0, 0, 0, 1, 1, 0, 0, 1]
    assert logps == [0, 0, 0, -0.5, -0.5, 0, 0, -0.25]


def test_a_template_that_rewrites_history_starts_a_new_sequence():
    first = gen([1, 2, 3], [10, 11])
    second = gen([1, 2, 3, 99, 7], [12])  # completion re-tokenized differently
    sequences = merge_turns([first, second])
    assert [s[0] for s in sequences] == [[1, 2, 3, 10, 11], [1, 2, 3, 99, 7, 12]]
    assert [sum(s[1]) for s in sequences] == [2, 1]


def test_mismatched_logprobs_are_rejected():
    with pytest.raises(ValueError, match="log-probs"):
        merge_turns([Generation("x", [1], [2, 3], [-1.0])])


def test_train_sample_checks_lengths_and_role():
    with pytest.raises(ValueError, match="differ in length"):
        TrainSample([1, 2], [1], [0.0, 0.0], 1.0, "agent")
    with pytest.raises(ValueError, match="role"):
        TrainSample([1], [1], [0.0], 1.0, "critic")


GUESS_ENV = """
import random
import re


class GuessEnv:
    skill = "Math"

    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.secret = random.Random(seed).randint(1, 3)
        self.turn = 0
        return f"Guess 1-3 as \\\\boxed{{n}}; {self.max_turns} turns.", {}

    def step(self, action):
        self.turn += 1
        m = re.search(r"\\\\boxed\\{(\\d)\\}", action)
        if m and int(m.group(1)) == self.secret:
            return "right", 1.0, True, False, {}
        return "wrong, use \\\\boxed{n}", 0.0, False, self.turn >= self.max_turns, {}

    def solution(self):
        return f"\\\\boxed{{{self.secret}}}"

    def close(self):
        pass
"""


class CountingBackend:
    """A real (deterministic) policy over a fixed vocabulary: token ids are the characters of
    the rendered chat; the reply cycles through guesses. Enough to check the bookkeeping."""

    name = "counting"

    def __init__(self):
        self.calls = []

    def render(self, messages):
        return [ord(c) for m in messages for c in f"<{m['role']}>{m['content']}"]

    def generate(self, conversations, params, tools=None):
        self.calls.append((len(conversations), params.seed))
        out = []
        for messages in conversations:
            guess = 1 + sum(m["role"] == "assistant" for m in messages)
            text = f"\\boxed{{{guess}}}"
            prompt = self.render(messages) + [ord(c) for c in "<assistant>"]
            out.append(Generation(text, prompt, [ord(c) for c in text], [-0.1] * len(text)))
        return out


def test_policy_agent_recovers_each_turn_of_real_episodes():
    backend = CountingBackend()
    agent = PolicyAgent(backend, lambda call: SamplingParams(seed=100 + call))
    factory = se.load_env(GUESS_ENV, "GuessEnv")
    specs = [se.EpisodeSpec(factory, seed=s, env_id=f"g{s}", max_turns=3) for s in range(6)]
    results = se.run_episodes(specs, agent, system_prompt="play")
    assert [c[1] for c in backend.calls] == [100 + i for i in range(len(backend.calls))]
    for result in results:
        turns = len(result.turns)
        gens = agent.generations_of(result)
        assert len(gens) == turns
        samples = episode_samples(agent, result, 0.5)
        trained = sum(sum(s.loss_mask) for s in samples)
        assert trained == sum(len(g.completion_ids) for g in gens)
        assert all(s.role == "agent" and s.advantage == 0.5 for s in samples)
        assert result.won == (result.episode_return == 1.0)
    # the ord()-based render keeps history verbatim, so every episode is one sequence
    assert all(len(episode_samples(agent, r, 1.0)) == 1 for r in results)


def test_unknown_episode_is_an_error():
    agent = PolicyAgent(CountingBackend(), lambda call: SamplingParams())
    factory = se.load_env(GUESS_ENV, "GuessEnv")
    spec = se.EpisodeSpec(factory, seed=1, max_turns=2)
    result = se.run_episodes([spec], lambda batch: ["\\boxed{9}"] * len(batch))[0]
    with pytest.raises(KeyError, match="no recorded generations"):
        agent.generations_of(result)


def test_an_episode_that_failed_before_its_first_turn_has_no_generations():
    # A held-out game whose reset the sandbox could not serve (in CI once: "the sandbox zygote
    # did not fork a worker") ends with no assistant turn: nothing to train, not a crash.
    agent = PolicyAgent(CountingBackend(), lambda call: SamplingParams())
    broken = GUESS_ENV.replace(
        "def reset(self, seed=None):",
        "def reset(self, seed=None):\n        raise OSError('no worker')",
    )
    spec = se.EpisodeSpec(se.load_env(broken, "GuessEnv"), seed=1, max_turns=2)
    result = se.run_episodes([spec], agent)[0]
    assert result.error is not None and not result.turns
    assert agent.generations_of(result) == [] and episode_samples(agent, result, 1.0) == []


def test_answer_prefix_is_shown_continued_and_never_trained():
    from spade_train.backends import make_backend
    from spade_train.steps.play import episode_end

    backend = make_backend("local", model="tiny:qwen3", seed=0)
    prefix = "\\boxed{"
    params = SamplingParams(max_new_tokens=6, stop=("}",), seed=3)
    agent = PolicyAgent(backend, lambda call: params, answer_prefix=prefix)
    factory = se.load_env(GUESS_ENV, "GuessEnv")
    specs = [se.EpisodeSpec(factory, seed=s, env_id=f"g{s}", max_turns=2) for s in range(3)]
    results = se.run_episodes(specs, agent, system_prompt="play")
    prefix_ids = backend.tokenizer(prefix, add_special_tokens=False)["input_ids"]
    for result in results:
        replies = [m["content"] for m in result.messages if m["role"] == "assistant"]
        assert replies and all(r.startswith(prefix) for r in replies)  # shown in the transcript
        for gen in agent.generations_of(result):
            assert gen.prompt_ids[-len(prefix_ids) :] == prefix_ids  # the prefix is prompt
            assert not gen.text.startswith(prefix)  # the policy only continued it
        trained = sum(sum(s.loss_mask) for s in episode_samples(agent, result, 1.0))
        assert trained == sum(len(g.completion_ids) for g in agent.generations_of(result))
        assert episode_end(result) in ("won", "lost", "truncated", "malformed")


@pytest.mark.parametrize(
    ("configured", "sent"),
    [
        (None, se.DEFAULT_SYSTEM_PROMPT),
        ("", None),
        ("Reply with your move.", "Reply with your move."),
    ],
)
def test_agent_system_prompt_default_none_or_own(configured, sent):
    from spade_train.config import load_recipe
    from spade_train.steps.play import agent_system_prompt

    cfg = load_recipe("quickstart")
    cfg.agent.system_prompt = configured
    assert agent_system_prompt(cfg) == sent


def test_the_tool_use_quickstart_keeps_the_default_prompt_that_tool_episodes_replace():
    from spade_train.config import load_recipe
    from spade_train.steps.play import agent_system_prompt

    games, tools = load_recipe("quickstart"), load_recipe("quickstart-tool-use")
    assert games.agent.system_prompt and "\\boxed" in games.agent.system_prompt
    assert tools.agent.system_prompt is None
    assert agent_system_prompt(tools) == se.DEFAULT_SYSTEM_PROMPT
