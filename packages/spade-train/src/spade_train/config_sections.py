"""The sections of a run configuration (each a strict pydantic model: unknown keys refused,
units in field names). :mod:`spade_train.config` assembles them into ``RunConfig``."""

from __future__ import annotations

import difflib
from typing import Any, Literal

import spade_envs as se
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from spade_train.backends.options import BackendOptions, ignored_fields
from spade_train.backends.ray_options import RayOptions
from spade_train.backends.registry import backend_spec
from spade_train.core.reward_options import RewardOptions
from spade_train.errors import RegistryError
from spade_train.types import SamplingParams

DEFAULT_GENERATORS = (
    "basic_arithmetic",
    "chain_sum",
    "leg_counting",
    "number_sorting",
    "word_sorting",
    "letter_counting",
)


MAX_COUNT = 1_000_000
"""The largest count a recipe may give (cycles, prompts, episodes, workers…): a typo such as
``cycles=99999999999999999999999`` is refused at load instead of running for ever."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class SamplingConfig(_Strict):
    max_new_tokens: int = Field(256, ge=1)
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0)
    stop: list[str] = Field(default_factory=list)
    """Extra stop strings (the completion ends with the one that stopped it)."""
    balanced_stop: bool = False
    """A stop string counts only outside braces the reply opened itself (local backend)."""
    enable_thinking: bool | None = None
    """Thinking mode for templates that have one (Qwen3 ``enable_thinking``); ``None`` leaves
    the template's default. Set per role: ``designer.sampling`` and ``agent.sampling``."""

    def to_params(self, seed: int | None = None) -> SamplingParams:
        """These settings as backend :class:`SamplingParams` with ``seed``."""
        return SamplingParams(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            stop=tuple(self.stop),
            balanced_stop=self.balanced_stop,
            seed=seed,
            enable_thinking=self.enable_thinking,
        )


class BackendConfig(_Strict):
    name: str = "local"
    """A registered backend (``spade_train.backends.available_backends()``)."""
    model: str = "embedded:smollm2-135m"
    device: str = "auto"
    dtype: str = "auto"
    lr: float = Field(1e-5, gt=0.0)
    weight_decay: float = Field(0.0, ge=0.0)
    grad_clip: float = Field(1.0, ge=0.0)
    micro_batch_size: int = Field(4, ge=1)
    micro_batch_tokens: int | None = Field(None, ge=1)
    """Also cut a micro-batch before its rows times its longest row would pass this many
    tokens (same gradient, bounded peak memory; the local backend honours it). None:
    ``micro_batch_size`` rows."""
    clip_eps: float = Field(0.2, gt=0.0)
    clip_eps_high: float | None = None
    kl_coef: float = Field(0.0, ge=0.0)
    entropy_coef: float = 0.0
    lora: dict[str, Any] | None = None
    max_seq_len: int = Field(2048, ge=16)
    gen_batch_size: int = Field(16, ge=1)
    gradient_checkpointing: bool = False
    tis_clip: float | None = Field(None, gt=0.0)
    """Truncated importance sampling: each token's loss weighted by
    ``clamp(exp(current - rollout log-prob), tis_clip_low, tis_clip)`` (the paper launchers:
    2.0); ``None`` turns it off. Matters for delayed and overlapped (off-policy) samples."""
    tis_clip_low: float = Field(0.0, ge=0.0)
    options: dict[str, Any] = Field(default_factory=dict)
    """The backend's own options, checked against its model (``spade_train.backends.options``)."""

    @model_validator(mode="after")
    def _options(self) -> BackendConfig:
        self.typed_options()
        return self

    def typed_options(self) -> BackendOptions:
        """``options`` as the backend's typed model; ValueError naming the key otherwise."""
        try:
            spec = backend_spec(self.name)
        except RegistryError as exc:
            raise ValueError(f"name: {exc}") from None
        try:
            typed = spec.options.model_validate(self.options)
            if isinstance(typed, RayOptions):
                try:
                    typed.inner_model()
                except ValidationError as exc:
                    raise _nested(exc, "options.inner_options", typed.inner) from None
        except RegistryError as exc:
            raise ValueError(f"options.inner: {exc}") from None
        except ValidationError as exc:
            raise _nested(exc, "options", self.name) from None
        return typed

    def common(self) -> dict[str, Any]:
        """The fields every backend shares (all but ``name`` and ``options``)."""
        return self.model_dump(exclude={"name", "options"})

    def backend_kwargs(self, seed: int) -> dict[str, Any]:
        """Keyword arguments for ``make_backend(name, **kwargs)``: the shared fields, the typed
        options flattened over them (for ``ray``: its own and the inner backend's), the seed."""
        kwargs = self.common()
        kwargs.update(self.typed_options().flat())
        kwargs["seed"] = seed
        return kwargs

    def plan(self) -> dict[str, Any]:
        """What the backend would build, stopping at the device (see ``BackendOptions.plan``)."""
        defaults = {k: f.default for k, f in BackendConfig.model_fields.items()}
        return {"backend": self.name, **self.typed_options().plan(self.common(), defaults)}

    def unhonoured(self) -> tuple[str, list[str]]:
        """``(backend, keys)``: the backend that trains (for ``ray``, its inner one) and the
        shared keys set away from their default that it does not honour (its declared
        support, ``BackendOptions.honours``)."""
        defaults = {k: f.default for k, f in BackendConfig.model_fields.items()}
        who, keys = self.typed_options().honours()
        return who or self.name, ignored_fields(keys, self.common(), defaults)

    def check_honoured(self) -> None:
        """A ValueError (one line) naming every set key the training backend would ignore."""
        who, keys = self.unhonoured()
        if keys:
            names = ", ".join(f"backend.{k}" for k in keys)
            them = "them" if len(keys) > 1 else "it"
            raise ValueError(
                f"{names}: not honoured by the {who} backend (it would train as if unset); "
                f"remove {them} from the recipe or choose a backend that honours {them} "
                "(declared in spade_train/backends/options.py)"
            )


