#!/usr/bin/env bash
# session-24 call E (existing switches, no code change): with the MoE down's tail gone and the cluster router on,
# two batch-1 paths measured neutral or slower before, again on Qwen3.5-35B-A3B: ATLAS_MOE_GATE_UP_TILED=1 (the tiled
# one-wave gate/up, last measured only beside route-in-experts, gpu22) and ATLAS_GEMV_ATTN_GATE=1 (o_proj computes the
# output gate on load, gpu44/45 slower); the tiled gate/up also on Qwen3-30B-A3B. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
b1() { PLIM=45 prof "$1" "$2" --model $3 --batch 1 --context 512; }
M=$G/qwen3_5-35b-a3b; M30=$G/qwen3-30b-a3b
b1 def1 "X=1" $M
b1 tiled1 "ATLAS_MOE_GATE_UP_TILED=1" $M
b1 ag1 "ATLAS_GEMV_ATTN_GATE=1" $M
b1 ag2 "ATLAS_GEMV_ATTN_GATE=1" $M
b1 tiled2 "ATLAS_MOE_GATE_UP_TILED=1" $M
b1 def2 "X=1" $M
b1 m30_tiled "ATLAS_MOE_GATE_UP_TILED=1" $M30
b1 m30_def "X=1" $M30
echo "== Qwen3.5-35B-A3B batch 1 x 512, GPU ms a step: default $(step def1) / $(step def2)   GATE_UP_TILED=1 $(step tiled1) / $(step tiled2)   GEMV_ATTN_GATE=1 $(step ag1) / $(step ag2)"
echo "== Qwen3-30B-A3B: GATE_UP_TILED=1 $(step m30_tiled)   default $(step m30_def)"
echo "ALL DONE"
