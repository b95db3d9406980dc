"""The table of upstream launcher flags → recipe keys → values in cmd/README.md, made from the
recipes themselves.

    uv run python scripts/launcher_table.py           # print the tables
    uv run python scripts/launcher_table.py --write   # rewrite them in cmd/README.md

Each upstream launcher's values (spade-rl/spade ``cmd/``, as released) are written down below
as facts, per family; ``FLAGS`` says which recipe key each flag maps to and how the value
converts; ``NOTES`` says why a value differs or why a flag has no key. A cell shows our value,
and ``ours ≠ upstream`` where they differ. ``packages/spade-train/tests/test_launcher_table.py``
checks that the README holds exactly this output and that every difference has a note.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "cmd" / "README.md"
BEGIN, END = "<!-- launcher-table:begin -->", "<!-- launcher-table:end -->"

SKILLS = {
    "Mathematical_Reasoning": "Math",
    "Logical_Deduction": "Logic",
    "Spatial_Reasoning": "Spatial",
    "Pattern_Recognition": "Pattern",
    "Optimization": "Optimization",
    "Causal_Inference": "Causal",
}
GAME_SKILLS = list(SKILLS)
TOOL_SKILLS = [
    "API_Orchestration",
    "Data_Retrieval",
    "State_Modification",
    "Error_Recovery",
    "Tool_Selection",
    "Multi-Step_Workflows",
]


def _same(v: Any) -> Any:
    return v


def _skills(v: list[str]) -> list[str]:
    return [SKILLS.get(s, s) for s in v]


def _variant(v: str) -> str:
    return {"regret_based": "regret", "learning_potential": "learning-potential"}.get(v, v)


def _not(v: bool) -> bool:
    return not v


def _hint_mode(v: str) -> str:
    return {"self": "policy"}.get(v, v)


def _never_within_run(v: int) -> int:
    """Upstream's ``--eval-interval 100000`` never fires within 400 rollouts: off (0) here."""
    return 0 if v >= 100000 else v


def _normalization(v: str) -> str:
    return {"ema_baseline": "ema-baseline"}.get(v, v)


