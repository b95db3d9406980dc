"""The cold start: what it trains on (the starter corpus's training games only, each prompt
the loop's own scaffolded prompt with the skill's other game as the target), that it lowers the
targets' loss on a real tiny model, and that the warmed model is cached by what shapes it."""

from __future__ import annotations

import pytest
import spade_envs as se
import torch
from spade_train.cold_start import designer_pairs, prepare
from spade_train.config import load_recipe
from spade_train.core import design as dz
from spade_train.core.scaffold import SCAFFOLD_PREFILL, SCAFFOLD_STOP
from spade_train.loss import token_logprobs
from transformers import AutoModelForCausalLM, AutoTokenizer

TINY = ["backend.model=tiny:qwen3?layers=1&hidden=32", "cold_start.enabled=true"]


def test_pairs_are_the_loop_prompts_with_the_other_training_game_as_target() -> None:
    cfg = load_recipe("quickstart", ["cold_start.enabled=true"])
    starter = se.load_corpus("starter")
    train = {
        skill: [
            starter.source(r.id) for r in starter.records if (r.split, r.skill) == ("train", skill)
        ]
        for skill in se.SKILLS
    }
    heldout = [starter.source(r.id) for r in starter.records if r.split != "train"]
    pairs = designer_pairs(cfg)
    assert len(pairs) == 2 * len(se.SKILLS)
    for i, (messages, target) in enumerate(pairs):
        skill = cfg.designer.skills[i // 2]
        loop = dz.build_designer_messages(
            skill, max_turns=cfg.agent.max_turns, compact=True, scaffold=True, example_index=i % 2
        )
        assert messages == loop and messages[-1]["content"] == SCAFFOLD_PREFILL
        shown, other = train[skill][i % 2], train[skill][(i + 1) % 2]
        assert shown in messages[1]["content"] and other not in messages[1]["content"]
        assert target == other.rstrip("\n") + SCAFFOLD_STOP[0]
        assert not any(h in messages[1]["content"] or h.rstrip() in target for h in heldout)


def test_a_run_without_a_scaffolded_designer_skips_the_cold_start() -> None:
    assert load_recipe("quickstart").cold_start_applies
    for override in ("designer.scaffold=false", "mode=fixed-static"):
        cfg = load_recipe("quickstart", [override])
        assert cfg.cold_start.enabled and not cfg.cold_start_applies
    assert not load_recipe("quickstart-tool-use").cold_start.enabled
    assert not load_recipe("quickstart", ["cold_start.enabled=false"]).cold_start_applies


def test_every_mode_warms_up_a_fixed_run_and_its_plan_says_which(capsys) -> None:
    """``cold_start.every_mode``: a fixed-mode run starts from the same warmed weights as a
    spade run (a comparison's arms share them); the plan names the warm-up or why it is off."""
    from spade_train.cli import main

    for mode in ("fixed-static", "fixed-rlve"):
        cfg = load_recipe("quickstart", [f"mode={mode}", "cold_start.every_mode=true"])
        assert cfg.cold_start_applies
    overrides = ["mode=fixed-static", "fixed.corpus=starter"]
    assert main(["train", "--recipe", "quickstart", "--dry-run", *overrides]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "skipped in mode fixed-static" in out and "MISSING" not in out
    assert (
        main(
            [
                "train",
                "--recipe",
                "quickstart",
                "--dry-run",
                *overrides,
                "cold_start.every_mode=true",
            ]
        )
        == 0
    )
    assert "designer warm-up on the starter training games" in capsys.readouterr().out


def _target_nll(model_dir: str, cfg) -> float:
    from spade_train.cold_start import _encode

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    total = 0.0
    for messages, target in designer_pairs(cfg)[:4]:
        ids, n = _encode(tokenizer, messages, target)
        with torch.no_grad():
            logp, _ = token_logprobs(model, torch.tensor([ids]), torch.ones(1, len(ids)))
        total -= float(logp[0, n:].mean())
    return total / 4


@pytest.mark.slow
def test_the_warm_up_lowers_the_target_loss_and_is_cached(monkeypatch, tmp_path) -> None:
    from spade_train.models import resolve_model

    monkeypatch.setenv("SPADE_CACHE", str(tmp_path))
    cfg = load_recipe("quickstart", [*TINY, "cold_start.epochs=1", "cold_start.lr=3e-3"])
    lines: list[str] = []
    warmed = prepare(cfg, lines.append, progress=False)
    assert warmed.parent == tmp_path / "models" and "-cold-" in warmed.name
    assert "12 designer examples x 1 epochs" in lines[-1]
    base = resolve_model(cfg.backend.model)
    assert _target_nll(str(warmed), cfg) < _target_nll(str(base), cfg) - 0.05
    again = prepare(cfg, lines.append, progress=False)
    assert again == warmed and lines[-1].startswith("cold start: cached")
    other = load_recipe("quickstart", [*TINY, "cold_start.epochs=1", "cold_start.lr=1e-3"])
    assert prepare(other, lines.append, progress=False) != warmed  # settings name the model
    # the run's seed does not name the warm-up (runs of other seeds share it); its own seed does
    reseeded = load_recipe(
        "quickstart", [*TINY, "cold_start.epochs=1", "cold_start.lr=3e-3", "seed=7"]
    )
    assert prepare(reseeded, lines.append, progress=False) == warmed
    own = load_recipe(
        "quickstart", [*TINY, "cold_start.epochs=1", "cold_start.lr=3e-3", "cold_start.seed=7"]
    )
    assert prepare(own, lines.append, progress=False) != warmed
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith(".")]
