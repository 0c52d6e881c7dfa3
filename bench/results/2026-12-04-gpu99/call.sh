#!/usr/bin/env bash
# session-26 call C: the NVFP4 h2 GEMV in 8-row blocks (gemv_nvfp4_h2x8_*, ATLAS_QUANT_H2_ROWS=8: one chunk of
# each row a thread, x's f16 conversion and range check shared by 8 rows): device checks of every gemv_nvfp4
# case under rows 4 and rows 8, and of moe_decode / decode_persistent at two seeds (the per-factory generators
# and their tolerances); kernel-table rows of Qwen3-8B's NVFP4 h2 products rows 4 / 8; Qwen3-8B NVFP4 batch 1
# x 512 rows 4 / 8 / 8 / 4, the tool-made checkpoint (LM head NVFP4) rows 4 / 8, bf16.
# Only the hopper/common PTX set. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
b1() { PLIM=45 prof "$1" "$2" --model $3 --batch 1 --context 512; }
python3 - "$G" <<'PY'
import sys
from pathlib import Path
from bench_moe import synthetic_model_dir
synthetic_model_dir("qwen3-8b", Path(sys.argv[1]) / "q-nvfp4-lmh", "nvfp4", lm_head=True)
PY
TAILN=2 t 120 checks4 python3 tools/gpu/check_kernels.py -m gemv_nvfp4 --out $R/checks4.json
TAILN=2 t 120 checks8 env ATLAS_QUANT_H2_ROWS=8 python3 tools/gpu/check_kernels.py -m gemv_nvfp4 -k h2 --out $R/checks8.json
TAILN=2 t 150 checks_moe0 python3 tools/gpu/check_kernels.py -m moe_decode -m decode_persistent --seed 0 --out $R/checks_moe0.json
TAILN=2 t 150 checks_moe7 python3 tools/gpu/check_kernels.py -m moe_decode -m decode_persistent --seed 7 --out $R/checks_moe7.json
grep -hE "FAIL" $L/checks*.log | cut -c1-160 | head -10
KLIM=100 kt r4 "ATLAS_QUANT_H2_ROWS=4" -k "b1 nvfp4 h2"
KLIM=100 kt r8 "ATLAS_QUANT_H2_ROWS=8" -k "b1 nvfp4 h2"
Q=$G/q-nvfp4/qwen3-8b
b1 d8q_r4a "ATLAS_QUANT_H2_ROWS=4" $Q
b1 d8q_r8a "ATLAS_QUANT_H2_ROWS=8" $Q
b1 d8q_r8b "ATLAS_QUANT_H2_ROWS=8" $Q
b1 d8q_r4b "ATLAS_QUANT_H2_ROWS=4" $Q
b1 d8ql_r4 "ATLAS_QUANT_H2_ROWS=4" $G/q-nvfp4-lmh/qwen3-8b
b1 d8ql_r8 "ATLAS_QUANT_H2_ROWS=8" $G/q-nvfp4-lmh/qwen3-8b
b1 d8 "X=1" $G/qwen3-8b
echo "== Qwen3-8B batch 1 x 512, GPU ms a step (graph replay), PDL on"
echo "bf16 $(step d8)"
echo "NVFP4           rows4 $(step d8q_r4a) / $(step d8q_r4b)   rows8 $(step d8q_r8a) / $(step d8q_r8b)"
echo "NVFP4 +lm_head  rows4 $(step d8ql_r4)   rows8 $(step d8ql_r8)"
echo "ALL DONE"