FLAGS: dict[str, tuple[str | None, Callable[[Any], Any]]] = {
    # flag: (recipe key, upstream value -> the value our key should hold)
    "--hf-checkpoint": ("backend.model", _same),
    "--num-rollout": ("cycles", _same),
    "--spade-num-games-per-rollout": ("agent.envs_per_cycle", _same),
    "--spade-trajectories-per-game": (None, _same),
    "--global-batch-size": ("agent.batch_episodes", _same),
    "--spade-hint-plays-per-game": ("agent.hint_plays_per_env", _same),
    "--spade-skills": ("designer.skills", _skills),
    "--spade-skills-per-regen": ("designer.prompts_per_cycle", _same),
    "--spade-game-regeneration-interval": ("designer.regenerate_every", _same),
    "--spade-proposer-training-delay": ("reward.delay_cycles", _same),
    "--spade-env-reward-variant": ("reward.designer", _variant),
    "--spade-plateau-weight": ("reward.plateau_weight", _same),
    "--spade-regret-weight": ("reward.regret_weight", _same),
    "--spade-regret-scale": ("reward.regret_scale", _same),
    "--spade-plateau-lo": ("reward.plateau_low", _same),
    "--spade-plateau-hi": ("reward.plateau_high", _same),
    "--spade-plateau-ramp": ("reward.plateau_ramp", _same),
    "--spade-use-solver-variance-reward": (None, _same),
    "--spade-env-temperature": ("designer.sampling.temperature", _same),
    "--spade-env-max-tokens": ("designer.sampling.max_new_tokens", _same),
    "--spade-actor-temperature": ("agent.sampling.temperature", _same),
    "--spade-actor-max-tokens": ("agent.sampling.max_new_tokens", _same),
    "--spade-max-context-length": ("backend.max_seq_len", _same),
    "--spade-max-turns": ("agent.max_turns", _same),
    "--spade-hint-mode": ("designer.hint_source", _hint_mode),
    "--spade-hint-max-tokens": ("designer.hint_max_new_tokens", _same),
    "--spade-hint-temperature": ("designer.hint_temperature", _same),
    "--spade-use-env-memory": ("designer.memory.enabled", _same),
    "--spade-env-memory-max-size": ("designer.memory.capacity", _same),
    "--spade-corpus-file": ("designer.grounding.enabled", _same),
    "--spade-corpus-max-doc-tokens": ("designer.grounding.max_words", _same),
    "one corpus document per prompt (code)": ("designer.grounding.mode", lambda v: v),
    "failed design slot (code)": ("reward.train_invalid", lambda v: v == "trained"),
    "--eval-interval": ("eval.every", _never_within_run),
    "--spade-no-train-on-env-trajectories": ("designer.train", _not),
    "--spade-static-game-pool": ("mode", lambda v: "fixed-static" if v else "spade"),
    "--spade-use-env-validator": ("designer.pipeline.validator.enabled", _same),
    "--spade-env-validator-model": ("designer.pipeline.validator.judge", _hint_mode),
    "SPADE_RESET_GATE": ("designer.pipeline.reset_gate.enabled", _same),
    "--spade-env-repair-turns": ("designer.pipeline.repair_turns", _same),
    "--spade-use-self-judge": ("designer.pipeline.self_judge.enabled", _same),
    "max_attempts (code)": ("designer.pipeline.max_attempts", _same),
    "generation timeout s (code)": ("designer.pipeline.generation_budget_s", _same),
    "overall timeout s (code)": ("designer.pipeline.cycle_budget_s", _same),
    "thinking (template)": ("agent.sampling.enable_thinking", lambda v: True if v else None),
    "--lr": ("backend.lr", _same),
    "--weight-decay": ("backend.weight_decay", _same),
    "--adam-beta2": (None, _same),
    "--kl-loss-coef": ("backend.kl_coef", _same),
    "--eps-clip": ("backend.clip_eps", _same),
    "--eps-clip-high": ("backend.clip_eps_high", _same),
    "--entropy-coef": ("backend.entropy_coef", _same),
    "--disable-grpo-std-normalization": ("advantage.group_std_norm", _not),
    "--use-tis": ("backend.tis_clip", lambda v: 2.0 if v else None),
    "--save-interval": ("checkpoint.every", _same),
    "--tensor-model-parallel-size": ("backend.options.inner_options.tensor_parallel", _same),
    "--sequence-parallel": ("backend.options.inner_options.sequence_parallel", _same),
    "--expert-model-parallel-size": ("backend.options.inner_options.expert_parallel", _same),
    "--context-parallel-size": (None, _same),
    "sandbox": ("validation.sandbox", _same),
    # Tinker launchers (their own key=value names)
    "model_name": ("backend.model", _same),
    "lora_rank": ("backend.options.lora_rank", _same),
    "learning_rate": ("backend.lr", _same),
    "num_games_per_rollout": ("agent.envs_per_cycle", _same),
    "trajectories_per_game": ("eval.fixed_model.plays_per_game", _same),
    "game_regeneration_interval": ("designer.regenerate_every", _same),
    "batch_size": ("agent.batch_episodes", _same),
    "num_train_datapoints / batch_size (default)": ("cycles", _same),
    "env_reward_variant (default)": ("reward.designer", _variant),
    "reward_normalization (default)": ("advantage.agent", _normalization),
    "loss_fn (default)": ("backend.options.loss", _same),
    "corpus grounding (none)": ("designer.grounding.enabled", _same),
    "env memory (none)": ("designer.memory.enabled", _same),
    "fixed_eval_interval": ("eval.fixed_model.every", _same),
    "fixed_eval_model": ("eval.fixed_model.model", _same),
    "env_temperature": ("designer.sampling.temperature", _same),
    "env_max_tokens": ("designer.sampling.max_new_tokens", _same),
    "actor_temperature": ("agent.sampling.temperature", _same),
    "actor_max_tokens": ("agent.sampling.max_new_tokens", _same),
    "max_turns": ("agent.max_turns", _same),
    "max_context_length": ("backend.max_seq_len", _same),
    "use_self_judge": ("designer.pipeline.self_judge.enabled", _same),
    "save_every": ("checkpoint.every", _same),
    "eval_every (no AIME paths given)": ("eval.every", lambda v: 0),
    # fixed-environment RLVE launchers
    "--rollout-batch-size": ("agent.envs_per_cycle", _same),
    "--spade-trajectories-per-game (fixed env)": ("agent.episodes_per_env", _same),
    "--spade-fixed-env-source": ("rlve.envs", _same),
    "--spade-fixed-env-same-problem": ("rlve.same_problem", _same),
    "--spade-difficulty-tau-acc": ("rlve.tau_acc", _same),
    "--spade-difficulty-tau-num": ("rlve.tau_num", _same),
    "--spade-difficulty-d-delta": ("rlve.d_delta", _same),
    "max difficulty (code)": ("rlve.max_difficulty", _same),
}

