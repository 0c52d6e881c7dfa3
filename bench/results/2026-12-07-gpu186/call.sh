#!/usr/bin/env bash
# Session 53's third A/B (any card): the Gated-DeltaNet decode step's trigger moved the other
# way. gpu184: triggering out_proj once the step's row inputs have landed (later than its wait)
# cost Qwen3.5-35B-A3B +1.7% (the step 7.65 -> 9.36 us on the critical path). `ge` (-D
# ATLAS_GDN_EARLY, gdn_decode.cu kEarlyTrigger): out_proj may launch before the step's wait
# (pdl_enter_early, as the early norm entries), its first weight tiles requested under the
# input projection's tail. Expected: out_proj's 2.6 us on the critical path shorter by up to
# ~1 us a linear layer, the GDN step level or slightly longer (in_proj's stream shared).
# batch 1 x 512, GPU replay ms a step; off / ge / ge / off.
# Prepare: ATLAS_PREP_VARIANT="ge:ATLAS_GDN_EARLY=1" bash tools/gpu/prep_device.sh; git archive
#   HEAD py tools kernels | gzip -9 > .device/head_src.tgz; git rev-parse --short HEAD >
#   .device/commit. Carry .device, .whl.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
GE="ATLAS_KERNELS_DIR=$PWD/.device/kernels_ge"
TAILN=2 t 90 chk env $GE python3 tools/gpu/check_kernels.py -m gdn_decode
crit() {  # the GDN step's and out_proj's critical-path rows of run $1
  sed -n '/^critical path/,/^between/p' $L/$1.log \
    | grep -E "^gated_delta|^gemv[a-z0-9_]* +gated_delta" | cut -c1-110 | sed "s/^/$1 /"
}
n=q35; d=$G/qwen3_5-35b-a3b
PL=30 b1 ${n}_off X=1 $d; PL=30 b1 ${n}_ge "$GE" $d; PL=30 b1 ${n}_geb "$GE" $d
PL=30 b1 ${n}_offb X=1 $d
echo "== $n off $(aw ${n}_off)| ge $(aw ${n}_ge)| ge $(aw ${n}_geb)| off $(aw ${n}_offb)"
for v in off ge; do crit ${n}_$v; done
echo "ALL DONE"