def _nested(exc: ValidationError, prefix: str, backend: str) -> ValueError:
    err = exc.errors()[0]
    path = ".".join([prefix, *(str(p) for p in err["loc"])])
    if err["type"] == "extra_forbidden":
        return ValueError(f"{path}: not an option of the {backend} backend")
    return ValueError(f"{path}: {err['msg']} (got {err.get('input')!r})")


class GroundingConfig(_Strict):
    enabled: bool = True
    mode: Literal["document", "snippets"] = "snippets"
    """``document``: one corpus document per designer prompt, cut at ``max_words`` words with
    a marker (the released code's SPICE grounding; the paper recipes); ``snippets``: ``k``
    pieces of at most ``max_chars`` characters (for small-context policies)."""
    k: int = Field(2, ge=0)
    corpus_file: str | None = None
    """``None``: ``$CORPUS_FILE`` if set, else the sample shipped with spade-corpus."""
    field: str | None = None
    """The JSON field holding a record's text; ``None``: ``orig_doc``, else ``text`` (SPICE
    records, then generic ones, as upstream)."""
    max_chars: int = Field(400, ge=1)
    max_words: int = Field(6000, ge=1)
    """``document`` mode's budget (upstream's ``--spade-corpus-max-doc-tokens``: 6000 for
    games, 4000 for tool use)."""


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


class ResetGateConfig(_Strict):
    """Reject an environment whose success criteria (``_message_criteria``, callables over
    ``_state``) raise on the state ``reset`` builds at every tested seed (run in the sandbox)."""

    enabled: bool = False
    seeds: int = Field(3, ge=1)
    """Seeds ``0 .. seeds-1`` (upstream: 0, 1, 2)."""
    skip_first_cycle: bool = True
    """Upstream leaves the gate off on the first rollout, when nothing could replace a reject."""


class LLMValidatorConfig(_Strict):
    """An LLM reads each environment that passed the sandbox and answers ``\\boxed{yes|no}``.
    Infrastructure errors, empty replies and replies without a verdict accept (fail open) and
    are counted in the cycle's metrics."""

    enabled: bool = False
    judge: Literal["policy", "endpoint"] = "policy"
    """``policy``: the policy itself through the backend (inference only); ``endpoint``: an
    OpenAI-compatible chat-completions server."""
    endpoint: str | None = None
    """Base URL of the server, up to and including ``/v1`` (``{endpoint}/chat/completions``)."""
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the endpoint's key (sent as a Bearer token when set)."""
    prompt: Literal["auto", "cognitive", "tool-use"] = "auto"
    """``auto``: the lenient playability check for games, the solvability audit for tool use."""
    temperature: float = Field(0.3, ge=0.0)
    max_new_tokens: int = Field(16384, ge=1)
    timeout_s: float = Field(120.0, gt=0.0)
    """Per call to the endpoint (upstream: 2 minutes)."""


