"""The algorithm layer: reward registry and its recipe errors, the delayed queue, agent
advantages and loss-mask filters, truncated importance sampling, thinking mode."""

import json
import sys
import textwrap

import pytest
import spade_envs as se
import torch
from spade_train.config import RecipeError, RewardConfig, load_recipe
from spade_train.core import advantages as adv
from spade_train.core import rewards as rw
from spade_train.core.delayed_rewards import DelayedDesignerRewards
from spade_train.core.learning_potential import GameBaselines
from spade_train.loss import policy_loss
from spade_train.play import PolicyAgent, episode_samples, split_thinking, strip_thinking
from spade_train.types import Generation, SamplingParams, TrainSample

# -- registry and recipe errors ----------------------------------------------------------------


def test_registry_refuses_duplicates_and_takes_new_variants(monkeypatch):
    monkeypatch.setattr(rw, "DESIGNER_REWARDS", rw.DESIGNER_REWARDS.copy())
    with pytest.raises(ValueError, match="already registered"):
        rw.register_designer_reward("regret", lambda o, c, s: 0.0)
    rw.register_designer_reward("test-constant", lambda o, c, s: 0.25, centered=False)
    cfg = RewardConfig(designer="test-constant")
    out = rw.EnvOutcome(True, skill="Math", unhinted_returns=[1.0])
    assert rw.designer_rewards([out, out], cfg) == [0.25, 0.25]


def test_entry_point_plugins_are_registered(tmp_path, monkeypatch):
    (tmp_path / "my_reward_plugin.py").write_text(
        "def half(outcome, cfg, state):\n    return 0.5\n", encoding="utf-8"
    )
    info = tmp_path / "my_reward_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-reward-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[spade_train.designer_rewards]\nhalf-reward = my_reward_plugin:half\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(rw, "DESIGNER_REWARDS", rw.DESIGNER_REWARDS.copy())  # read again
    try:
        assert "half-reward" in rw.designer_reward_names()
        cfg = RewardConfig(designer="half-reward", per_skill_centering=False)
        assert rw.designer_rewards([rw.EnvOutcome(True, skill="Math")], cfg) == [0.5]
    finally:
        sys.modules.pop("my_reward_plugin", None)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("reward.designer=blnd", "reward.designer: unknown designer reward 'blnd' (did you mean"),
        (
            "reward.designer=blend reward.plateau_ramp=0",
            "reward.options.plateau_ramp: Input should be greater than 0",
        ),
        ("reward.lp_gamma_slow=0.99", "lp_gamma_fast must be greater than lp_gamma_slow"),
        (
            "advantage.agent=ema",
            "advantage.agent: unknown agent advantage estimator 'ema'; choose from",
        ),
        ("advantage.game_baseline_decay=1.5", "advantage.game_baseline_decay:"),
    ],
)
def test_bad_reward_settings_are_one_line_recipe_errors(override, expected):
    with pytest.raises(RecipeError) as err:
        load_recipe("quickstart", override.split())
    message = str(err.value)
    assert expected in message and "\n" not in message
    if "blnd" in override:
        assert "choose from regret, regret-pure, blend, solve-rate" in message


def test_launcher_blend_numbers():
    cfg = RewardConfig(designer="blend")
    out = rw.EnvOutcome(True, hinted_returns=[0.8], unhinted_returns=[0.5], skill="Math")
    assert rw.blend_value(out, cfg.variant_options()) == pytest.approx(
        1.0
    )  # 0.6 * 1 + 0.4 * min(1, 0.3/0.15)
    assert rw.designer_reward(out, cfg) == pytest.approx(1.0)


def test_invalid_completions_keep_their_penalty_out_of_centering():
    cfg = RewardConfig(designer="regret", env_reward_scale=2.0)
    outs = [
        rw.EnvOutcome(False, reason="syntax_error"),
        rw.EnvOutcome(False, reason="timeout", timed_out=True),
        rw.EnvOutcome(True, hinted_returns=[1.0], unhinted_returns=[0.0], skill="Math"),
        rw.EnvOutcome(True, hinted_returns=[0.5], unhinted_returns=[0.5], skill="Math"),
    ]
    assert rw.designer_rewards(outs, cfg) == pytest.approx([-1.0, -0.5, 1.0, -1.0])
    auto = RewardConfig(designer="regret")  # scale auto: min(8 episodes / 2 envs * 1, 50) = 4
    assert rw.score_designers(outs, auto, n_agent_episodes=8).scale == 4.0


# -- delayed designer rewards ----------------------------------------------------------------------


def test_delay_zero_scores_like_the_per_cycle_path():
    cfg = RewardConfig(designer="regret", env_reward_scale=1.0)
    outs = [
        rw.EnvOutcome(
            True, hinted_returns=[1.0], unhinted_returns=[u], skill="Math", env_id=f"e{u}"
        )
        for u in (0.0, 0.5)
    ]
    queue = DelayedDesignerRewards(0)
    queue.push(3, outs, [{"n": 0}, {"n": 1}])
    queue.record_plays(3, {"e0.0": [1.0]})  # same cycle: not part of the window
    released = queue.pop_ready(3, cfg)
    assert released.rewards == rw.designer_rewards(outs, cfg)
    assert released.payloads == [{"n": 0}, {"n": 1}] and len(queue) == 0


