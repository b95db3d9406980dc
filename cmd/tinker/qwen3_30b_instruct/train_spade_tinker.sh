#!/usr/bin/env bash
# Launch: uv run spade train --recipe tinker-qwen3-30b-instruct (extra key=value overrides are passed through).
# Upstream: cmd/tinker/qwen3_30b_instruct/train_spade_tinker.sh
# Env: MODEL_ROOT, WORKSPACE_DIR, CORPUS_FILE, WANDB_PROJECT, WANDB_ENTITY, WANDB_MODE; DRY_RUN=1 adds --dry-run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=/dev/null
source "$here/../_common.sh"
spade_launch tinker-qwen3-30b-instruct "$@"
