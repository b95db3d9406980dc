#!/usr/bin/env bash
# Build the SGLang contract-test environment: SGLang 0.5.23 installed without its dependencies,
# plus only what its HTTP server module imports (pinned in
# packages/spade-train/tests/sglang_env/requirements.txt), in a venv of its own under .cache/.
# It never enters the workspace's uv.lock: SGLang pins torch and transformers versions of its
# own. The contract tests (packages/spade-train/tests/test_sglang_contract.py) run SGLang's real
# FastAPI app in this interpreter with a stand-in engine, and skip, saying so, when it is absent.
# Usage: scripts/sglang-test-env.sh [VENV_DIR]   (default .cache/sglang-env)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.cache/sglang-env}"
reqs=packages/spade-train/tests/sglang_env/requirements.txt
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import sglang.srt.entrypoints.http_server" 2>/dev/null; then
  echo "sglang test env: $venv is ready"
  exit 0
fi
rm -rf "$venv"
uv venv -q "$venv" --python 3.11
# Every pin at once, no resolution: the same versions on every machine (torch shares the
# workspace's uv cache, so this links files rather than downloading them where uv ran before).
uv pip install -q --python "$venv/bin/python" --no-deps -r "$reqs"
uv pip install -q --python "$venv/bin/python" --no-deps sglang==0.5.23
"$venv/bin/python" -W ignore -c "import sglang.srt.entrypoints.http_server" \
  && echo "sglang test env: $venv built"
