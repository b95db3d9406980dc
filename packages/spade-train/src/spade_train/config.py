"""Run configuration: one strict, typed tree per run, loaded from a YAML recipe.

A recipe is a YAML file under ``spade_train/recipes/`` (or any path). ``base: other`` inherits
another recipe and deep-merges over it; ``a.b.c=value`` overrides are applied last, the value
parsed as YAML. ``${VAR}`` in string values is replaced by the environment variable when it is
set (left as is otherwise, so the part that uses it reports the problem). Every mistake becomes
one :class:`RecipeError` line naming the key path and what is allowed.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import spade_envs as se
import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from spade_train.config_backend import BackendConfig, SamplingConfig
from spade_train.config_base import MAX_COUNT, Strict
from spade_train.config_designer import (
    DesignerConfig,
    GroundingConfig,
    LLMValidatorConfig,
    MemoryConfig,
    PipelineConfig,
    ResetGateConfig,
    SelfJudgeConfig,
)
from spade_train.config_sections import (
    DEFAULT_GENERATORS,
    AdvantageConfig,
    AgentConfig,
    CheckpointConfig,
    ColdStartConfig,
    EvalConfig,
    FixedConfig,
    LoggingConfig,
    PoolConfig,
    RewardConfig,
    RlveConfig,
    ValidationConfig,
)
from spade_train.errors import RecipeError

__all__ = [  # the config's public names: the run's model, its sections, the recipe functions
    "DEFAULT_GENERATORS",
    "MAX_COUNT",
    "AdvantageConfig",
    "AgentConfig",
    "BackendConfig",
    "CheckpointConfig",
    "ColdStartConfig",
    "DesignerConfig",
    "EvalConfig",
    "FixedConfig",
    "GroundingConfig",
    "LLMValidatorConfig",
    "LoggingConfig",
    "MemoryConfig",
    "PipelineConfig",
    "PoolConfig",
    "RecipeError",
    "ResetGateConfig",
    "RewardConfig",
    "RlveConfig",
    "RunConfig",
    "SamplingConfig",
    "SelfJudgeConfig",
    "ValidationConfig",
    "dump_config",
    "list_recipes",
    "load_recipe",
]


class RunConfig(Strict):
    name: str
    """The run's name: a recipe's file name unless it says otherwise; names the default run
    directory (``runs/<name>-<time>``)."""
    seed: int = 0
    """The seed of everything random in the run (sampling, pool draws, episode seeds, hint plays),
    derived per cycle and stage, so the same recipe and seed give the same run."""
    mode: Literal["spade", "fixed-static", "fixed-procedural", "fixed-rlve"] = "spade"
    """Where environments come from (``spade_train.sources``): ``spade`` (the designer writes them),
    ``fixed-static`` (a static corpus), ``fixed-procedural`` (hand-written generators), ``fixed-
    rlve`` (RLVE's environments)."""
    setting: Literal["games", "tool-use"] = "games"
    """``games`` (text games of the six cognitive skills) or ``tool-use`` (multi-turn tool-use
    environments, grouped by domain)."""
    cycles: int = Field(3, ge=1, le=MAX_COUNT)
    """How many cycles the run trains; each designs, validates, plays, scores, computes advantages
    and updates the policy once."""
    run_dir: str | None = None
    """Where the run writes; None: ``runs/<name>-<date>-<time>`` (``spade train --run-dir`` wins
    over both)."""
    backend: BackendConfig = Field(default_factory=BackendConfig)
    """The policy: its backend, model and training settings."""
    designer: DesignerConfig = Field(default_factory=DesignerConfig)
    """The designer role: prompts, sampling, hints, grounding, memory and the pipeline of step 2."""
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    """The sandbox validation of designed environments (step 2)."""
    agent: AgentConfig = Field(default_factory=AgentConfig)
    """The agent role: which environments it plays each cycle, how, and how an episode is scored."""
    reward: RewardConfig = Field(default_factory=RewardConfig)
    """The designer's reward (the agent's is the episode return)."""
    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    """How both roles' rewards become advantages (step 5)."""
    pool: PoolConfig = Field(default_factory=PoolConfig)
    """The pool of environments the agent plays beside each cycle's new ones."""
    fixed: FixedConfig = Field(default_factory=FixedConfig)
    """The corpus the pool starts with, and the fixed baselines' environments."""
    rlve: RlveConfig = Field(default_factory=RlveConfig)
    """The ``fixed-rlve`` baseline's environments and difficulty controller."""
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    """What the run shows and logs while it trains."""
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    """How often the run checkpoints itself, and how many checkpoints it keeps."""
    cold_start: ColdStartConfig = Field(default_factory=ColdStartConfig)
    """A brief supervised warm-up of the policy before the first cycle."""
    eval: EvalConfig = Field(default_factory=EvalConfig)
    """In-loop evaluation (spade-eval) and held-out games."""
    overlap: bool = False
    """Run each cycle's update on the trainer while the next cycle designs, validates and
    plays (generation one update behind; the PPO ratio against the sampling log-probs accounts
    for it). The last cycle's update is waited for. Needs ``backend.name: ray``."""

    @model_validator(mode="after")
    def _skills(self) -> RunConfig:
        # Games target the six contract skills; tool-use domains are free strings.
        if self.setting == "games":
            for i, s in enumerate(self.designer.skills):
                if s not in se.SKILLS:
                    near = difflib.get_close_matches(s, se.SKILLS, n=1)
                    tip = f" (did you mean {near[0]}?)" if near else ""
                    raise ValueError(
                        f"designer.skills.{i}: {s!r} is not a skill{tip}; "
                        f"allowed: {', '.join(se.SKILLS)}"
                    )
        if "regeneration_interval" not in self.reward.model_fields_set:
            self.reward.regeneration_interval = self.designer.regenerate_every
        if self.mode == "fixed-rlve" and self.setting != "games":
            raise ValueError("mode fixed-rlve: RLVE environments are games; set setting=games")
        if self.overlap and self.backend.name != "ray":
            raise ValueError(
                "overlap: the update can only run beside generation on the ray backend "
                "(the local one trains and generates with one model); set backend.name=ray "
                "or overlap=false"
            )
        if self.designer.skeleton != "off" and not self.designer.scaffold:
            raise ValueError(
                "designer.skeleton: the skeleton fills a scaffolded reply; "
                "set designer.scaffold=true (or designer.skeleton=off)"
            )
        if self.designer.scaffold:
            if self.setting != "games":
                raise ValueError(
                    "designer.scaffold: the example is a game; set it false for tool-use"
                )
            if self.designer.hint_source == "reply":
                raise ValueError(
                    "designer.scaffold: the reply stops at the end of the code, so it has no hint; "
                    "set designer.hint_source=policy (or endpoint)"
                )
        return self

    @property
    def cold_start_applies(self) -> bool:
        """Whether this run warms its policy up first: ``cold_start.enabled`` and a scaffolded
        designer to teach (mode spade, or any mode with ``cold_start.every_mode``; the scaffold
        is a games-setting feature). A run of another mode built on the quickstart recipe skips
        the warm-up and says so."""
        c = self.cold_start
        return c.enabled and self.designer.scaffold and (self.mode == "spade" or c.every_mode)


# -- recipes ---------------------------------------------------------------------------------

_NESTED_KEY = re.compile(r"^([a-z_]+(?:\.[\w-]+)*): (.*)$")
_ENV_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _recipes_dir() -> Path:
    return Path(str(resources.files("spade_train") / "recipes"))


def list_recipes() -> list[str]:
    """Names of the recipes shipped with spade-train, sorted (``_name`` files are shared
    bases, not runs of their own, and are left out)."""
    return sorted(p.stem for p in _recipes_dir().glob("*.yaml") if not p.stem.startswith("_"))


def _resolve(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if path.is_dir():
            raise RecipeError(
                f"recipe {name_or_path} is a directory; give a recipe's .yaml file "
                "(or a shipped recipe's name: spade recipes)"
            )
        if not path.is_file():
            raise RecipeError(f"recipe file {name_or_path} does not exist")
        return path
    shipped = _recipes_dir() / f"{name_or_path}.yaml"
    if shipped.is_file():
        return shipped
    names = list_recipes()
    near = difflib.get_close_matches(name_or_path, names, n=1)
    tip = f"did you mean {near[0]}? " if near else ""
    raise RecipeError(
        f"unknown recipe {name_or_path!r}; {tip}choose one of {', '.join(names)} or a .yaml path"
    )


def _read(name_or_path: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    path = _resolve(name_or_path)
    key = str(path.resolve())
    if key in seen:
        raise RecipeError(f"recipe {path.stem}: base chain loops back to itself")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        where = f" line {line + 1}" if line is not None else ""
        raise RecipeError(f"recipe {path.stem}:{where} is not valid YAML") from None
    if data is None:
        raise RecipeError(
            f"recipe {path.stem}: {path} is empty; a recipe is a mapping of keys "
            "(at least `base: quickstart` to run the quickstart's settings)"
        )
    if not isinstance(data, dict):
        raise RecipeError(
            f"recipe {path.stem}: top level must be a mapping of keys, not a "
            f"{type(data).__name__} (write `key: value` lines)"
        )
    base = data.pop("base", None)
    data.setdefault("name", path.stem)
    if base is not None:
        if not isinstance(base, str):
            raise RecipeError(f"recipe {path.stem}: base must be a recipe name or path")
        parent_ref = base
        if not Path(base).is_absolute() and (path.parent / base).is_file():
            parent_ref = str(path.parent / base)
        parent = _read(parent_ref, (*seen, key))
        if _new_variant(parent, data.get("reward")):
            parent["reward"] = _without_variant_options(parent["reward"])
        data = _merge(parent, data)
    return data


def _new_variant(data: dict[str, Any], reward: object) -> bool:
    """Whether ``reward`` (a recipe's or an override's) picks another designer reward than
    ``data`` holds: then ``data``'s variant options are not carried over (each variant starts
    from its own defaults)."""
    old = data.get("reward")
    if not isinstance(old, dict) or not isinstance(reward, dict) or "designer" not in reward:
        return False
    return reward["designer"] != old.get("designer", RewardConfig.model_fields["designer"].default)


def _without_variant_options(reward: dict[str, Any]) -> dict[str, Any]:
    from spade_train.core.rewards import DESIGNER_REWARDS

    keys = {"options"}
    for name in DESIGNER_REWARDS.names():
        keys |= set(DESIGNER_REWARDS.get(name).options.model_fields)
    return {k: v for k, v in reward.items() if k not in keys}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _apply_override(data: dict[str, Any], override: str, label: str) -> None:
    key, sep, raw = override.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise RecipeError(
            f"recipe {label}: bad override {override!r}; write key.path=value, "
            "e.g. designer.group_size=4"
        )
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        raise RecipeError(
            f"recipe {label}: override {key}: value {raw!r} is not valid YAML"
        ) from None
    if key == "reward.designer" and _new_variant(data, {"designer": value}):
        data["reward"] = _without_variant_options(data["reward"])
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise RecipeError(f"recipe {label}: override {key}: {part} is not a section")
        node = child
    node[parts[-1]] = value


def _expand(value: object) -> object:
    if isinstance(value, str):
        return _ENV_VAR.sub(lambda m: os.environ.get(m.group(1), m.group(0)), value)
    if isinstance(value, dict):
        return {k: _expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v) for v in value]
    return value


def _model_for(path: Sequence[Any]) -> type[BaseModel] | None:
    model: type[BaseModel] = RunConfig
    for part in path:
        field = model.model_fields.get(str(part))
        ann = getattr(field, "annotation", None) if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        model = ann
    return model


def _one_line(exc: ValidationError, label: str) -> RecipeError:
    err = exc.errors()[0]
    loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
    path = ".".join(str(p) for p in loc)
    if err["type"] == "extra_forbidden":
        parent = _model_for(loc[:-1])
        allowed = sorted(parent.model_fields) if parent else []
        near = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        tip = f"did you mean {near[0]}?" if near else f"allowed: {', '.join(allowed)}"
        return RecipeError(f"recipe {label}: {path}: unknown key ({tip})")
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if err["type"] == "missing":
        msg = "required key is missing"
    got = err.get("input")
    shown = "" if err["type"] in ("missing", "value_error") else f" (got {got!r})"
    nested = _NESTED_KEY.match(msg)
    if nested and err["type"] == "value_error":  # a sub-model's key path, e.g. backend.options.x
        path, msg = f"{path}.{nested.group(1)}" if path else nested.group(1), nested.group(2)
    if path:
        return RecipeError(f"recipe {label}: {path}: {msg}{shown}")
    return RecipeError(f"recipe {label}: {msg}")


def load_recipe(name_or_path: str, overrides: Sequence[str] = ()) -> RunConfig:
    """Load a shipped recipe by name (or a YAML file by path), apply ``key.path=value``
    overrides, expand ``${VAR}`` and validate. Raises :class:`RecipeError` (one line)."""
    label = Path(name_or_path).stem if name_or_path.endswith((".yaml", ".yml")) else name_or_path
    data = _read(name_or_path)
    for override in overrides:
        _apply_override(data, override, label)
    try:
        return RunConfig.model_validate(_expand(data))
    except ValidationError as exc:
        raise _one_line(exc, label) from None


def dump_config(cfg: RunConfig) -> str:
    """The whole config as YAML; writing it to a file and loading that path gives ``cfg``."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