class SelfJudgeConfig(_Strict):
    """After play, the policy judges each new environment from its code and one episode; a
    ``\\boxed{no}`` adds ``penalty`` to the designer's reward (fails open like the validator)."""

    enabled: bool = False
    penalty: float = -0.5
    temperature: float = Field(0.3, ge=0.0)
    max_new_tokens: int = Field(2048, ge=1)
    max_turns_shown: int = Field(5, ge=1)


class PipelineConfig(_Strict):
    """The designer pipeline after the sandbox validation (``steps/pipeline.py``): reset gate,
    LLM validator, retries or repair turns, time budgets, self-judge."""

    reset_gate: ResetGateConfig = Field(default_factory=ResetGateConfig)
    validator: LLMValidatorConfig = Field(default_factory=LLMValidatorConfig)
    self_judge: SelfJudgeConfig = Field(default_factory=SelfJudgeConfig)
    max_attempts: int = Field(1, ge=1)
    """Generations per designer slot: a failed attempt is sampled again from the same prompt
    (upstream: 8). Only the slot's last attempt is kept and trained."""
    repair_turns: int = Field(0, ge=0)
    """Turns in which a failing environment's report is shown to the designer for a fix
    (inference only: the first reply is the one trained; a repaired environment enters the
    pool). Replaces retries, as upstream."""
    repaired_reward: float = 0.0
    """The designer reward of a first reply that failed but was repaired (upstream: 0)."""
    generation_budget_s: float = Field(300.0, gt=0.0)
    """An attempt whose generation round took longer fails as ``generation_timeout``."""
    cycle_budget_s: float = Field(900.0, gt=0.0)
    """No retry or repair round starts once the cycle's design step has run this long."""

    @model_validator(mode="after")
    def _one_fix(self) -> PipelineConfig:
        if self.repair_turns and self.max_attempts > 1:
            raise ValueError(
                "repair_turns and max_attempts > 1 exclude each other (repair replaces "
                "retries); set max_attempts=1 or repair_turns=0"
            )
        return self


class DesignerConfig(_Strict):
    prompts_per_cycle: int = Field(2, ge=1)
    group_size: int = Field(2, ge=1)
    skills: list[str] = Field(default_factory=lambda: list(se.SKILLS), min_length=1)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    hint_source: Literal["reply", "policy", "endpoint"] = "policy"
    """Where the privileged hint comes from: a separate pass over the code by the policy (the
    released code's way: untrained, low temperature, retried), the designer's own reply (its
    tokens then carry the designer's advantage), or an OpenAI-compatible endpoint."""
    hint_endpoint: str | None = None
    hint_model: str | None = None
    hint_api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the hint endpoint's key (unset: no key sent)."""
    hint_temperature: float = Field(0.3, ge=0.0)
    hint_retries: int = Field(3, ge=1)
    """Tries per hint (a reply with no hint, or a failed endpoint call, is tried again)."""
    hint_timeout_s: float = Field(120.0, gt=0.0)
    """Per endpoint call; a design whose hint never came is rejected as ``missing_hint``."""
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
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    train: bool = True
    """``False``: the designer's completions are never trained (upstream's
    ``--spade-no-train-on-env-trajectories``); the environments are still designed and played."""
    regenerate_every: int = Field(1, ge=1)
    """Cycles between designer rounds (upstream's ``--spade-game-regeneration-interval``: 4
    for games). A round designs at cycles 1, 1+N, 1+2N, ...; the cycles in between play the
    environments that round admitted (pool draws fill any shortfall), and the skills rotate
    per round."""


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
    """Trained episodes per environment, without the hint (upstream's ``trajectories_per_game``)."""
    max_turns: int = Field(6, ge=1)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    concurrency: int = Field(64, ge=1)
    """Episodes in flight at once; each round's batched generation is at most this big."""
    hint_plays_per_env: int = Field(2, ge=0)
    """Episodes per environment played with the hint, on their own seeds (upstream's
    ``hint_plays_per_game``); they feed the designer's regret and are not trained unless
    ``train_hint_plays``. Played only in ``mode: spade`` with a reward that reads hints."""
    paired_hint_seeds: bool = False
    """Hint plays reuse the unhinted episodes' seeds (regret over the same instances)."""
    train_hint_plays: bool = False
    batch_episodes: int | None = Field(None, ge=1)
    """Trained episodes a cycle aims for: each of its environments plays
    ``ceil(batch_episodes / environments)`` (upstream's global batch over its games: 192 / 24
    = 8 in the games launchers); ``None``: ``episodes_per_env`` each."""
    scoring: Literal["strict", "upstream"] = "upstream"
    """How an episode is scored (spade-envs ``run_episodes``): ``upstream`` clips the return
    to [-1, 1] and scores an environment exception -1 (the released code); ``strict`` clips to
    [0, 1] and leaves failures unscored."""
    respect_env_max_turns: bool = False
    """Play an environment's own ``max_turns`` (capped at ``max_turns``), as upstream's
    ``--respect-game-max-turns``."""
    thinking: bool = False
    """The agent's replies may hold ``<think>…</think>``: stripped before the action is parsed
    and from the history (all sampled tokens are still trained once)."""
    turn_budget_s: float | None = Field(None, gt=0.0)
    """Longest one batched agent call may take; past it the round's episodes end as the
    agent's failure (``agent_error``), never the environment's. None: unbounded."""
    episode_budget_s: float | None = Field(None, gt=0.0)
    """Total agent time per episode (its rounds' calls, summed); past it, as above."""
    system_prompt: str | None = None
    """The agent's system message. None: spade-envs' ``DEFAULT_SYSTEM_PROMPT`` ("think
    briefly, then end your reply with your move", and the tool prompt in tool environments);
    ``""``: no system message. With ``answer_prefix`` the reply starts with the answer, so a
    prompt asking for the move alone fits it better."""
    answer_prefix: str = ""
    """Text every agent reply starts with, written by the runner, not the policy (e.g.
    ``\\boxed{`` for a policy too small to keep the answer format): the policy continues it,
    the transcripts show it, and its tokens are prompt tokens (never trained)."""
    env_workers: int = Field(8, ge=1)
    """Threads that start, step and close a round's (sandboxed) environments at once."""
    executor: Literal["local", "ray"] = "local"
    """Where the played environments run: the warm sandbox pool of this process, or sandbox
    worker actors on Ray (the ``RaySandboxPool`` that ``validation.executor: ray`` uses too,
    ``validation.workers`` actors); generation stays with the policy backend."""


