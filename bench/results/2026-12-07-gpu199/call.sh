#!/usr/bin/env bash
# Prepared in session 57 (rename the folder to its date-gpuNN). Any card: fp8.sh, the
# persistent FP8 tensor-core decode GEMM's checks, trace, kernel rows and Qwen3-8B FP8 batch 1
# with and without it (~200 s); on an H200 then the four gate records (open since session
# 49). With a full budget on an H200, gpu171's call.sh (the standings; ~575 s) is the other
# call to make.
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip
#   -9 > .device/head_src.tgz; git rev-parse --short HEAD > .device/commit;
#   bash tools/gpu/prep_git.sh. Carry .device, .whl (move tests/fixtures aside: 64 MiB).
exec bash bench/results/next-gpu-call/fp8.sh