IGNORED_NOTE = (
    "not applied: the training backend does not honour this key yet (its declared support, "
    "`spade_train/backends/options.py`), so `spade train` refuses the recipe"
)
NOTES: dict[str, str] = {
    "--spade-trajectories-per-game": "not read for play by upstream's SPADE rollout, which "
    "plays every game ceil(global batch / games) times (`agent.batch_episodes`)",
    "--spade-use-solver-variance-reward": "no key: here the variance bonus belongs to the "
    "solver-variance reward (learning potential + bonus), not to regret; this recipe uses "
    "plain regret",
    "--spade-corpus-file": "grounding on (CORPUS_FILE or the shipped sample)",
    "--spade-env-validator-model": "upstream 'self' = our 'policy'",
    "thinking (template)": "the 8B recipes set enable_thinking for both roles' sampling",
    "--adam-beta2": "no key: the Megatron trainer uses AdamW's betas (0.9, 0.999)",
    "--context-parallel-size": "no key: the Megatron backend has no context parallel",
    "--expert-model-parallel-size": "deliberate: experts are spread over the data-parallel "
    "ranks only (tensor 4 x data 2 on the 16 colocated GPUs)",
    "--tensor-model-parallel-size": "as upstream where the layout allows",
    "--spade-skills-per-regen": "two-skill: both skills each cycle",
    "sandbox": "deliberate: generated code runs in spade-sandbox (process isolation, rlimits, "
    "no network), never in the trainer's process as upstream",
    "--spade-max-context-length": "as upstream",
}

# -- upstream values, as released --------------------------------------------------------------

