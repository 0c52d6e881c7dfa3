#!/usr/bin/env bash
# session-26 call D: the NVFP4 h2 GEMV's 8-row blocks as the default (ops/matmul_nvfp4.H2_ROWS = 8) with every
# pass full (matmul_h2.h2_threads: Qwen3-8B's down on 2 passes of 192 threads, gpu99's 256 + 128 ran 13.2 us):
# checks of gemv_nvfp4 and gemv_fp8 at the default, kernel-table rows rows 4 / 8, and Qwen3-8B batch 1 x 512:
# NVFP4 default / rows 4 / default / rows 4, the tool-made checkpoint (LM head NVFP4) default / rows 4, bf16.
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
TAILN=2 t 150 checks python3 tools/gpu/check_kernels.py -m gemv_nvfp4 -m gemv_fp8 --out $R/checks.json
grep -hE "FAIL" $L/checks.log | cut -c1-160 | head -10
KLIM=100 kt r4 "ATLAS_QUANT_H2_ROWS=4" -k "b1 nvfp4 h2"
KLIM=100 kt r8 "X=1" -k "b1 nvfp4 h2"
Q=$G/q-nvfp4/qwen3-8b
b1 d8q_a "X=1" $Q
b1 d8q_r4a "ATLAS_QUANT_H2_ROWS=4" $Q
b1 d8q_b "X=1" $Q
b1 d8q_r4b "ATLAS_QUANT_H2_ROWS=4" $Q
b1 d8ql "X=1" $G/q-nvfp4-lmh/qwen3-8b
b1 d8ql_r4 "ATLAS_QUANT_H2_ROWS=4" $G/q-nvfp4-lmh/qwen3-8b
b1 d8 "X=1" $G/qwen3-8b
echo "== Qwen3-8B batch 1 x 512, GPU ms a step (graph replay), PDL on"
echo "bf16 $(step d8)"
echo "NVFP4           default (rows 8) $(step d8q_a) / $(step d8q_b)   rows 4 $(step d8q_r4a) / $(step d8q_r4b)"
echo "NVFP4 +lm_head  default $(step d8ql)   rows 4 $(step d8ql_r4)"
echo "ALL DONE"
