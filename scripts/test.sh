#!/usr/bin/env bash
# Run every package's tests, each in its own isolated environment that holds only that
# package, its declared dependencies (all extras) and the dev group, so a package that
# imports something it does not declare fails here.
# Usage: scripts/test.sh [PACKAGE ...] [-- PYTEST-ARGS...]   (default: all packages)
set -uo pipefail
cd "$(dirname "$0")/.."

packages=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do packages+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#packages[@]} -eq 0 ] && packages=(spade-sandbox spade-envs spade-corpus spade-train spade-eval)

frozen=()
[ -n "${CI:-}" ] && frozen=(--frozen)

# Each isolated environment is new: let Python cache the modules it imports as it goes (on the
# first import, not all 20,000 files up front; where PYTHONDONTWRITEBYTECODE is set it would
# recompile torch in every test process instead).
unset PYTHONDONTWRITEBYTECODE

failed=()
# Every package must build on its own, without workspace sources.
dist=$(mktemp -d)
if ! uv build --all-packages --no-sources -q -o "$dist"; then
  failed+=("build")
fi
rm -rf "$dist"

# Static checks: lint and format over the whole tree, types over each package's src (in the
# package's own isolated environment, so a missing declared dependency shows up here too).
echo "=== static checks (ruff, ruff format, mypy) ==="
if ! uv run "${frozen[@]}" --isolated --only-group dev ruff check packages scripts; then
  failed+=("ruff")
fi
if ! uv run "${frozen[@]}" --isolated --only-group dev ruff format --check -q packages scripts; then
  echo "ruff format: the files above need formatting (uv run ruff format packages scripts)"
  failed+=("format")
fi
for pkg in "${packages[@]}"; do
  config=pyproject.toml  # a package with its own [tool.mypy] (spade-train: pydantic) uses it
  grep -q '^\[tool.mypy\]' "packages/$pkg/pyproject.toml" && config="packages/$pkg/pyproject.toml"
  if ! uv run "${frozen[@]}" --isolated --package "$pkg" --all-extras --group dev --with mypy \
      mypy --config-file "$config" "packages/$pkg/src"; then
    failed+=("mypy $pkg")
  fi
done

# Ray (>= 2.43) starts its workers with the driver's own `uv run` command when the driver runs
# under uv; under `--isolated` each worker then builds and byte-compiles a new environment
# (the Ray tests took 484 s that way, 89 s with the workers on the test environment's python).
export RAY_ENABLE_UV_RUN_RUNTIME_ENV=0

for pkg in "${packages[@]}"; do
  echo "=== $pkg ==="
  uv run "${frozen[@]}" --isolated --package "$pkg" --all-extras --group dev \
    pytest "packages/$pkg/tests" "$@"
  rc=$?
  # pytest exit 5 means no test ran: that is a failure here, never a pass.
  if [ $rc -ne 0 ]; then
    [ $rc -eq 5 ] && echo "$pkg: no tests were collected (pytest exit 5)"
    failed+=("$pkg")
  fi
  # The sandbox runs 7 of its 8 layers on a machine without bubblewrap: where bubblewrap is
  # installed, its attack and environment tests run once more with it hidden, so both
  # configurations type every attack the same (the red-team suite covers both by itself).
  if [ "$pkg" = spade-sandbox ] && command -v bwrap >/dev/null 2>&1; then
    echo "=== spade-sandbox without bubblewrap (SPADE_SANDBOX_BWRAP=off) ==="
    if ! SPADE_SANDBOX_BWRAP=off uv run "${frozen[@]}" --isolated --package "$pkg" --all-extras \
        --group dev pytest packages/spade-sandbox/tests/test_attacks.py \
        packages/spade-sandbox/tests/test_env.py "$@"; then
      failed+=("spade-sandbox without bubblewrap")
    fi
  fi
done

# The documentation site: a broken link, a missing page or an undescribed API fails here. It is
# built in its own environment (spade-train, whose config the recipe-key page is rendered
# from, plus the docs group), so mkdocs never enters a package's test environment.
echo "=== docs (mkdocs build --strict) ==="
docs_out=$(mktemp -d)
if ! uv run "${frozen[@]}" --isolated --package spade-train --group docs \
    env NO_MKDOCS_2_WARNING=1 mkdocs build --strict --site-dir "$docs_out" -q; then
  failed+=("docs")
fi
rm -rf "$docs_out"

if [ ${#failed[@]} -ne 0 ]; then
  echo "FAILED packages: ${failed[*]}"
  exit 1
fi
echo "all packages passed: ${packages[*]}"
