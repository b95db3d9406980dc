#!/usr/bin/env bash
# The device check of the GPU path, on a CUDA machine, from the repository root (at most about
# 9.5 minutes: every step below has its own timeout):
#   bash scripts/gpu-check.sh [OUT_DIR]          (default: $OUT, else gpu-check-out)
# It needs no network. The packages the machine's Python lacks come from wheels in .whl/
# (installed into a fresh target directory, nothing else touched), a bubblewrap .deb there
# is unpacked beside them, and this tree's five packages are used from their sources. On the
# H200 image of 2026-12-04 (Python 3.12, torch 2.11, transformers 5.17) that was:
# megatron-core, pydantic, pydantic-core, annotated-types, typing-inspection, gymnasium,
# farama-notifications, datasketch, dill, zstandard, truststore (pip download --no-deps
# --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 -d .whl NAME==VER).
# It writes to OUT_DIR: gpu-check.json and its log (scripts/gpu_check.py: Megatron against the
# local backend with KL and TIS, the weight export both ways, update throughput, two loop
# cycles, SGLang where installed), the logs of the `-m gpu` tests and of the local backend's
# tests on CUDA, and the dated page DATE-gpu-check.md, also copied to docs/results/.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu-check-out}}
mkdir -p "$out" && out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
site=$(mktemp -d /tmp/gpu-site.XXXX)

if compgen -G ".whl/*.whl" >/dev/null; then
  $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
    .whl/*.whl || { echo "error: installing .whl/ failed" >&2; exit 1; }
fi
for deb in .whl/*.deb; do
  [ -e "$deb" ] && dpkg -x "$deb" "$site/root" && export PATH="$site/root/usr/bin:$PATH"
done
src=""
for p in spade-envs spade-sandbox spade-corpus spade-train spade-eval; do
  src="$src$PWD/packages/$p/src:"
done
export PYTHONPATH="$src$site${PYTHONPATH:+:$PYTHONPATH}"
export SPADE_CACHE="${SPADE_CACHE:-$site/cache}" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/nvidia-smi.txt"
rc=0
parts=${GPU_CHECK_PARTS:-megatron_vs_local,weight_export,throughput,loop,sglang}
timeout 320 $py scripts/gpu_check.py --parts "$parts" --out "$out/gpu-check.json" \
  >"$out/gpu-check.log" 2>&1 || rc=1
grep '^== ' "$out/gpu-check.log"
tail -n 30 "$out/gpu-check.log"
(
  cd packages/spade-train
  # -m gpu: the tests that need a GPU; then the local backend's own tests, which pick CUDA (in
  # bfloat16) when one is visible (device "auto").
  timeout 80 $py -m pytest -p no:cacheprovider -q -rs -m gpu tests/test_megatron.py \
    tests/test_sglang.py 2>&1 | tee "$out/pytest-gpu.log" | tail -n 15
  [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
  timeout 110 $py -m pytest -p no:cacheprovider -q -rs --tb=line tests/test_local_backend.py \
    tests/test_kv_cache.py tests/test_top_p.py tests/test_train_parts.py tests/test_loss.py \
    2>&1 | tee "$out/pytest-cuda.log" | tail -n 15
  [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
) || rc=1
page="$out/$(date +%F)-gpu-check.md"
timeout 30 $py scripts/gpu_check.py --from "$out/gpu-check.json" --page "$page" \
  --pytest-log "$out/pytest-gpu.log" --pytest-log "$out/pytest-cuda.log" || rc=1
mkdir -p docs/results && cp "$page" docs/results/ && echo "page: $page (copied to docs/results/)"
exit $rc
