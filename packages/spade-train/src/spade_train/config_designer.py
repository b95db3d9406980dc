"""The designer's sections of a run configuration: grounding, memory and the pipeline of
step 2 (reset gate, LLM validator, retries or repairs, self-judge)."""

from __future__ import annotations

from typing import Literal

import spade_envs as se
from pydantic import Field, field_validator, model_validator

from spade_train.config_backend import SamplingConfig
from spade_train.config_base import MAX_COUNT, MAX_TOKENS, Strict


class GroundingConfig(Strict):
    enabled: bool = True
    """Show grounding text (a document or snippets) in the designer prompt."""
    mode: Literal["document", "snippets"] = "snippets"
    """``document``: one corpus document per designer prompt, cut at ``max_words`` words with
    a marker (the released code's SPICE grounding; the paper recipes); ``snippets``: ``k``
    pieces of at most ``max_chars`` characters (for small-context policies)."""
    k: int = Field(2, ge=0, le=MAX_COUNT)
    """Snippets per designer prompt (``snippets`` mode)."""
    corpus_file: str | None = None
    """``None``: ``$CORPUS_FILE`` if set, else the sample shipped with spade-corpus."""
    field: str | None = None
    """The JSON field holding a record's text; ``None``: ``orig_doc``, else ``text`` (SPICE
    records, then generic ones, as upstream)."""
    max_chars: int = Field(400, ge=1, le=MAX_COUNT)
    """The longest snippet, in characters."""
    max_words: int = Field(6000, ge=1, le=MAX_COUNT)
    """``document`` mode's budget (upstream's ``--spade-corpus-max-doc-tokens``: 6000 for
    games, 4000 for tool use)."""


