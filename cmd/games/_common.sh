# Shared by the launchers in this folder: turns the environment into recipe overrides.
# MODEL_ROOT is read by the recipes themselves (${MODEL_ROOT} in backend.model).
spade_launch() {
  local recipe="$1"
  shift
  local args=(train --recipe "$recipe")
  if [[ -n "${WORKSPACE_DIR:-}" ]]; then args+=("run_dir=${WORKSPACE_DIR}/${recipe}"); fi
  if [[ -n "${CORPUS_FILE:-}" ]]; then args+=("designer.grounding.corpus_file=${CORPUS_FILE}"); fi
  # wandb reads WANDB_PROJECT / WANDB_ENTITY / WANDB_MODE itself; a project turns logging on.
  if [[ -n "${WANDB_PROJECT:-}" ]]; then args+=("logging.wandb=true"); fi
  args+=("$@")
  # flags go last: argparse takes the key=value overrides as one positional run
  if [[ "${DRY_RUN:-0}" == "1" ]]; then args+=(--dry-run); fi
  exec uv run spade "${args[@]}"
}
