#!/usr/bin/env bash
# session-22 call A: the evict_first L2 policy on the step's streams (decode GEMM weight boxes, long-attention K/V
# copies; the kernels_l2 set, built with -DATLAS_L2_STREAM_EVICT_FIRST=1) against the default set: checks of both
# modules on the variant, then Qwen3-8B steps A/B in both orders at batch 64 x 1,536, batch 8 x 4,096 and batch 1 x
# 512. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
V=$PWD/.device/kernels_l2; D=$ATLAS_KERNELS_DIR
ls $V
TAILN=3 t 240 checks python3 tools/gpu/check_kernels.py --ptx-dir $V -m attention_long -m gemm_decode_tma --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
b() { PLIM=150 prof "$1" "ATLAS_KERNELS_DIR=$2" --model $G/qwen3-8b --batch $3 --context $4; }
b b64_d $D 64 1536; b b64_l $V 64 1536; b b64_l2 $V 64 1536; b b64_d2 $D 64 1536
b b8_l $V 8 4096; b b8_d $D 8 4096
b b1_d $D 1 512; b b1_l $V 1 512
echo "== kernel rows (us a call) and the attention on the critical path"
for n in b64_d b64_l b64_l2 b64_d2 b8_l b8_d b1_d b1_l; do
  echo "$n $(grep -E "GPU per step" $L/$n.log | head -1 | cut -c1-60)"
  grep -E "^(decode_attn|gemm_decode)\w+ +[0-9]" $L/$n.log | head -5 | cut -c1-90
  echo "  crit: $(grep -E "^decode_attn\w* +gemm" $L/$n.log | head -1 | cut -c1-120)"; done
echo "ALL DONE"
