#!/usr/bin/env bash
# Prepared in session 52 (rename the folder to its date-gpuNN). On an H200: the standings at
# this HEAD through gpu171's call.sh (the 0.6B server, the 8B c64 / c1, batch 1, the MoE
# flagships, a c64 step, the four gate records — open since sessions 49-52's kernel commits —
# the other levels and the FP8 / NVFP4 ratios; ~575 s). On any other card: nothing to record
# (BENCH.toml's thresholds are the H200's); ask for an H200.
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip
#   -9 > .device/head_src.tgz; git rev-parse --short HEAD > .device/commit;
#   bash tools/gpu/prep_git.sh. Carry .device, .whl (move tests/fixtures aside: 64 MiB).
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 \
  || { echo "not an H200: nothing to record"; exit 0; }
exec bash bench/results/2026-12-06-gpu171/call.sh
