"""Learning tests that can fail: GRPO on a tiny model trained from scratch really learns.

(1) agent role: on a one-turn spade-envs environment that pays for saying a 7, GRPO raises
    the mean return clearly above where it started;
(2) designer objective: after updates with regret advantages, the log-probability of a
    high-regret completion rises and those of low-regret and invalid completions fall.
"""

import statistics

import spade_envs as se
import torch
from spade_train.backends import make_backend
from spade_train.loss import token_logprobs
from spade_train.play import PolicyAgent, episode_samples
from spade_train.types import SamplingParams, TrainSample

SEVEN_ENV = """
class SevenEnv:
    skill = "Math"

    def __init__(self, max_turns=1, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.done = False
        return "Say a number with a 7 in it, as \\\\boxed{n}. 1 turn.", {}

    def step(self, action):
        if self.done:
            return "over", 0.0, True, False, {}
        self.done = True
        return "ok", (1.0 if "7" in action else 0.0), True, False, {}

    def solution(self):
        return "\\\\boxed{7}"

    def close(self):
        pass
"""


def group_advantages(rewards):
    mean = statistics.fmean(rewards)
    std = statistics.pstdev(rewards)
    return [(r - mean) / (std + 1e-6) for r in rewards]


def test_agent_grpo_raises_mean_return_on_a_real_environment():
    backend = make_backend("local", model="tiny:qwen3", lr=2e-2, micro_batch_size=32, seed=0)
    factory = se.load_env(SEVEN_ENV, "SevenEnv")
    returns = []
    for step in range(50):
        agent = PolicyAgent(
            backend, lambda call, step=step: SamplingParams(max_new_tokens=3, seed=1000 + step)
        )
        specs = [se.EpisodeSpec(factory, seed=i, env_id="seven", max_turns=1) for i in range(32)]
        results = se.run_episodes(specs, agent, system_prompt=None)
        rewards = [r.episode_return for r in results]
        returns.append(statistics.fmean(rewards))
        if statistics.pstdev(rewards) == 0:
            continue
        batch = [
            s
            for r, a in zip(results, group_advantages(rewards), strict=True)
            for s in episode_samples(agent, r, a)
        ]
        backend.train_step(batch)
    start, end = statistics.fmean(returns[:5]), statistics.fmean(returns[-5:])
    assert end >= start + 0.3, (start, end, returns)


def sequence_logprob(backend, prompt_ids, completion_ids):
    ids = torch.tensor([prompt_ids + completion_ids], device=backend.device)
    with torch.no_grad():
        lp, _ = token_logprobs(backend.model, ids, torch.ones_like(ids))
    return lp[0, len(prompt_ids) :].sum().item()


def test_designer_updates_follow_regret_advantages():
    backend = make_backend("local", model="tiny:qwen3", lr=2e-3, seed=0)
    tok = backend.tokenizer
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Write an environment for the Math skill."}],
        tokenize=False,
        add_generation_prompt=True,
    )
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    completions = {  # advantage from the regret of what each completion became
        "high": ("class ModEnv: reset step boxed answer HINT: reduce mod p", 1.0),
        "low": ("class EasyEnv: answer 1 turn HINT: answer one", -0.5),
        "invalid": ("def broken(:", -1.0),
    }
    ids = {
        k: tok(t + "<|im_end|>", add_special_tokens=False)["input_ids"]
        for k, (t, _) in completions.items()
    }
    before = {k: sequence_logprob(backend, prompt_ids, v) for k, v in ids.items()}
    for _ in range(6):
        batch = []
        for k, (_, advantage) in completions.items():
            old = [0.0] * len(prompt_ids)
            full = prompt_ids + ids[k]
            with torch.no_grad():
                lp, _ = token_logprobs(
                    backend.model,
                    torch.tensor([full], device=backend.device),
                    torch.ones(1, len(full), dtype=torch.long, device=backend.device),
                )
            old += lp[0, len(prompt_ids) :].tolist()
            mask = [0] * len(prompt_ids) + [1] * len(ids[k])
            batch.append(TrainSample(full, mask, old, advantage, "designer"))
        metrics = backend.train_step(batch)
        assert metrics["designer/tokens"] == sum(len(v) for v in ids.values())
    after = {k: sequence_logprob(backend, prompt_ids, v) for k, v in ids.items()}
    assert after["high"] > before["high"] + 1.0
    assert after["low"] < before["low"]
    assert after["invalid"] < before["invalid"]


def test_tis_trains_a_delayed_sample_that_the_ppo_clip_would_drop():
    """A delayed designer sample whose sampler found its tokens far less likely than the
    policy now does (rollout log-prob = current - 3): the PPO ratio e^3 is clipped, so without
    TIS it adds no gradient; with upstream's TIS (weight clamp(e^3, 0, 2) = 2, ratio taken
    against the current policy) it is trained and its log-probability rises."""
    results = {}
    for tis in (None, 2.0):
        backend = make_backend("local", model="tiny:qwen3", lr=2e-3, seed=0, tis_clip=tis)
        tok = backend.tokenizer
        prompt = tok.apply_chat_template(
            [{"role": "user", "content": "Write an environment for the Math skill."}],
            tokenize=False,
            add_generation_prompt=True,
        )
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        ids = tok("class ModEnv: HINT: reduce mod p<|im_end|>", add_special_tokens=False)[
            "input_ids"
        ]
        before = sequence_logprob(backend, prompt_ids, ids)
        full = prompt_ids + ids
        with torch.no_grad():
            lp, _ = token_logprobs(
                backend.model,
                torch.tensor([full], device=backend.device),
                torch.ones(1, len(full), dtype=torch.long, device=backend.device),
            )
        stale = [0.0] * len(prompt_ids) + [x - 3.0 for x in lp[0, len(prompt_ids) :].tolist()]
        sample = TrainSample(full, [0] * len(prompt_ids) + [1] * len(ids), stale, 1.0, "designer")
        for _ in range(4):
            backend.train_step([sample])
        results[tis] = sequence_logprob(backend, prompt_ids, ids) - before
    assert abs(results[None]) < 1e-4, results
    assert results[2.0] > 1.0, results