GAMES = {
    "--num-rollout": 400,
    "--spade-num-games-per-rollout": 24,
    "--spade-trajectories-per-game": 16,
    "--spade-hint-plays-per-game": 16,
    "--spade-skills": GAME_SKILLS,
    "--spade-skills-per-regen": 3,
    "--spade-game-regeneration-interval": 4,
    "--spade-proposer-training-delay": 4,
    "--spade-env-reward-variant": "blend",
    "--spade-plateau-weight": 0.6,
    "--spade-regret-weight": 0.4,
    "--spade-regret-scale": 0.15,
    "--spade-plateau-lo": 0.4,
    "--spade-plateau-hi": 0.6,
    "--spade-plateau-ramp": 0.25,
    "--spade-env-temperature": 0.6,
    "--spade-env-max-tokens": 16384,
    "--spade-actor-temperature": 0.6,
    "--spade-actor-max-tokens": 8192,
    "--spade-max-context-length": 32768,
    "--spade-max-turns": 25,
    "--spade-hint-mode": "self",
    "--spade-hint-max-tokens": 4096,
    "--spade-hint-temperature": 0.3,
    "--spade-use-env-memory": True,
    "--spade-env-memory-max-size": 200,
    "--spade-corpus-file": True,
    "--spade-corpus-max-doc-tokens": 6000,
    "one corpus document per prompt (code)": "document",
    "--spade-no-train-on-env-trajectories": False,
    "--spade-use-env-validator": False,
    "SPADE_RESET_GATE": False,
    "--spade-env-repair-turns": 0,
    "--spade-use-self-judge": False,
    "max_attempts (code)": 8,
    "generation timeout s (code)": 300,
    "overall timeout s (code)": 900,
    "--lr": 1e-6,
    "--weight-decay": 0.1,
    "--adam-beta2": 0.98,
    "--kl-loss-coef": 0.0,
    "--eps-clip": 0.2,
    "--eps-clip-high": 0.28,
    "--entropy-coef": 0.0,
    "--disable-grpo-std-normalization": True,
    "--use-tis": True,
    "--global-batch-size": 192,
    "--save-interval": 16,
    "--tensor-model-parallel-size": 2,
    "--sequence-parallel": True,
    "--context-parallel-size": 2,
    "sandbox": "in-process",
    "failed design slot (code)": "not trained",
    "--eval-interval": 100000,
}
SIZE = {
    "4b": {"--hf-checkpoint": "${MODEL_ROOT}/Qwen3-4B-Instruct-2507"},
    "8b": {
        "--hf-checkpoint": "${MODEL_ROOT}/Qwen3-8B",
        "--spade-env-max-tokens": 20000,
        "--kl-loss-coef": 0.005,
        "thinking (template)": True,
    },
    "30b": {
        "--hf-checkpoint": "${MODEL_ROOT}/Qwen3-30B-A3B-Instruct-2507",
        "--tensor-model-parallel-size": 4,
        "--expert-model-parallel-size": 8,
        "--context-parallel-size": 1,
    },
}
FIXED_KEEP = (
    "--hf-checkpoint",
    "--global-batch-size",
    "--eval-interval",
    "--num-rollout",
    "--spade-num-games-per-rollout",
    "--spade-trajectories-per-game",
    "--spade-actor-temperature",
    "--spade-actor-max-tokens",
    "--spade-max-context-length",
    "--spade-max-turns",
    "--lr",
    "--weight-decay",
    "--kl-loss-coef",
    "--eps-clip",
    "--eps-clip-high",
    "--disable-grpo-std-normalization",
    "--use-tis",
    "--save-interval",
    "sandbox",
)
TOOL = {
    "--spade-skills": TOOL_SKILLS,
    "--spade-game-regeneration-interval": 8,
    "--spade-proposer-training-delay": 8,
    "--spade-hint-max-tokens": 2048,
    "--spade-corpus-max-doc-tokens": 4000,
    "--spade-use-env-validator": True,
    "--spade-env-validator-model": "self",
    "SPADE_RESET_GATE": True,
    "--kl-loss-coef": 0.005,
    "--eval-interval": 32,
}
TOOL_4B = {
    "--num-rollout": 500,
    "--spade-num-games-per-rollout": 16,
    "--spade-hint-plays-per-game": 4,
    "--spade-game-regeneration-interval": 32,
    "--spade-proposer-training-delay": 32,
    "--spade-env-reward-variant": "regret_based",
    "--spade-use-solver-variance-reward": True,
    "--spade-hint-max-tokens": 512,
    "--global-batch-size": 256,
    "--eval-interval": 48,
}
RLVE = {  # cmd/games/train_fixed_rlve_{4b,8b,30b}.sh (fixed_env_rollout, sliding window)
    "--num-rollout": 400,
    "--rollout-batch-size": 16,
    "--spade-trajectories-per-game (fixed env)": 16,
    "--spade-fixed-env-source": "official16",
    "--spade-fixed-env-same-problem": True,
    "--spade-difficulty-tau-acc": 0.9,
    "--spade-difficulty-tau-num": 128,
    "--spade-difficulty-d-delta": 4,
    "max difficulty (code)": 20,
    "--spade-actor-temperature": 1.0,
    "--spade-actor-max-tokens": 8192,
    "--spade-max-context-length": 32768,
    "--spade-max-turns": 25,
    "--lr": 1e-6,
    "--weight-decay": 0.1,
    "--kl-loss-coef": 0.0,
    "--eps-clip": 0.2,
    "--eps-clip-high": 0.28,
    "--entropy-coef": 0.0,
    "--disable-grpo-std-normalization": True,
    "--use-tis": True,
    "--eval-interval": 100000,
    "--save-interval": 16,
}
ABLATIONS = {  # what each wrapper changes in upstream's 30B games launcher
    "ablation-no-grounding": ("train_no_corpus_30b.sh", {"--spade-corpus-file": False}),
    "ablation-no-memory": ("train_no_memory_30b.sh", {"--spade-use-env-memory": False}),
    "ablation-no-ed-training-no-memory": (
        "train_no_ed_training_no_memory_30b.sh",
        {"--spade-no-train-on-env-trajectories": True, "--spade-use-env-memory": False},
    ),
    "ablation-fixed-gpt55": ("train_fixed_gpt55_30b.sh", {"--spade-static-game-pool": True}),
    "ablation-two-skill": (
        "train_two_skill_30b.sh",
        {
            "--spade-skills": ["Mathematical_Reasoning", "Pattern_Recognition"],
            "--spade-skills-per-regen": 2,
        },
    ),
    "ablation-learning-potential": (
        "train_learning_potential_30b.sh",
        {"--spade-env-reward-variant": "learning_potential"},
    ),
    "ablation-solve-rate": (
        "train_solve_rate_30b.sh",
        {
            "--spade-env-reward-variant": "blend",
            "--spade-plateau-weight": 1.0,
            "--spade-regret-weight": 0.0,
            "--spade-plateau-lo": 0.4,
            "--spade-plateau-hi": 0.6,
        },
    ),
}
TINKER = {
    "lora_rank": 32,
    "learning_rate": 1e-6,
    "num_games_per_rollout": 16,
    "trajectories_per_game": 8,
    "game_regeneration_interval": 4,
    "batch_size": 128,
    "env_temperature": 0.6,
    "env_max_tokens": 13000,
    "actor_temperature": 0.6,
    "actor_max_tokens": 8192,
    "max_turns": 5,
    "max_context_length": 16384,
    "use_self_judge": False,
    "save_every": 32,
    "eval_every (no AIME paths given)": 16,
    "num_train_datapoints / batch_size (default)": 12800 // 128,
    "env_reward_variant (default)": "learning_potential",
    "reward_normalization (default)": "ema_baseline",
    "loss_fn (default)": "importance_sampling",
    "corpus grounding (none)": False,
    "env memory (none)": False,
    "fixed_eval_interval": 16,
    "fixed_eval_model": "gpt-5-mini",
}
TINKER_LONG = {"env_max_tokens": 16000, "max_turns": 3, "max_context_length": 32768}
TINKER_MODELS = {
    "tinker-qwen3-8b": ("qwen3_8b", "Qwen/Qwen3-8B", False),
    "tinker-qwen3-8b-base": ("qwen3_8b_base", "Qwen/Qwen3-8B-Base", False),
    "tinker-qwen3-4b-instruct": ("qwen3_4b_instruct", "Qwen/Qwen3-4B-Instruct-2507", True),
    "tinker-qwen3-30b-instruct": ("qwen3_30b_instruct", "Qwen/Qwen3-30B-A3B-Instruct-2507", True),
    "tinker-gpt-oss-20b": ("gpt_oss_20b", "openai/gpt-oss-20b", True),
}


