#!/usr/bin/env bash
# session-26 call B: the h2 ring with one-chunk tiles (80 bytes a thread a stage: the one-shot kernel's
# 24 warps an SM; gpu97's two-chunk tiles held 12 and ran ~40% slower): device checks of the ring cases,
# the kernel-table rows of Qwen3-8B's NVFP4 h2 products off / ring, Qwen3-8B NVFP4 batch 1 x 512
# off / ring 3 / ring 2 / ring 4 / off, FP8-block default / h2 on the ring. Only the hopper/common PTX set.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
b1() { PLIM=45 prof "$1" "$2" --model $3 --batch 1 --context 512; }
TAILN=2 t 150 checks python3 tools/gpu/check_kernels.py -m gemv_nvfp4 -m gemv_fp8 -k ring --out $R/checks.json
grep -E "FAIL" $L/checks.log | cut -c1-160 | head -8
KLIM=100 kt off "ATLAS_QUANT_H2_RING=0" -k "b1 nvfp4 h2"
KLIM=100 kt ring "ATLAS_QUANT_H2_RING=1" -k "b1 nvfp4 h2"
KLIM=100 kt ring2 "ATLAS_QUANT_H2_RING=1 ATLAS_QUANT_H2_RING_STAGES=2" -k "b1 nvfp4 h2"
Q=$G/q-nvfp4/qwen3-8b
b1 d8q_off1 "ATLAS_QUANT_H2_RING=0" $Q
b1 d8q_r3 "ATLAS_QUANT_H2_RING=1 ATLAS_QUANT_H2_RING_STAGES=3" $Q
b1 d8q_r2 "ATLAS_QUANT_H2_RING=1 ATLAS_QUANT_H2_RING_STAGES=2" $Q
b1 d8q_r4 "ATLAS_QUANT_H2_RING=1 ATLAS_QUANT_H2_RING_STAGES=4" $Q
b1 d8q_off2 "ATLAS_QUANT_H2_RING=0" $Q
b1 d8f "X=1" $G/q-fp8-block/qwen3-8b
b1 d8f_h2r "ATLAS_QUANT_FP8_H2=1 ATLAS_QUANT_H2_RING=1" $G/q-fp8-block/qwen3-8b
echo "== Qwen3-8B batch 1 x 512, GPU ms a step (graph replay), PDL on"
echo "NVFP4      off $(step d8q_off1) / $(step d8q_off2)   ring3 $(step d8q_r3)   ring2 $(step d8q_r2)   ring4 $(step d8q_r4)"
echo "FP8-block  default $(step d8f)   h2 ring3 $(step d8f_h2r)"
echo "ALL DONE"
