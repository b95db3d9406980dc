#!/usr/bin/env bash
# Launch: uv run spade train --recipe ablation-two-skill (extra key=value overrides are passed through).
# Upstream: cmd/ablations/train_two_skill_30b.sh
# Env: MODEL_ROOT, WORKSPACE_DIR, CORPUS_FILE, CORPUS_DIR, WANDB_PROJECT, WANDB_ENTITY, WANDB_MODE; DRY_RUN=1 adds --dry-run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=/dev/null
source "$here/_common.sh"
spade_launch ablation-two-skill "$@"
