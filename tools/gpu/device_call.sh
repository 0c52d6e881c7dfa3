#!/usr/bin/env bash
# One device-tool call: set up the carried environment, run the named run_suite.sh stages
# under a time limit, and always pack what they produced into $OUT/suite.tgz, even when the
# limit cut the run short (the device tool returns files only from $OUT).
#
#   ATLAS_CALL_LIMIT=560 bash tools/gpu/device_call.sh check_kernels qwen3_8b ...
#
# Carried (gitignored) inputs: .whl/ (wheels missing on the GPU image), .device/kernels/
# (PTX sets built on the CPU machine), .device/sass/ (their cubins, tools/build_sass.py),
# .device/qwen3-tok/ (tokenizer), .device/commit.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
export PYTHONUNBUFFERED=1
export ATLAS_COMMIT="${ATLAS_COMMIT:-$(cat .device/commit 2>/dev/null || echo unknown)}"
if [ -d .device/kernels ]; then
  export ATLAS_KERNELS_DIR="$REPO/.device/kernels" ATLAS_SUITE_REUSE_PTX=1
fi
if [ -d .device/sass ]; then  # cubins built here by tools/build_sass.py: no cold JIT
  export ATLAS_SASS_DIR="$REPO/.device/sass"
fi
timeout --signal=TERM --kill-after=10 "${ATLAS_CALL_LIMIT:-560}" bash tools/gpu/run_suite.sh "$@"
rc=$?
latest="$(ls -dt /tmp/atlas_gpu_suite/*/ 2>/dev/null | head -n 1)"
if [ -n "${OUT:-}" ] && [ -n "$latest" ] && [ ! -f "$OUT/suite.tgz" ]; then
  tar czf "$OUT/suite.tgz" -C "$latest" logs results
fi
echo "device_call: rc=$rc (124 = time limit), results from $latest"
exit $rc
