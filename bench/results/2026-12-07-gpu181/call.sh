#!/usr/bin/env bash
# Prepared in session 51 (rename the folder to its date-gpuNN). Any card: ab.sh (the MoE
# router's two L2 prefetches, then the late add + norm rule on unseen configs). On an H200,
# as a warm follow-up call: the standings at this HEAD through gpu171's call.sh (the gate
# records are open since sessions 49-51's kernel commits).
# Prepare: CUOBJDUMP=.. bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip
#   -9 > .device/head_src.tgz; git rev-parse --short HEAD > .device/commit;
#   bash tools/gpu/prep_git.sh. Carry .device, .whl.
exec bash bench/results/next-gpu-call/ab.sh
