"""The reason codes that the designer pipeline's stages give a rejected design, beside those
of the reply's parse (``spade_train.core.design.PARSE_REASON_CODES``) and of the sandbox
validator (``spade_corpus.VALIDATION_REASONS``): the recipe's ``reward.reason_penalties``
keys are checked against all three."""

from __future__ import annotations

PIPELINE_REASONS: dict[str, str] = {
    "reset_gate": "a success criterion raises on the state reset builds, at every tested seed",
    "llm_validator_rejected": "the LLM validator answered \\boxed{no}",
    "generation_timeout": "the attempt's generation round ran past generation_budget_s",
}
"""Reason codes the pipeline stages add to those of parsing and of the sandbox validator."""
