#!/usr/bin/env bash
# Prepared in sessions 54-55 (rename the folder to its date-gpuNN; with under ~500 s of device
# time left run short.sh instead). On an H200: the standings at
# this HEAD through gpu171's call.sh (the 0.6B server, the 8B c64 / c1, batch 1, the MoE
# flagships, a c64 step, the four gate records — open since session 49 — the other levels
# and the FP8 / NVFP4 ratios; ~575 s). On any other card: ab.sh (the batch-1 attention
# trigger on the configs gpu192 did not reach).
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip
#   -9 > .device/head_src.tgz; git rev-parse --short HEAD > .device/commit;
#   bash tools/gpu/prep_git.sh. Carry .device, .whl (move tests/fixtures aside: 64 MiB).
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 \
  || exec bash bench/results/next-gpu-call/ab.sh
exec bash bench/results/2026-12-06-gpu171/call.sh
