#!/usr/bin/env bash
# One command from a fresh clone to a passing test run: installs Atlas with its test
# extras, builds the kernel PTX sets when nvcc is present, and runs the whole suite.
# GPU tests are marked `gpu` and skip themselves without a CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install.sh test
if command -v nvcc >/dev/null 2>&1; then
  atlas kernels build
else
  ATLAS_SKIP_BUILD=1 atlas kernels build
fi
exec python3 -m pytest -n "${ATLAS_TEST_WORKERS:-auto}" -q "$@"
