#!/usr/bin/env bash
# Launch: uv run spade train --recipe fixed-rlve-30b (extra key=value overrides are passed through).
# Env: MODEL_ROOT, WORKSPACE_DIR, WANDB_PROJECT, WANDB_ENTITY, WANDB_MODE; DRY_RUN=1 adds --dry-run;
# RLVE_ENV_SET=official16 (default) or all picks RLVE's environment set (rlve.envs).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=/dev/null
source "$here/_common.sh"
extra=()
if [[ -n "${RLVE_ENV_SET:-}" ]]; then extra+=("rlve.envs=${RLVE_ENV_SET}"); fi
spade_launch fixed-rlve-30b "${extra[@]}" "$@"
