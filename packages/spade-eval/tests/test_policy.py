"""In-loop evaluation through a policy object with generate(conversations, params)."""

from dataclasses import dataclass

from spade_eval import PolicyLike, PolicySampling, evaluate_policy
from spade_eval.suites import aime


@dataclass
class Gen:
    text: str
    completion_ids: tuple = ()


class ScriptedPolicy:
    """Answers AIME fixtures correctly; records the params it was given."""

    def __init__(self, gold):
        self.gold, self.seen, self.calls = gold, [], 0

    def generate(self, conversations, params, tools=None):
        self.calls += 1
        self.seen.append(params)
        return [Gen(f"\\boxed{{{self.gold[c[-1]['content']]}}}") for c in conversations]


def test_evaluate_policy_flat_metrics_and_params(workspace, tmp_path):
    gold = {it.prompt[-1]["content"]: it.answer for it in aime.load({"years": [2025, 2026]})}
    policy = ScriptedPolicy(gold)
    assert isinstance(policy, PolicyLike)
    cfg = {"seed": 3, "batch_size": 4, "sampling": {"temperature": 0.6, "max_tokens": 64},
           "suites": {"aime": {"years": [2025, 2026], "samples": 2,
                               "sampling": {"top_k": 20}}}}  # fmt: skip
    out = evaluate_policy(policy, cfg, tmp_path)
    assert out["eval/aime/mean"] == 1.0 and out["eval/aime/n"] == 7.0
    assert out["eval/aime2025_pass1"] == out["eval/aime_overall_pass1"] == 1.0
    assert all(isinstance(v, float) for v in out.values())
    p = policy.seen[0]
    assert isinstance(p, PolicySampling)
    assert (p.max_new_tokens, p.temperature, p.top_k) == (64, 0.6, 20)
    assert {q.seed for q in policy.seen} == {3, 4}  # config seed + sample index
    calls = policy.calls
    assert evaluate_policy(policy, cfg, tmp_path) == out  # resumed: nothing regenerated
    assert policy.calls == calls


def test_params_factory_builds_the_callers_type(workspace, tmp_path):
    made = []

    def factory(**kw):
        made.append(kw)
        return PolicySampling(**kw)

    gold = {it.prompt[-1]["content"]: it.answer for it in aime.load({"years": [2026]})}
    cfg = {"sampling": {"temperature": 0.0, "max_tokens": 8, "stop": ["</s>"]},
           "suites": {"aime": {"years": [2026]}}}  # fmt: skip
    out = evaluate_policy(ScriptedPolicy(gold), cfg, tmp_path, params_factory=factory, prefix="ev")
    assert made[0] == {"temperature": 0.0, "max_new_tokens": 8, "stop": ("</s>",), "seed": 0}
    assert out["ev/aime2026_pass1"] == 1.0
