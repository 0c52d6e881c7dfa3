#!/usr/bin/env bash
# Prepared in session 57 (rename the folder to its date-gpuNN). Any card: fp8.sh, the FP8
# tensor-core decode GEMM's checks, trace, kernel rows and Qwen3-8B FP8 batch 1 with and
# without it (~250 s). On an H200 with the budget, standings.sh (gpu171's standings at this
# HEAD, ~575 s, the gate records included) is the other call.
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip
#   -9 > .device/head_src.tgz; git rev-parse --short HEAD > .device/commit;
#   bash tools/gpu/prep_git.sh. Carry .device, .whl (move tests/fixtures aside: 64 MiB).
exec bash bench/results/next-gpu-call/fp8.sh