class RewardConfig(_Strict):
    """The designer's reward (``spade_train.core.rewards``). Defaults are the released
    launchers' values (paper runs). The chosen variant's own settings are ``options``, checked
    against its typed model (``blend``: ``BlendOptions``; ``solve-rate``: ``SolveRateOptions``;
    the others have none); they may also be written flat (``reward.plateau_weight: 0.6``), and
    a key of another variant is refused with one line."""

    designer: str = "regret"
    """A registered designer reward: regret, regret-pure, blend, solve-rate, micro-lp,
    learning-potential, solver-variance, or one added through the registry."""
    invalid_penalty: float = -1.0
    """The raw reward of a design that failed (parse, validation or a pipeline stage)."""
    timeout_penalty: float = -0.5
    """The raw reward of a design whose validation or generation timed out."""
    train_invalid: bool = True
    """``False``: an invalid design is masked, never trained (upstream: a design slot whose
    every attempt failed leaves no designer sample, so no penalty reaches the policy; the paper
    recipes). ``True``: it is trained with ``invalid_penalty`` (or the penalties below)."""
    parsed_invalid_penalty: float | None = None
    """The penalty of an invalid design whose reply held a complete program (rejected by the
    validator, not by the reply's parse: a crash, a failed check, a duplicate). None: the
    ``invalid_penalty`` (upstream). Set above it, a cycle whose designs all fail still ranks a
    complete program over a reply that never closed its code."""
    reason_penalties: dict[str, float] | None = None
    """Penalties by rejection reason (``design/reasons`` codes: ``duplicate``,
    ``solution_fails``, ...), taking precedence over ``parsed_invalid_penalty`` and
    ``invalid_penalty`` for the reasons listed (not over ``timeout_penalty``). None: one
    penalty for every reason (upstream). Ranks what a small designer writes further: a program
    that ran every episode but failed a quality check above one that crashed, a repeat of an
    earlier design of the run below both."""
    copy_reward: float | None = None
    """The raw reward of a valid design that is an exact or near copy of a shipped game or
    scaffold example (``copy_of`` in the design records), in place of the variant's signal
    (neither centered nor scaled, like the penalties). None: scored like any other
    (upstream, which has no such check)."""
    per_skill_centering: bool | None = None
    """Center each skill's raw rewards and multiply by ``env_reward_scale``; ``None`` = the
    variant's own choice (every upstream variant centers; ``regret-pure`` does not)."""
    env_reward_scale: float | Literal["auto"] = "auto"
    """``auto``: ``min(agent episodes / designer items * regeneration_interval, max)``."""
    max_env_reward_scale: float = Field(50.0, gt=0.0)
    """The largest ``env_reward_scale`` that ``auto`` gives."""
    regeneration_interval: int = Field(1, ge=1, le=MAX_COUNT)
    """Cycles between designer rounds, for ``env_reward_scale: auto``; unless set, it follows
    ``designer.regenerate_every``."""
    lp_gamma_fast: float = Field(0.98, gt=0.0, le=1.0)
    """Decay of each skill's fast average of mean returns (the learning-potential trackers,
    read by ``learning-potential`` and ``solver-variance`` and logged for every variant)."""
    lp_gamma_slow: float = Field(0.85, gt=0.0, le=1.0)
    """Decay of each skill's slow average (the baseline of ``learning-potential``)."""
    delay_cycles: int = Field(0, ge=0, le=MAX_COUNT)
    """Train each designer item ``delay_cycles`` cycles after it was made, its reward
    recomputed from the plays of its environment over that window; pending items are flushed
    at the last cycle (``spade_train.core.delayed_rewards``)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The variant's own options (``spade_train.core.reward_options``), checked against its
    model; a key of another variant is refused."""

    @model_validator(mode="before")
    @classmethod
    def _flat_options(cls, data: Any) -> Any:
        """Variant options written flat (``reward.plateau_weight``) move into ``options``."""
        if not isinstance(data, dict):
            return data
        from spade_train.core.rewards import DESIGNER_REWARDS

        designer = data.get("designer", cls.model_fields["designer"].default)
        if designer not in DESIGNER_REWARDS:
            return data  # the designer field's own check names the mistake
        mine = DESIGNER_REWARDS.get(designer).options.model_fields
        flat = [k for k in data if k not in cls.model_fields]
        moved = {k: data[k] for k in flat if k in mine}
        for key in flat:
            if key not in mine and (owners := _variants_with(key)):
                raise ValueError(
                    f"{key}: an option of {', '.join(owners)}, not of the {designer} designer "
                    f"reward; remove it (or set reward.designer)"
                )
        if not moved:
            return data
        rest = {k: v for k, v in data.items() if k not in moved}
        return {**rest, "options": {**moved, **dict(data.get("options") or {})}}

    @field_validator("designer")
    @classmethod
    def _designer(cls, v: str) -> str:
        from spade_train.core.rewards import DESIGNER_REWARDS

        if v not in DESIGNER_REWARDS:
            raise ValueError(str(DESIGNER_REWARDS.unknown(v)))
        return v

    @field_validator("reason_penalties")
    @classmethod
    def _reasons(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        import spade_corpus as sc

        from spade_train.core.design import PARSE_REASON_CODES
        from spade_train.reasons import PIPELINE_REASONS

        known = sorted(
            {*sc.VALIDATION_REASONS, *PARSE_REASON_CODES, *PIPELINE_REASONS, "duplicate"}
        )
        for code in v or {}:
            if code not in known:
                near = difflib.get_close_matches(code, known, n=1)
                tip = f" (did you mean {near[0]}?)" if near else ""
                raise ValueError(
                    f"unknown rejection reason {code!r}{tip}; see design/reasons codes"
                )
        return v

    @model_validator(mode="after")
    def _ranges(self) -> RewardConfig:
        if self.lp_gamma_fast <= self.lp_gamma_slow:
            raise ValueError("lp_gamma_fast must be greater than lp_gamma_slow")
        self.variant_options()
        return self

    def variant_options(self) -> RewardOptions:
        """``options`` as the variant's typed model; ValueError naming the key otherwise."""
        from spade_train.core.rewards import DESIGNER_REWARDS

        model = DESIGNER_REWARDS.get(self.designer).options
        try:
            return model.model_validate(self.options)
        except ValidationError as exc:
            err = exc.errors()[0]
            path = ".".join(["options", *(str(p) for p in err["loc"])])
            if err["type"] == "extra_forbidden":
                owners = _variants_with(str(err["loc"][-1]))
                where = f" (an option of {', '.join(owners)})" if owners else ""
                raise ValueError(
                    f"{path}: not an option of the {self.designer} reward{where}"
                ) from None
            msg = str(err["msg"]).removeprefix("Value error, ")
            shown = "" if err["type"] == "value_error" else f" (got {err.get('input')!r})"
            raise ValueError(f"{path}: {msg}{shown}") from None


def _variants_with(key: str) -> list[str]:
    """The registered designer rewards that have an option called ``key``."""
    from spade_train.core.rewards import DESIGNER_REWARDS

    return [
        n for n in DESIGNER_REWARDS.names() if key in DESIGNER_REWARDS.get(n).options.model_fields
    ]


class AdvantageConfig(_Strict):
    """Agent and designer advantages (``spade_train.core.advantages``)."""

    agent: str = "grpo"
    """A registered agent advantage estimator (``spade_train.core.advantages.AGENT_ADVANTAGES``):
    grpo: per-game z-score of the returns (the paper launchers); ema-baseline: return minus an
    exponential average of the game's past mean returns (upstream's default)."""
    game_baseline_decay: float = Field(0.5, gt=0.0, lt=1.0)
    role_normalization: bool = True
    group_std_norm: bool = True
    eps: float = Field(1e-6, gt=0.0)
    compact_filter: bool = False
    """Train nothing of episodes cut off by the turn limit (loss mask zeroed)."""
    mask_malformed_tool_calls: bool = False
    """Train nothing of a tool-use reply that tried a call but could not be parsed."""

    @field_validator("agent")
    @classmethod
    def _agent(cls, v: str) -> str:
        from spade_train.core.advantages import AGENT_ADVANTAGES

        if v not in AGENT_ADVANTAGES:
            raise ValueError(str(AGENT_ADVANTAGES.unknown(v)))
        return v


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


class FixedModelEvalConfig(_Strict):
    """A fixed chat model plays the latest designer round's environments every ``every``
    cycles; its pass rate per game measures their difficulty (``fixed_eval/*`` metrics,
    :mod:`spade_train.core.fixed_eval`; upstream's fixed-model evaluation). Never trained."""

    every: int = Field(0, ge=0)
    """Cycles between evaluations (0: never; upstream's Tinker launchers: 16)."""
    endpoint: str = "https://api.openai.com/v1"
    """An OpenAI-compatible server, up to and including ``/v1``."""
    model: str = "gpt-5-mini"
    api_key_env: str = "OPENAI_API_KEY"
    """The variable holding the key; unset, the evaluation is skipped with a warning (as
    upstream's Tinker trainer) and ``fixed_eval/skipped`` is 1."""
    plays_per_game: int | None = Field(None, ge=1)
    """``None``: ``agent.episodes_per_env`` (upstream: its trajectories per game)."""
    temperature: float = Field(0.7, ge=0.0)
    max_new_tokens: int = Field(16384, ge=1)
    concurrency: int = Field(128, ge=1)
    timeout_s: float = Field(120.0, gt=0.0)


class EvalConfig(_Strict):
    """In-loop evaluation: spade-eval on the policy being trained, through the same backend
    (no second copy of the model), every ``every`` cycles; ``eval/*`` metrics join the row."""

    every: int = Field(0, ge=0)
    """Evaluate after every N-th cycle (and never when 0, the default)."""
    config: str = "quick"
    """A spade-eval config: a shipped name (quick, inloop, paper, …) or a YAML path."""
    suites: list[str] | None = None
    """Only these suites of the config (None: all of them)."""
    limit: int | None = Field(None, ge=1)
    """At most this many items per suite (a quick signal on a small machine)."""
    heldout: str | None = None
    """A game corpus (``starter``, ``example`` or a corpus path) whose ``heldout`` split the
    agent plays after every ``heldout_every`` cycles, with and without each game's hint, the
    same number of episodes as in training; never trained. ``heldout/*`` metrics."""
    heldout_every: int = Field(1, ge=1)
    fixed_model: FixedModelEvalConfig = Field(default_factory=FixedModelEvalConfig)


class CheckpointConfig(_Strict):
    every: int = Field(1, ge=1)
    keep: int = Field(2, ge=1)


class ColdStartConfig(_Strict):
    """A brief supervised warm-up of the policy before the first cycle
    (:mod:`spade_train.cold_start`); the warmed model is cached by everything that shapes it."""

    enabled: bool = False
    epochs: int = Field(2, ge=1)
    lr: float = Field(3e-5, gt=0.0)
    # the warm-up's own seed (initialisation of sample order), not the run's: runs with other
    # seeds share one cached warm-up, as they would share a released checkpoint
    seed: int = Field(0, ge=0)
