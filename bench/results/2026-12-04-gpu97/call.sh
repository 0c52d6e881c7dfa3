#!/usr/bin/env bash
# session-26 call A: the half-precision-FMA GEMV's cp.async-ring twin (gemv_{nvfp4,fp8}_h2_ring_*,
# ATLAS_QUANT_H2_RING / _STAGES): device checks of every gemv_nvfp4 and gemv_fp8 case (the rings' and the
# one-shot kernels', whose loop moved into shared helpers), the kernel-table rows of Qwen3-8B's NVFP4 h2
# products with the ring off / on, and Qwen3-8B batch 1 x 512: NVFP4 off / ring 3 / ring 2 / ring 4 / off,
# FP8-block default / FP8 h2 on the ring, bf16; then the checkpoints `atlas models quantize` makes by default
# (the LM head quantized too): NVFP4 off / ring, FP8-block default / h2 ring. Only the hopper/common PTX set
# (ATLAS_TARGET_MODEL=qwen3-8b). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
b1() { PLIM=45 prof "$1" "$2" --model $3 --batch 1 --context 512; }
python3 - "$G" <<'PY'
import sys
from pathlib import Path
from bench_moe import synthetic_model_dir
for quant in ("nvfp4", "fp8-block"):
    synthetic_model_dir("qwen3-8b", Path(sys.argv[1]) / f"q-{quant}-lmh", quant, lm_head=True)
PY
TAILN=2 t 200 checks python3 tools/gpu/check_kernels.py -m gemv_nvfp4 -m gemv_fp8 --out $R/checks.json
grep -E "FAIL" $L/checks.log | cut -c1-160 | head -8
KLIM=100 kt off "ATLAS_QUANT_H2_RING=0" -k "b1 nvfp4 h2"
KLIM=100 kt ring "ATLAS_QUANT_H2_RING=1" -k "b1 nvfp4 h2"
Q=$G/q-nvfp4/qwen3-8b
b1 d8q_off1 "ATLAS_QUANT_H2_RING=0" $Q
b1 d8q_r3 "ATLAS_QUANT_H2_RING=1 ATLAS_QUANT_H2_RING_STAGES=3" $Q
b1 d8q_r2 "ATLAS_QUANT_H2_RING=1 ATLAS_QUANT_H2_RING_STAGES=2" $Q
b1 d8q_r4 "ATLAS_QUANT_H2_RING=1 ATLAS_QUANT_H2_RING_STAGES=4" $Q
b1 d8q_off2 "ATLAS_QUANT_H2_RING=0" $Q
b1 d8 "X=1" $G/qwen3-8b
b1 d8f "X=1" $G/q-fp8-block/qwen3-8b
b1 d8f_h2r "ATLAS_QUANT_FP8_H2=1 ATLAS_QUANT_H2_RING=1" $G/q-fp8-block/qwen3-8b
b1 d8ql_off "ATLAS_QUANT_H2_RING=0" $G/q-nvfp4-lmh/qwen3-8b
b1 d8ql_r3 "ATLAS_QUANT_H2_RING=1" $G/q-nvfp4-lmh/qwen3-8b
b1 d8fl "X=1" $G/q-fp8-block-lmh/qwen3-8b
b1 d8fl_h2r "ATLAS_QUANT_FP8_H2=1 ATLAS_QUANT_H2_RING=1" $G/q-fp8-block-lmh/qwen3-8b
echo "== Qwen3-8B batch 1 x 512, GPU ms a step (graph replay), PDL on"
echo "bf16 $(step d8)"
echo "NVFP4            off $(step d8q_off1) / $(step d8q_off2)   ring3 $(step d8q_r3)   ring2 $(step d8q_r2)   ring4 $(step d8q_r4)"
echo "FP8-block        default $(step d8f)   h2 ring3 $(step d8f_h2r)"
echo "NVFP4 +lm_head   off $(step d8ql_off)   ring3 $(step d8ql_r3)"
echo "FP8 +lm_head     default $(step d8fl)   h2 ring3 $(step d8fl_h2r)"
echo "ALL DONE"
