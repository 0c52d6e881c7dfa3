#!/usr/bin/env bash
# session-22 call B: the evict_first L2 policy on by default (every streamed weight load and the long attention's
# K/V copies) against the unhinted set (kernels_off, -DATLAS_L2_STREAM_EVICT_FIRST=0): checks of the modules whose
# loads it newly reaches, then steps A/B (default first, unhinted second): Qwen3-8B batch 64 x 1,536 and batch 8 x
# 4,096, Qwen3-8B FP8-block and NVFP4 batch 1, Qwen3-30B-A3B batch 1 and 64, Qwen3.5-35B-A3B bf16 and NVFP4 batch 1.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
O=$PWD/.device/kernels_off; D=$ATLAS_KERNELS_DIR
ls $O
TAILN=3 t 200 checks python3 tools/gpu/check_kernels.py -m gemv_mma -m gemv_mma_quant -m gemv_quant_direct -m moe_decode -m moe_router -m gemv_fp8 --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
ab() {  # name model batch context
  PLIM=120 prof "$1_n" "ATLAS_KERNELS_DIR=$D" --model $2 --batch $3 --context $4
  PLIM=120 prof "$1_o" "ATLAS_KERNELS_DIR=$O" --model $2 --batch $3 --context $4
}
ab q8b64 $G/qwen3-8b 64 1536
ab q8b8 $G/qwen3-8b 8 4096
ab q8f $G/q-fp8-block/qwen3-8b 1 512
ab q8n $G/q-nvfp4/qwen3-8b 1 512
ab q30 $G/qwen3-30b-a3b 1 512
ab q30b64 $G/qwen3-30b-a3b 64 1536
ab q35 $G/qwen3_5-35b-a3b 1 512
ab q35n $G/q-nvfp4/qwen3_5-35b-a3b 1 512
echo "== GPU ms a step: default (hinted) / unhinted"
for n in q8b64 q8b8 q8f q8n q30 q30b64 q35 q35n; do
  printf "%-8s %s / %s\n" $n "$(hdr ${n}_n | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2)" "$(hdr ${n}_o | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2)"; done
echo "ALL DONE"
