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
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from spade_train.types import SamplingParams

DEFAULT_GENERATORS = (
    "basic_arithmetic",
    "chain_sum",
    "leg_counting",
    "number_sorting",
    "word_sorting",
    "letter_counting",
)


class RecipeError(ValueError):
    """A recipe or override is wrong; the message is one line naming the key and the fix."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class SamplingConfig(_Strict):
    max_new_tokens: int = Field(256, ge=1)
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0)

    def to_params(self, seed: int | None = None) -> SamplingParams:
        """These settings as backend :class:`SamplingParams` with ``seed``."""
        return SamplingParams(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            seed=seed,
        )


class BackendConfig(_Strict):
    name: Literal["local", "ray", "tinker"] = "local"
    model: str = "embedded:smollm2-135m"
    device: str = "auto"
    dtype: str = "auto"
    lr: float = Field(1e-5, gt=0.0)
    weight_decay: float = Field(0.0, ge=0.0)
    grad_clip: float = Field(1.0, ge=0.0)
    micro_batch_size: int = Field(4, ge=1)
    clip_eps: float = Field(0.2, gt=0.0)
    clip_eps_high: float | None = None
    kl_coef: float = Field(0.0, ge=0.0)
    entropy_coef: float = 0.0
    lora: dict[str, Any] | None = None
    max_seq_len: int = Field(2048, ge=16)
    gen_batch_size: int = Field(16, ge=1)
    gradient_checkpointing: bool = False
    options: dict[str, Any] = Field(default_factory=dict)

    def backend_kwargs(self, seed: int) -> dict[str, Any]:
        """Keyword arguments for ``make_backend(name, **kwargs)``: every field but ``name`` and
        ``options``, then ``options`` merged over them, then the run ``seed``."""
        kwargs = self.model_dump(exclude={"name", "options"})
        kwargs.update(self.options)
        kwargs["seed"] = seed
        return kwargs


class GroundingConfig(_Strict):
    enabled: bool = True
    k: int = Field(2, ge=0)
    corpus_file: str | None = None
    """``None``: ``$CORPUS_FILE`` if set, else the sample shipped with spade-corpus."""
    field: str = "text"
    max_chars: int = Field(400, ge=1)


class MemoryConfig(_Strict):
    enabled: bool = True
    capacity: int = Field(256, ge=1)
    n_frontier: int = Field(2, ge=0)
    n_easy: int = Field(1, ge=0)
    n_hard: int = Field(1, ge=0)
    band: tuple[float, float] = (0.15, 0.85)

    @field_validator("band")
    @classmethod
    def _band(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0.0 <= v[0] < v[1] <= 1.0:
            raise ValueError("must be [low, high] with 0 <= low < high <= 1")
        return v


class DesignerConfig(_Strict):
    prompts_per_cycle: int = Field(2, ge=1)
    group_size: int = Field(2, ge=1)
    skills: list[str] = Field(default_factory=lambda: list(se.SKILLS), min_length=1)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    hint_source: Literal["reply", "policy", "endpoint"] = "reply"
    hint_endpoint: str | None = None
    hint_model: str | None = None
    grounding: GroundingConfig = Field(default_factory=GroundingConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    max_source_chars: int = Field(12000, ge=100)
    compact: bool = True
    """Short designer prompts (for small-context policies); ``False`` adds worked guidance."""
    scaffold: bool = False
    """For policies too small to follow the answer format unaided (the quickstart's 135M
    model): show a short complete example game, start the reply inside a ```python block and
    stop at its closing fence; the hint then comes from the hint pass (``hint_source`` must be
    ``policy`` or ``endpoint``). Games setting only."""
    hint_max_new_tokens: int = Field(128, ge=1)
    """Token budget of each reply of the separate hint pass (``hint_source: policy``)."""


class ValidationConfig(_Strict):
    seeds: int = Field(3, ge=1)
    workers: int = Field(2, ge=1)
    timeout_s: float = Field(10.0, gt=0.0)
    sandbox: Literal["process", "docker"] = "process"
    executor: Literal["local", "ray"] = "local"
    """Where validation runs: a warm sandbox pool in this process, or sandbox worker actors on
    Ray (``spade_train.backends.ray.RaySandboxPool``, ``workers`` of them)."""


class AgentConfig(_Strict):
    envs_per_cycle: int = Field(4, ge=1)
    episodes_per_env: int = Field(2, ge=1)
    """Episodes per environment with the hint, and as many again without."""
    max_turns: int = Field(6, ge=1)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    concurrency: int = Field(64, ge=1)
    """Episodes in flight at once; each round's batched generation is at most this big."""
    env_workers: int = Field(8, ge=1)
    """Threads that start, step and close a round's (sandboxed) environments at once."""
    executor: Literal["local", "ray"] = "local"
    """Where the played environments run: the warm sandbox pool of this process, or sandbox
    worker actors on Ray (the ``RaySandboxPool`` that ``validation.executor: ray`` uses too,
    ``validation.workers`` actors); generation stays with the policy backend."""


class RewardConfig(_Strict):
    designer: Literal["regret", "blend", "solve-rate"] = "regret"
    invalid_penalty: float = -1.0
    timeout_penalty: float = -0.5
    plateau_low: float = Field(0.4, ge=0.0, le=1.0)
    plateau_high: float = Field(0.6, ge=0.0, le=1.0)
    regret_scale: float = Field(0.15, gt=0.0)
    blend_plateau_weight: float = 0.6
    blend_regret_weight: float = 0.4
    per_skill_centering: bool = False
    delay_cycles: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _plateau(self) -> RewardConfig:
        if self.plateau_low > self.plateau_high:
            raise ValueError("plateau_low must not exceed plateau_high")
        return self


class AdvantageConfig(_Strict):
    role_normalization: bool = True
    group_std_norm: bool = True
    eps: float = Field(1e-6, gt=0.0)


class PoolConfig(_Strict):
    capacity: int = Field(512, ge=1)
    retire_win_rate: float = Field(0.9, ge=0.0, le=1.0)
    min_plays: int = Field(4, ge=1)
    sampling: Literal["uniform", "frontier"] = "frontier"


class FixedConfig(_Strict):
    corpus: str = "example"
    """A corpus directory, or ``example`` for the corpus shipped with spade-envs."""
    split: str = "train"
    generators: list[str] = Field(default_factory=lambda: list(DEFAULT_GENERATORS))
    target_win_rate: tuple[float, float] = (0.3, 0.7)


class RlveConfig(_Strict):
    """``mode: fixed-rlve``: RLVE's environments (``pip install 'spade-train[rlve]'``) with the
    sliding-window difficulty of the released launchers (see ``spade_train.core.rlve_source``)."""

    envs: str | list[str] = "official16"
    """``official16``, ``all`` (every RLVE identifier) or a list of identifiers."""
    tau_acc: float = Field(0.9, ge=0.0, le=1.0)
    tau_num: int = Field(128, ge=1)
    d_delta: int = Field(4, ge=1)
    max_difficulty: int = Field(20, ge=0)
    same_problem: bool = True
    """All episodes of an environment in a cycle play one generated problem (one GRPO group)."""
    attempts: int = Field(1, ge=1)
    """Answers allowed per episode (1: single turn, as upstream)."""
    reward: Literal["accuracy", "score"] = "accuracy"
    """``accuracy``: 1 when RLVE's verifier passes the answer, else 0 (upstream); ``score``:
    RLVE's own score in [-1, 1]."""

    @field_validator("envs")
    @classmethod
    def _envs(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, str) and v not in ("official16", "all"):
            raise ValueError(f"{v!r} is not an environment set; use official16, all or a list")
        if isinstance(v, list) and not v:
            raise ValueError("the list is empty; name at least one RLVE identifier")
        return v


class LoggingConfig(_Strict):
    wandb: bool = False
    tensorboard: bool = False
    transcripts_per_cycle: int = Field(8, ge=0)
    progress: bool = True


class CheckpointConfig(_Strict):
    every: int = Field(1, ge=1)
    keep: int = Field(2, ge=1)


class RunConfig(_Strict):
    name: str
    seed: int = 0
    mode: Literal["spade", "fixed-static", "fixed-procedural", "fixed-rlve"] = "spade"
    setting: Literal["games", "tool-use"] = "games"
    cycles: int = Field(3, ge=1)
    run_dir: str | None = None
    backend: BackendConfig = Field(default_factory=BackendConfig)
    designer: DesignerConfig = Field(default_factory=DesignerConfig)
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    pool: PoolConfig = Field(default_factory=PoolConfig)
    fixed: FixedConfig = Field(default_factory=FixedConfig)
    rlve: RlveConfig = Field(default_factory=RlveConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
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
        if self.mode == "fixed-rlve" and self.setting != "games":
            raise ValueError("mode fixed-rlve: RLVE environments are games; set setting=games")
        if self.overlap and self.backend.name != "ray":
            raise ValueError(
                "overlap: the update can only run beside generation on the ray backend "
                "(the local one trains and generates with one model); set backend.name=ray "
                "or overlap=false"
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


# -- recipes ---------------------------------------------------------------------------------

_ENV_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _recipes_dir() -> Path:
    return Path(str(resources.files("spade_train") / "recipes"))


def list_recipes() -> list[str]:
    """Names of the recipes shipped with spade-train, sorted."""
    return sorted(p.stem for p in _recipes_dir().glob("*.yaml"))


def _resolve(name_or_path: str) -> Path:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
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
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        where = f" line {line + 1}" if line is not None else ""
        raise RecipeError(f"recipe {path.stem}:{where} is not valid YAML") from None
    if not isinstance(data, dict):
        raise RecipeError(f"recipe {path.stem}: top level must be a mapping of keys")
    base = data.pop("base", None)
    data.setdefault("name", path.stem)
    if base is not None:
        if not isinstance(base, str):
            raise RecipeError(f"recipe {path.stem}: base must be a recipe name or path")
        parent_ref = base
        if not Path(base).is_absolute() and (path.parent / base).is_file():
            parent_ref = str(path.parent / base)
        data = _merge(_read(parent_ref, (*seen, key)), data)
    return data


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


def _expand(value: Any) -> Any:
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
    data = _expand(data)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise _one_line(exc, label) from None


def dump_config(cfg: RunConfig) -> str:
    """The whole config as YAML; writing it to a file and loading that path gives ``cfg``."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
