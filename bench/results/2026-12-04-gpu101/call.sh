#!/usr/bin/env bash
# session-27 call A: the h2 GEMV's rows and stores through gemv_core's StoreY / StoreSwiglu (R-row templates) and
# the FP8 h2 GEMV in 8-row blocks (gemv_fp8_h2x8_*, ATLAS_QUANT_H2_ROWS=8): checks of gemv / gemv_nvfp4 /
# gemv_fp8 at the defaults and the FP8 h2 cases in 8-row blocks; kernel-table FP8 rows (convert, tc, h2 rows 4 / 8);
# Qwen3-8B FP8-block batch 1 x 512: convert (default) / h2 rows 4 / h2 rows 8, both orders; NVFP4 and bf16;
# Qwen3.5-35B-A3B bf16, NVFP4 and NVFP4 + LM head + linear attention, rows 8 (default) / rows 4.
# All hopper PTX sets. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
b1() { PLIM=45 prof "$1" "$2" --model $3 --batch 1 --context 512; }
python3 - "$G" <<'PY'
import sys
from pathlib import Path
from bench_moe import synthetic_model_dir
synthetic_model_dir("qwen3_5-35b-a3b", Path(sys.argv[1]) / "q-nvfp4-all", "nvfp4", lm_head=True, linear_attn=True)
PY
TAILN=2 t 150 checks python3 tools/gpu/check_kernels.py -m gemv -m gemv_nvfp4 -m gemv_fp8 --out $R/checks.json
grep -hE "FAIL" $L/checks.log | cut -c1-160 | head -10
TAILN=2 t 90 checks_f8r8 env ATLAS_QUANT_H2_ROWS=8 python3 tools/gpu/check_kernels.py -m gemv_fp8 -k "fp8 h2" --out $R/checks_f8r8.json
grep -hE "FAIL" $L/checks_f8r8.log | cut -c1-160 | head -10
KLIM=100 kt f8 "X=1" -k "b1 fp8-block"
KLIM=60 kt f8r8 "ATLAS_QUANT_H2_ROWS=8" -k "b1 fp8-block h2"
F=$G/q-fp8-block/qwen3-8b
b1 d8f_a "X=1" $F
b1 d8f_h4a "ATLAS_QUANT_FP8_H2=1 ATLAS_QUANT_H2_ROWS=4" $F
b1 d8f_h8a "ATLAS_QUANT_FP8_H2=1 ATLAS_QUANT_H2_ROWS=8" $F
b1 d8f_h8b "ATLAS_QUANT_FP8_H2=1 ATLAS_QUANT_H2_ROWS=8" $F
b1 d8f_h4b "ATLAS_QUANT_FP8_H2=1 ATLAS_QUANT_H2_ROWS=4" $F
b1 d8f_b "X=1" $F
b1 d8q "X=1" $G/q-nvfp4/qwen3-8b
b1 d8 "X=1" $G/qwen3-8b
b1 m35 "X=1" $G/qwen3_5-35b-a3b
b1 n35 "X=1" $G/q-nvfp4/qwen3_5-35b-a3b
b1 n35_r4 "ATLAS_QUANT_H2_ROWS=4" $G/q-nvfp4/qwen3_5-35b-a3b
b1 n35a "X=1" $G/q-nvfp4-all/qwen3_5-35b-a3b
b1 n35a_r4 "ATLAS_QUANT_H2_ROWS=4" $G/q-nvfp4-all/qwen3_5-35b-a3b
echo "== batch 1 x 512, GPU ms a step (graph replay), PDL on"
echo "Qwen3-8B bf16 $(step d8)   NVFP4 $(step d8q)"
echo "Qwen3-8B FP8-block  convert $(step d8f_a) / $(step d8f_b)   h2 rows 4 $(step d8f_h4a) / $(step d8f_h4b)   h2 rows 8 $(step d8f_h8a) / $(step d8f_h8b)"
echo "Qwen3.5-35B-A3B bf16 $(step m35)   NVFP4 rows 8 $(step n35) rows 4 $(step n35_r4)   NVFP4+lm_head+linear_attn rows 8 $(step n35a) rows 4 $(step n35a_r4)"
echo "ALL DONE"
