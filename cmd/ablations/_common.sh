# Shared by the launchers in this folder: turns the environment into recipe overrides.
spade_launch() {
  local recipe="$1"
  shift
  local args=(train --recipe "$recipe")
  if [[ -n "${MODEL_ROOT:-}" ]]; then args+=("model_root=${MODEL_ROOT}"); fi
  if [[ -n "${WORKSPACE_DIR:-}" ]]; then args+=("workspace_dir=${WORKSPACE_DIR}"); fi
  if [[ -n "${CORPUS_FILE:-}" ]]; then args+=("corpus_file=${CORPUS_FILE}"); fi
  if [[ -n "${WANDB_PROJECT:-}" ]]; then args+=("wandb.project=${WANDB_PROJECT}"); fi
  if [[ -n "${WANDB_ENTITY:-}" ]]; then args+=("wandb.entity=${WANDB_ENTITY}"); fi
  if [[ -n "${WANDB_MODE:-}" ]]; then args+=("wandb.mode=${WANDB_MODE}"); fi
  if [[ "${DRY_RUN:-0}" == "1" ]]; then args+=(--dry-run); fi
  exec uv run spade "${args[@]}" "$@"
}