def families() -> list[tuple[str, dict[str, tuple[str, dict[str, Any]]]]]:
    """``(title, {recipe: (upstream launcher, {flag: upstream value})})`` per table."""
    games, tool = {}, {}
    for size in ("4b", "8b", "30b"):
        up = {**GAMES, **SIZE[size]}
        games[f"spade-games-{size}"] = (f"games/train_spade_{size}.sh", up)
        fixed = {k: up[k] for k in FIXED_KEEP} | {"--spade-static-game-pool": True}
        if size == "8b":
            fixed["thinking (template)"] = True
        games[f"fixed-static-{size}"] = (f"games/train_fixed_gpt55_{size}.sh", fixed)
        t = {**up, **TOOL, **(TOOL_4B if size == "4b" else {})}
        if size == "4b":
            t.pop("--spade-env-validator-model")
        tool[f"spade-tool-use-{size}"] = (f"tool_use/train_spade_{size}.sh", t)
    rlve = {
        f"fixed-rlve-{size}": (
            f"games/train_fixed_rlve_{size}.sh",
            {"--hf-checkpoint": SIZE[size]["--hf-checkpoint"], **RLVE}
            | ({"thinking (template)": True} if size == "8b" else {}),
        )
        for size in ("4b", "8b", "30b")
    }
    ablations = {
        r: (f"ablations/{script}", {"--hf-checkpoint": SIZE["30b"]["--hf-checkpoint"], **flags})
        for r, (script, flags) in ABLATIONS.items()
    }
    tinker = {
        r: (
            f"tinker/{folder}/train_spade_tinker.sh",
            {"model_name": model, **TINKER, **(TINKER_LONG if long else {})},
        )
        for r, (folder, model, long) in TINKER_MODELS.items()
    }
    return [
        ("Games: SPADE and the fixed GPT-5.5 baseline (`fixed-static-*`)", games),
        ("Tool use", tool),
        ("Fixed-environment RLVE (`fixed-rlve-*`)", rlve),
        ("Ablations (30B): the flags each upstream wrapper changes", ablations),
        ("Tinker", tinker),
    ]


# -- reading the recipes -----------------------------------------------------------------------


def recipe_value(cfg: Any, key: str) -> Any:
    """The value of a dotted recipe key, defaults of typed backend options included."""
    if key.startswith("backend.options.inner_options."):
        return getattr(cfg.backend.typed_options().inner_model(), key.rsplit(".", 1)[1])
    if key.startswith("backend.options."):
        return getattr(cfg.backend.typed_options(), key.rsplit(".", 1)[1])
    if key.startswith("reward.") and key.split(".")[1] not in type(cfg.reward).model_fields:
        return reward_option(cfg.reward, key.split(".")[1])
    node = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return node


