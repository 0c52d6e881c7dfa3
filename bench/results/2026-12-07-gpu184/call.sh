#!/usr/bin/env bash
# Session 53's second A/B (any card): where the late decode attention entries let o_proj launch.
# gpu183's graph-mode trace of Qwen3-8B's late entry (decode_attn_long_rope_early_late_exact,
# o_proj launched at its last tile): block merged 4.42 us, merged 8.56 in a graph against 4.68
# alone: the partial stores, release fence and split ticket take ~4 us under o_proj's weight
# stream. `lm` (-D ATLAS_ATTN_LATE_MERGE, attention_long.cu kLateMerge): the trigger once the
# block holds its ticket (the gated D-256 entry: once every split has arrived), so the flood
# overlaps only the last block's merge. Expected: the attention ~2-3 us shorter a layer on
# the critical path, o_proj ~1 us longer (less lead): Qwen3-8B / Qwen3-30B-A3B -1..2 us a
# layer, the 35B's 10 gated layers likewise. `gl` (-D ATLAS_GDN_LATE, gdn_decode.cu
# kLateTrigger): the 35B's Gated-DeltaNet step lets its out_proj launch once its row inputs
# have landed (the add + norms' late rule, which took the 35B -1.4%): expected the GDN step
# 1-2 us shorter on the critical path (6.83 us at gpu182), out_proj ~1 us longer.
# batch 1 x 512, GPU replay ms a step; off / lm / lm / off (the 35B: off / lm / gl / gl / lm /
# off).
# Prepare: ATLAS_PREP_VARIANT="lm:ATLAS_ATTN_LATE_MERGE=1 gl:ATLAS_GDN_LATE=1"
#   bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz; git rev-parse --short
#   HEAD > .device/commit. Carry .device, .whl.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
LM="ATLAS_KERNELS_DIR=$PWD/.device/kernels_lm"; GL="ATLAS_KERNELS_DIR=$PWD/.device/kernels_gl"
TAILN=2 t 150 chk env $LM python3 tools/gpu/check_kernels.py -m attention_long
TAILN=2 t 90 chk_gl env $GL python3 tools/gpu/check_kernels.py -m gdn_decode
crit() {  # the attention's and o_proj's critical-path rows of run $1
  sed -n '/^critical path/,/^between/p' $L/$1.log \
    | grep -E "^decode_attn|^gated_delta|^gemv[a-z0-9_]* +(decode_attn|gated_delta)" \
    | cut -c1-110 | sed "s/^/$1 /"
}
ab() {  # ab NAME DIR
  local n=$1 d=$2
  b1 ${n}_off X=1 $d; b1 ${n}_lm "$LM" $d; b1 ${n}_lmb "$LM" $d; b1 ${n}_offb X=1 $d
  echo "== $n off $(aw ${n}_off)| lm $(aw ${n}_lm)| lm $(aw ${n}_lmb)| off $(aw ${n}_offb)"
  for v in off lm; do crit ${n}_$v; done
}
ab35() {  # the 35B: both variants
  local n=q35 d=$G/qwen3_5-35b-a3b
  b1 ${n}_off X=1 $d; b1 ${n}_lm "$LM" $d; b1 ${n}_gl "$GL" $d; b1 ${n}_glb "$GL" $d
  b1 ${n}_lmb "$LM" $d; b1 ${n}_offb X=1 $d
  echo "== $n off $(aw ${n}_off)| lm $(aw ${n}_lm)| gl $(aw ${n}_gl)| gl $(aw ${n}_glb)|" \
    "lm $(aw ${n}_lmb)| off $(aw ${n}_offb)"
  for v in off lm gl; do crit ${n}_$v; done
}
PL=30 ab35
PL=30 ab q8 $G/qwen3-8b
PL=30 ab q30 $G/qwen3-30b-a3b
PL=30 ab l8 $G/llama-3.1-8b
echo "ALL DONE"