class MemoryConfig(Strict):
    enabled: bool = True
    """Show earlier environments of the run in the designer prompt."""
    capacity: int = Field(256, ge=1, le=MAX_COUNT)
    """The most environments the memory keeps."""
    n_frontier: int = Field(2, ge=0, le=MAX_COUNT)
    """Frontier examples shown (win rate inside ``band``)."""
    n_easy: int = Field(1, ge=0, le=MAX_COUNT)
    """Too-easy examples shown (win rate above ``band``)."""
    n_hard: int = Field(1, ge=0, le=MAX_COUNT)
    """Too-hard examples shown (win rate below ``band``)."""
    band: tuple[float, float] = (0.15, 0.85)
    """``[low, high]``: the unhinted win rates that count as the frontier."""

    @field_validator("band")
    @classmethod
    def _band(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0.0 <= v[0] < v[1] <= 1.0:
            raise ValueError("must be [low, high] with 0 <= low < high <= 1")
        return v


class ResetGateConfig(Strict):
    """Reject an environment whose success criteria (``_message_criteria``, callables over
    ``_state``) raise on the state ``reset`` builds at every tested seed (run in the sandbox)."""

    enabled: bool = False
    """Run the reset gate."""
    seeds: int = Field(3, ge=1, le=MAX_COUNT)
    """Seeds ``0 .. seeds-1`` (upstream: 0, 1, 2)."""
    skip_first_cycle: bool = True
    """Upstream leaves the gate off on the first rollout, when nothing could replace a reject."""


class LLMValidatorConfig(Strict):
    """An LLM reads each environment that passed the sandbox and answers ``\\boxed{yes|no}``.
    Infrastructure errors, empty replies and replies without a verdict accept (fail open) and
    are counted in the cycle's metrics."""

    enabled: bool = False
    """Ask the LLM validator about every environment the sandbox passed."""
    judge: Literal["policy", "endpoint"] = "policy"
    """``policy``: the policy itself through the backend (inference only); ``endpoint``: an
    OpenAI-compatible chat-completions server."""
    endpoint: str | None = None
    """The server's base URL: its root or its ``/v1`` (:class:`spade_envs.Endpoint`'s one
    convention)."""
    model: str | None = None
    """``judge: endpoint``: the model the server is asked for (unset: ``default``)."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the endpoint's key (sent as a Bearer token when set)."""
    prompt: Literal["auto", "cognitive", "tool-use", "reward-hack"] = "auto"
    """``auto``: the lenient playability check for games, the solvability audit for tool use;
    ``reward-hack``: the source, the hint and the sandbox's probe evidence, asking whether
    winning requires doing the stated task (:mod:`spade_train.core.hack_review`)."""
    temperature: float = Field(0.3, ge=0.0)
    """Sampling temperature of the validator's reply."""
    max_new_tokens: int = Field(16384, ge=1, le=MAX_TOKENS)
    """The most tokens of the validator's reply."""
    timeout_s: float = Field(120.0, gt=0.0)
    """Per call to the endpoint (upstream: 2 minutes)."""


class SelfJudgeConfig(Strict):
    """After play, the policy judges each new environment from its code and one episode; a
    ``\\boxed{no}`` adds ``penalty`` to the designer's reward (fails open like the validator)."""

    enabled: bool = False
    """Run the self-judge after play."""
    penalty: float = -0.5
    """Added to the designer reward of an environment judged ``no``."""
    temperature: float = Field(0.3, ge=0.0)
    """Sampling temperature of the judge's reply."""
    max_new_tokens: int = Field(2048, ge=1, le=MAX_TOKENS)
    """The most tokens of the judge's reply."""
    max_turns_shown: int = Field(5, ge=1, le=MAX_COUNT)
    """Turns of the played episode shown to the judge."""


class PipelineConfig(Strict):
    """The designer pipeline after the sandbox validation (``steps/validate.py``): reset gate,
    LLM validator, retries or repair turns, time budgets, self-judge."""

    reset_gate: ResetGateConfig = Field(default_factory=ResetGateConfig)
    """Reject environments whose success criteria raise on the state ``reset`` builds."""
    validator: LLMValidatorConfig = Field(default_factory=LLMValidatorConfig)
    """An LLM reads each environment the sandbox passed."""
    self_judge: SelfJudgeConfig = Field(default_factory=SelfJudgeConfig)
    """The policy judges each new environment after play."""
    max_attempts: int = Field(1, ge=1, le=MAX_COUNT)
    """Generations per designer slot: a failed attempt is sampled again from the same prompt
    (upstream: 8). Only the slot's last attempt is kept and trained."""
    repair_turns: int = Field(0, ge=0, le=MAX_COUNT)
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


class DesignerConfig(Strict):
    prompts_per_cycle: int = Field(2, ge=1, le=MAX_COUNT)
    """Designer prompts per cycle, each asking for an environment of the next skill in turn."""
    group_size: int = Field(2, ge=1, le=MAX_COUNT)
    """Completions per designer prompt (the designer's GRPO group)."""
    skills: list[str] = Field(default_factory=lambda: list(se.SKILLS), min_length=1)
    """The skills the designer writes for, in turn (``games``: the six contract skills; ``tool-
    use``: domains)."""
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    """How the designer's replies are sampled."""
    hint_source: Literal["reply", "policy", "endpoint"] = "policy"
    """Where the privileged hint comes from: a separate pass over the code by the policy (the
    released code's way: untrained, low temperature, retried), the designer's own reply (its
    tokens then carry the designer's advantage), or an OpenAI-compatible endpoint."""
    hint_endpoint: str | None = None
    """``hint_source: endpoint``: the OpenAI-compatible server's base URL, its root or its
    ``/v1`` (:class:`spade_envs.Endpoint`'s one convention)."""
    hint_model: str | None = None
    """``hint_source: endpoint``: the model the server is asked for (unset: ``default``)."""
    hint_api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the hint endpoint's key (unset: no key sent)."""
    hint_temperature: float = Field(0.3, ge=0.0)
    """Sampling temperature of the hint pass."""
    hint_retries: int = Field(3, ge=1, le=MAX_COUNT)
    """Tries per hint (a reply with no hint, or an endpoint call that failed after the SDK's own
    retries, is asked again)."""
    hint_timeout_s: float = Field(120.0, gt=0.0)
    """Per endpoint call; a design whose hint never came is rejected as ``missing_hint``."""
    grounding: GroundingConfig = Field(default_factory=GroundingConfig)
    """Snippets of real text shown in the designer prompt (``mode: spade``)."""
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    """Earlier environments of the run shown in the designer prompt (frontier, too easy, too hard).
    """
    max_source_chars: int = Field(12000, ge=100, le=MAX_COUNT)
    """The longest environment source accepted from a reply (longer ones are ``source_too_long``).
    """
    compact: bool = True
    """Short designer prompts (for small-context policies); ``False`` adds worked guidance."""
    scaffold: bool = False
    """For policies too small to follow the answer format unaided (the quickstart's 135M
    model): show a short complete example game, start the reply inside a ```python block and
    stop at its closing fence; the hint then comes from the hint pass (``hint_source`` must be
    ``policy`` or ``endpoint``). Games setting only."""
    skeleton: Literal["off", "holes"] = "off"
    """With ``scaffold``: ``holes`` prefills the reply with a code skeleton (imports, the class
    line with its name and skill, ``__init__``, the start of ``reset()``), the policy writes
    only the hole (the lines that draw one puzzle and its answer from ``rng``), and the
    template's fixed ``reset()`` return, ``step()`` and ``solution()`` close the program
    (:mod:`spade_train.core.skeleton`). The skeleton's tokens are prompt (never trained);
    ``off``: the policy writes the whole program after the opening fence."""
    hint_max_new_tokens: int = Field(128, ge=1, le=MAX_TOKENS)
    """Token budget of each reply of the separate hint pass (``hint_source: policy``)."""
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    """Step 2 after the sandbox validation: gates, retries or repairs, budgets, self-judge."""
    train: bool = True
    """``False``: the designer's completions are never trained (upstream's
    ``--spade-no-train-on-env-trajectories``); the environments are still designed and played."""
    regenerate_every: int = Field(1, ge=1, le=MAX_COUNT)
    """Cycles between designer rounds (upstream's ``--spade-game-regeneration-interval``: 4
    for games). A round designs at cycles 1, 1+N, 1+2N, ...; the cycles in between play the
    environments that round admitted (pool draws fill any shortfall), and the skills rotate
    per round."""
