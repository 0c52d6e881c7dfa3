#!/usr/bin/env bash
# Session 53's A/B (any card): the step's head. Today a decode step's graph starts with the
# staging kernel (no PDL trigger), embedding_bf16 and the first RMSNorm (plain rmsnorm_bf16,
# whose trigger is on entry even where the add + norms trigger late): gpu182 (H200) on the
# critical path 3.65 + 1.78 + 5.26 us on Qwen3.5-35B-A3B (its 48 MB in_proj's weight requests
# under that norm), 4.98 + 2.35 + 1.74 on Llama-3.2-1B. `on` (ATLAS_EMBED_NORM=1, the new
# default): embed_rmsnorm_* does the lookup in the norm's launch, late where the add + norms
# are; `st` adds -D ATLAS_STAGE_TRIGGER (step_io.cu: the staging kernel lets the first kernel
# launch under it). Expected: on -2 us a step (0.6B, Llama-1B, 8B), -4 us (35B: the late
# trigger too); st a further -0.5..1 us. batch 1 x 512, GPU replay / async wall ms a step;
# off / on / st / st / on / off. The tree also has 780a4079 (sample_f32 counts and publishes:
# two launches fewer at the step's end, gpu182's 0.88 + 1.09 us on the 35B), in every arm:
# its rows are the tail's critical-path rows against gpu182's.
# Prepare: ATLAS_PREP_VARIANT="st:ATLAS_STAGE_TRIGGER=1" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz; git rev-parse --short
#   HEAD > .device/commit. Carry .device, .whl.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
ST="ATLAS_KERNELS_DIR=$PWD/.device/kernels_st"
TAILN=2 t 150 chk python3 tools/gpu/check_kernels.py -m rmsnorm -m embedding -m step_io -m sampler
TAILN=2 t 60 chk_st env $ST python3 tools/gpu/check_kernels.py -m step_io -k stage
crit() {  # the head's critical-path rows of run $1
  sed -n '/^critical path/,/^between/p' $L/$1.log \
    | grep -E "^(stage_step|embedding|embed_rms|rmsnorm|sample|logprobs|apply_pen)|^gemv[a-z0-9_]* +(embed_rms|rmsnorm)" \
    | cut -c1-110 | sed "s/^/$1 /"
}
ab() {  # ab NAME DIR
  local n=$1 d=$2
  b1 ${n}_off ATLAS_EMBED_NORM=0 $d; b1 ${n}_on ATLAS_EMBED_NORM=1 $d
  b1 ${n}_st "ATLAS_EMBED_NORM=1 $ST" $d; b1 ${n}_stb "ATLAS_EMBED_NORM=1 $ST" $d
  b1 ${n}_onb ATLAS_EMBED_NORM=1 $d; b1 ${n}_offb ATLAS_EMBED_NORM=0 $d
  echo "== $n off $(aw ${n}_off)| on $(aw ${n}_on)| st $(aw ${n}_st)| st $(aw ${n}_stb)|" \
    "on $(aw ${n}_onb)| off $(aw ${n}_offb)"
  for v in off on st; do crit ${n}_$v; done
}
PL=30 ab q35 $G/qwen3_5-35b-a3b
PL=30 ab l1b $G/llama-3.2-1b
PL=30 ab q06 $G/qwen3-0.6b
PL=30 ab q8 $G/qwen3-8b
echo "ALL DONE"