def test_delayed_queue_survives_json_and_keeps_only_pending_plays():
    cfg = RewardConfig(designer="learning-potential", env_reward_scale=1.0)
    queue = DelayedDesignerRewards(3)
    queue.push(0, [rw.EnvOutcome(True, unhinted_returns=[0.0], skill="Math", env_id="a")], [1])
    queue.record_plays(1, {"a": [1.0], "stranger": [0.5]})
    restored = DelayedDesignerRewards()
    restored.load_state_dict(json.loads(json.dumps(queue.state_dict())))
    assert restored.state_dict() == queue.state_dict()
    assert "stranger" not in restored.state_dict()["plays"]
    state = rw.RewardState()
    out = restored.pop_ready(3, cfg, state)
    # trackers first take the window's mean (0.5), then the raw is |0.5 - baseline 0.5| = 0
    assert out.scores.raw == [0.0] and state.tracker("Math").baseline() == 0.5
    assert restored.state_dict()["plays"] == {}


# -- agent advantages and loss masks -------------------------------------------------------------


def test_agent_advantages_grpo_and_ema():
    class Cfg:
        agent, group_std_norm, eps = "grpo", True, 1e-8

    returns, games = [0.0, 1.0, 1.0, 1.0], ["a", "a", "b", "b"]
    assert adv.agent_advantages(returns, games, Cfg()) == pytest.approx([-1, 1, 0, 0])
    Cfg.agent = "ema-baseline"
    baselines = GameBaselines(0.5)
    assert adv.agent_advantages(returns, games, Cfg(), baselines) == [0.0, 1.0, 1.0, 1.0]
    assert adv.agent_advantages(returns, games, Cfg(), baselines) == [-0.5, 0.5, 0.0, 0.0]
    restored = GameBaselines.from_state(json.loads(json.dumps(baselines.state_dict())))
    assert restored.get("a") == baselines.get("a") == 0.5
    with pytest.raises(ValueError, match="GameBaselines"):
        adv.agent_advantages(returns, games, Cfg())


def test_compact_filter_and_malformed_tool_calls():
    sample = TrainSample([1, 2, 3], [0, 1, 1], [0.0, -0.1, -0.2], 1.0, "agent")
    assert adv.compact_filter([sample], truncated=True)[0].loss_mask == [0, 0, 0]
    assert adv.compact_filter([sample], truncated=False)[0].loss_mask == [0, 1, 1]
    turns = [
        se.TurnRecord(
            "<tool_call>{bad</tool_call>", "", True, "", 0, False, False, {}, "malformed_json"
        ),
        se.TurnRecord(
            '<tool_call>{"name": "f"}</tool_call>', "", False, "", 0, False, False, {}, "tool_calls"
        ),
        se.TurnRecord("no idea", "", True, "", 0, False, False, {}, "no_call"),
        se.TurnRecord("\\boxed{3}", "", False, "", 1, True, False, {}, "final_answer"),
    ]
    assert adv.malformed_tool_call_turns(turns) == [True, False, False, False]


def test_masked_turns_stay_as_context_but_are_not_trained():
    gens = [
        Generation("a", [1, 2], [10, 11], [-0.1, -0.2]),
        Generation("b", [1, 2, 10, 11, 5], [12], [-0.3]),
    ]
    from spade_train.play import merge_turns, samples_from_generations

    ((ids, mask, _),) = merge_turns(gens, trained=[False, True])
    assert ids == [1, 2, 10, 11, 5, 12] and mask == [0, 0, 0, 0, 0, 1]
    assert samples_from_generations(gens, 1.0, "agent", trained=[False, False]) == []
    with pytest.raises(ValueError, match="trained flags"):
        merge_turns(gens, trained=[True])


# -- truncated importance sampling -------------------------------------------------------------------


def test_tis_weights_each_token_by_the_clamped_proximal_over_rollout_ratio():
    logp = torch.tensor([[0.0, -1.0, -1.0, -1.0]], requires_grad=True)
    # rollout log-probs: the sampler found token 1 likelier (weight e^-1), token 2 as likely
    # (1), token 3 much less likely (e^3, clamped to 2)
    old = torch.tensor([[0.0, 0.0, -1.0, -4.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0]])
    loss, metrics = policy_loss(logp, old, torch.tensor([1.0]), mask, tis_clip=2.0)
    loss.backward()
    expected = torch.tensor([[0.0, -(torch.e**-1), -1.0, -2.0]]) / 3
    assert torch.allclose(logp.grad, expected, atol=1e-6)
    assert metrics["tis_clipfrac"] == pytest.approx(1 / 3)
    # without TIS the stale token 3 sits outside the clip range: no gradient at all
    logp.grad = None
    loss, _ = policy_loss(logp, old, torch.tensor([1.0]), mask)
    loss.backward()
    assert logp.grad[0, 3] == 0.0


# -- thinking mode ----------------------------------------------------------------------------------


