#!/usr/bin/env bash
# The next call (session 59): split2.sh, any card (~2.5 min; on an H200 ~7 min with the four
# gate records): the split prefill attention's A/B where it splits (profile_prefill of the
# warm prefix-cache request with the entry on / off / at 1 tile a split, PDL off and on) and
# profile_ttft with it on and off. ring.sh (session 58's FP8 ring-depth A/B; on an H200 the
# FP8 default decision) and standings.sh (gpu171's standings, ~575 s, H200) are still due.
# Prepare: bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip
#   -9 > .device/head_src.tgz; git rev-parse --short HEAD > .device/commit;
#   bash tools/gpu/prep_git.sh. Carry .device, .whl (move tests/fixtures aside: 64 MiB).
exec bash bench/results/next-gpu-call/split2.sh
