#!/usr/bin/env bash
# Session 52's A/B (any card): where the batch-1 cluster router lets the MoE gate/up launch.
# Today (0) with its wait: the gate/up's shared-expert blocks then request their weights
# (Qwen3.5-35B-A3B: 4.2 MB) while the router's own residual, delta and logit traffic is in
# flight; gpu181 showed that traffic queueing behind any flood in that window (the router 8.6
# -> 16.7 us under a 24 MB prefetch). Variants (-D ATLAS_MOE_ROUTER_LATE, moe_router.cu):
# rl1 once the residual and delta rows are in shared memory (as the norm's late entries,
# gpu179: 35B -1.4%), rl2 once the logits are stored. Expected: the 35B's router 1-2 us
# shorter, the gate/up level (its routed experts wait on the routing anyway); the 30B (no
# shared expert: nothing requested before the gate/up's wait) level. batch 1 x 512, GPU
# replay / async wall ms a step; off / rl1 / rl2 / rl2 / rl1 / off.
# Prepare: ATLAS_PREP_VARIANT="rl1:ATLAS_MOE_ROUTER_LATE=1 rl2:ATLAS_MOE_ROUTER_LATE=2"
#   CUOBJDUMP=.. bash tools/gpu/prep_device.sh; git archive HEAD py tools kernels | gzip -9 >
#   .device/head_src.tgz; git rev-parse --short HEAD > .device/commit. Carry .device, .whl.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
V1="ATLAS_KERNELS_DIR=$PWD/.device/kernels_rl1"; V2="ATLAS_KERNELS_DIR=$PWD/.device/kernels_rl2"
TAILN=2 t 120 chk env $V2 python3 tools/gpu/check_kernels.py -m moe_router -k cluster
crit() {  # the router's and the gate/up's critical-path rows of run $1
  sed -n '/^critical path/,/^between/p' $L/$1.log | grep -E "^moe_(add_rms|gate_up)" \
    | cut -c1-100 | sed "s/^/$1 /"
}
ab() {  # ab NAME DIR
  local n=$1 d=$2
  b1 ${n}_off X=1 $d; b1 ${n}_1 "$V1" $d; b1 ${n}_2 "$V2" $d; b1 ${n}_2b "$V2" $d
  b1 ${n}_1b "$V1" $d; b1 ${n}_offb X=1 $d
  echo "== $n off $(aw ${n}_off)| rl1 $(aw ${n}_1)| rl2 $(aw ${n}_2)| rl2 $(aw ${n}_2b)|" \
    "rl1 $(aw ${n}_1b)| off $(aw ${n}_offb)"
  for v in off 1 2; do crit ${n}_$v; done
}
PL=60 ab q35 $G/qwen3_5-35b-a3b
PL=60 ab q30 $G/qwen3-30b-a3b
echo "ALL DONE"
