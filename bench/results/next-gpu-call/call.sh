#!/usr/bin/env bash
# Prepared in session 51 (rename the folder to its date-gpuNN). On an H200: the standings at
# this HEAD through gpu171's call (the gate records are open since sessions 49-51's kernel
# commits), then ab.sh as a warm follow-up call. On any other card: ab.sh (the MoE router's
# L2 prefetch of the routed experts, then the late add + norm rule on unseen configs).
# Prepare: CUOBJDUMP=.. bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip
#   -9 > .device/head_src.tgz; git rev-parse --short HEAD > .device/commit;
#   bash tools/gpu/prep_git.sh. Carry .device, .whl.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash bench/results/2026-12-06-gpu171/call.sh
fi
exec bash bench/results/next-gpu-call/ab.sh