def ignored_by(cfg: Any, key: str) -> str | None:
    """The backend that would ignore ``key`` in this recipe (its declared support), or None."""
    field = key.removeprefix("backend.")
    if field == key or "." in field:
        return None
    who, keys = cfg.backend.unhonoured()
    return who if field in keys else None


def reward_option(reward: Any, name: str) -> Any:
    """A designer-reward option (``reward.options``): the variant's value, or for a variant
    without that option the default of the variants that have it (it has no effect there)."""
    typed = reward.variant_options()
    if name in type(typed).model_fields:
        return getattr(typed, name)
    from spade_train.core.reward_options import BlendOptions

    return BlendOptions.model_fields[name].default


def cell(cfg: Any, flag: str, upstream: Any) -> tuple[str, bool]:
    """``(text, agrees)`` for one flag of one recipe. A value the recipe sets but its
    backend does not honour never agrees: the cell says which backend ignores it."""
    key, convert = FLAGS[flag]
    if key is None:
        return f"— ({_show(upstream)})", False
    ours = recipe_value(cfg, key)
    want = convert(upstream)
    agrees = _equal(ours, want)
    text = _show(ours) if agrees else f"{_show(ours)} ≠ {_show(want)}"
    who = ignored_by(cfg, key)
    if who is not None:
        return f"{text} (ignored by {who})", False
    return text, agrees


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(b)))
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return list(a) == list(b)
    return bool(a == b)


def _show(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list | tuple):
        return "[" + ", ".join(map(str, v)) + "]"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v).replace("|", "\\|")


def rows() -> list[tuple[str, str, str, str, bool]]:
    """``(family, recipe, flag, cell, agrees)`` for every mapped flag of every recipe."""
    from spade_train.config import load_recipe

    os.environ.pop("MODEL_ROOT", None)  # show ${MODEL_ROOT} as the recipes write it
    out = []
    for title, recipes in families():
        for recipe, (_launcher, flags) in recipes.items():
            cfg = load_recipe(recipe)
            for flag, upstream in flags.items():
                text, agrees = cell(cfg, flag, upstream)
                out.append((title, recipe, flag, text, agrees))
    return out


def render() -> str:
    """The Markdown tables: one per family, a row per flag, a column per recipe."""
    data = rows()
    parts = []
    for title, recipes in families():
        names = list(recipes)
        flags: list[str] = []
        for _launcher, fl in recipes.values():
            flags += [f for f in fl if f not in flags]
        by = {(r, f): t for (ti, r, f, t, _a) in data if ti == title}
        bad = {f for (ti, _r, f, t, a) in data if ti == title and not a and "(ignored by " not in t}
        parts.append(f"### {title}\n")
        parts.append("Launchers: " + ", ".join(f"`{recipes[n][0]}` → `{n}`" for n in names))
        parts.append("")
        parts.append("| upstream flag | recipe key | " + " | ".join(names) + " | note |")
        parts.append("|---" * (len(names) + 3) + "|")
        for f in flags:
            key = FLAGS[f][0] or "—"
            cells = [by.get((n, f), "") for n in names]
            note = NOTES.get(f, "") if f in bad else ""
            if any("(ignored by " in c for c in cells):
                note = "; ".join(filter(None, [IGNORED_NOTE, note]))
            parts.append(f"| `{f}` | `{key}` | " + " | ".join(cells) + f" | {note} |")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def undocumented() -> list[str]:
    """Differences (or unmapped flags) without a note: each is a bug in a recipe or here. A
    value its backend ignores carries :data:`IGNORED_NOTE` and is listed by :func:`ignored`."""
    return sorted(
        {
            f"{r}: {f}"
            for (_t, r, f, c, a) in rows()
            if not a and f not in NOTES and "(ignored by " not in c
        }
    )


def ignored() -> list[str]:
    """``recipe: flag`` for every value a recipe sets that its backend does not honour."""
    return sorted({f"{r}: {f}" for (_t, r, f, c, _a) in rows() if "(ignored by " in c})


def write_readme() -> None:
    text = README.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    new = f"{head}{BEGIN}\n{render()}{END}{tail}"
    tmp = README.with_suffix(".md.tmp")
    tmp.write_text(new, encoding="utf-8")
    tmp.replace(README)


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write_readme()
    else:
        sys.stdout.write(render())
    for item in ignored():
        sys.stderr.write(f"not honoured by its backend: {item}\n")
    missing = undocumented()
    if missing:
        sys.stderr.write("differences without a note: " + "; ".join(missing) + "\n")
        sys.exit(1)
