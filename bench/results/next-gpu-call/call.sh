#!/usr/bin/env bash
# Prepared in session 58 (rename the folder to its date-gpuNN); gpu203 ran it on an H100: on an
# H200 it is the FP8 kernel's default decision (b1 and b8 faster than the GEMV). ring.sh, the FP8
# tensor-core decode GEMM with its ring sized by the launch (checks at the default depth and at
# 3 slots, then Qwen3-8B FP8 batch 1 and 8 on the GEMV against the kernel at 3..12 slots, the
# warm-prefix prefill; 309 s on gpu203).
# standings.sh (gpu171's standings, ~575 s, the gate records included) is the H200 call.
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip
#   -9 > .device/head_src.tgz; git rev-parse --short HEAD > .device/commit;
#   bash tools/gpu/prep_git.sh. Carry .device, .whl (move tests/fixtures aside: 64 MiB).
exec bash bench/results/next-gpu-call/ring.sh