def test_split_thinking_as_the_qwen3_template():
    assert split_thinking("<think>\nplan\n</think>\n\n\\boxed{3}") == ("plan", "\\boxed{3}")
    assert split_thinking("plan</think>\n\nok") == ("plan", "ok")  # prompt opened <think>
    assert strip_thinking("no thinking here") == "no thinking here"


THINK_ENV = textwrap.dedent(
    """
    class EchoEnv:
        skill = "Math"

        def __init__(self, max_turns=3, **kwargs):
            self.max_turns = max_turns

        def reset(self, seed=None):
            return "say 2", {}

        def step(self, action):
            return "again", 0.0, False, False, {}

        def close(self):
            pass
    """
)


class ThinkingBackend:
    """Replies think first, then answer; renders history the way Qwen3 does (past replies
    without their reasoning), one token per character."""

    def render(self, messages):
        text = "".join(f"<{m['role']}>{strip_thinking(m['content'])}" for m in messages)
        return [ord(c) for c in text + "<assistant>"]

    def generate(self, conversations, params, tools=None):
        text = "<think>maybe \\boxed{9}</think>\n\nmy move: 2"
        ids = [ord(c) for c in text]
        return [Generation(text, self.render(m), ids, [-0.1] * len(ids)) for m in conversations]


def test_thinking_is_stripped_before_parsing_and_trained_exactly_once():
    agent = PolicyAgent(ThinkingBackend(), lambda call: SamplingParams(seed=call), thinking=True)
    spec = se.EpisodeSpec(se.load_env(THINK_ENV, "EchoEnv"), seed=0, max_turns=3)
    result = se.run_episodes([spec], agent, system_prompt=None)[0]
    assert all("<think>" not in m["content"] for m in result.messages)
    # the reasoning's \boxed{9} is not the action: the visible reply has none
    assert all(t.malformed and t.action == "my move: 2" for t in result.turns)
    gens = agent.generations_of(result)
    samples = episode_samples(agent, result, 1.0)
    assert len(samples) == 3  # the history drops the reasoning, so each turn starts anew
    trained = [t for s in samples for t, m in zip(s.input_ids, s.loss_mask, strict=True) if m]
    assert trained == [t for g in gens for t in g.completion_ids]


# -- hint plays ---------------------------------------------------------------------------------------


def test_hint_plays_have_their_own_count_seeds_and_are_not_trained_by_default():
    from spade_train.core.hint_plays import episode_seed, plan_episodes

    plan = plan_episodes(0, 3, "env-a", episodes=4, hint_plays=2)
    plain = [p for p in plan if not p.hinted]
    hinted = [p for p in plan if p.hinted]
    assert len(plain) == 4 and len(hinted) == 2
    assert all(p.trained for p in plain) and not any(p.trained for p in hinted)
    assert not {p.seed for p in hinted} & {p.seed for p in plain}
    assert plan == plan_episodes(0, 3, "env-a", episodes=4, hint_plays=2)  # replays
    assert plan != plan_episodes(0, 4, "env-a", episodes=4, hint_plays=2)
    paired = plan_episodes(0, 3, "env-a", 2, 3, paired=True, train_hinted=True)
    assert [p.seed for p in paired[2:]] == [paired[0].seed, paired[1].seed, paired[0].seed]
    assert all(p.trained for p in paired)
    assert 0 <= episode_seed(1, 2, "x", "hint", 0) < 2**31
    with pytest.raises(ValueError, match="paired"):
        plan_episodes(0, 0, "e", 0, 2, paired=True)


def test_regret_without_hint_plays_is_zero_even_when_the_agent_failed():
    # a broken environment (every play scored -1) whose hint pass failed must not earn regret
    out = rw.EnvOutcome(True, unhinted_returns=[-1.0, -1.0], skill="Math")
    assert rw.designer_reward(out, RewardConfig(designer="regret")) == 0.0


def test_enable_thinking_reaches_the_chat_template():
    from spade_train.backends.render import render_prompt
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<think>", "</think>", "hi", "user:", "assistant:", "[UNK]"]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=core)
    tok.chat_template = (
        "{% for m in messages %}{{ m.role }}: {{ m.content }} {% endfor %}assistant: "
        "{% if enable_thinking is defined and not enable_thinking %}<think> </think>{% endif %}"
    )
    chat = [{"role": "user", "content": "hi"}]
    think_off = render_prompt(tok, chat, None, enable_thinking=False)
    assert tok.convert_ids_to_tokens(think_off)[-2:] == ["<think>", "</think>"]
    for default in (render_prompt(tok, chat, None), render_prompt(tok, chat, None, True)):
        assert tok.convert_ids_to_tokens(default)[-1] == "assistant:"


def test_reward_state_round_trips_through_json():
    state = rw.RewardState(0.8, 0.2)
    state.update({"Math": [0.0, 1.0], "Logic": [1.0]})
    state.update({"Math": [1.0]})
    again = rw.RewardState()
    again.load_state_dict(json.loads(json.dumps(state.state_dict())))
    assert again.state_dict() == state.state_dict()
    assert again.tracker("Math").signed_potential() == state.tracker("Math").signed_potential()
