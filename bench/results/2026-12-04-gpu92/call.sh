#!/usr/bin/env bash
# session-25 call C (PTX as at 8b49f78b: the merge and prefetch builds reverted): (1) the tiled gate/up's wave-fill
# rule (unset ATLAS_MOE_GATE_UP_TILED: tiled on Qwen3-30B-A3B, not on Qwen3.5-35B-A3B), 30B default / forced off /
# forced off / default, 35B default; (2) issue 12's ratios in one run: Qwen3-8B bf16 / FP8-block / NVFP4 at batch 1,
# and Qwen3.5-35B-A3B NVFP4 and FP8-block as published (Gated-DeltaNet projections and LM head bf16) and NVFP4 with
# those quantized too (bench_moe.py --lm-head --linear-attn: what the 900 tok/s bar needs).
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
b1() { PLIM=45 prof "$1" "$2" --model $3 --batch 1 --context 512; }
python3 - "$G" <<'PY'
import sys
from pathlib import Path
from bench_moe import synthetic_model_dir
synthetic_model_dir("qwen3_5-35b-a3b", Path(sys.argv[1]) / "q-nvfp4-all", "nvfp4", lm_head=True, linear_attn=True)
PY
M30=$G/qwen3-30b-a3b; M=$G/qwen3_5-35b-a3b
b1 m30_auto1 "X=1" $M30
b1 m30_off1 "ATLAS_MOE_GATE_UP_TILED=0" $M30
b1 m30_off2 "ATLAS_MOE_GATE_UP_TILED=0" $M30
b1 m30_auto2 "X=1" $M30
b1 m35 "X=1" $M
b1 d8 "X=1" $G/qwen3-8b
b1 d8_fp8 "X=1" $G/q-fp8-block/qwen3-8b
b1 d8_nvfp4 "X=1" $G/q-nvfp4/qwen3-8b
b1 m35_fp8 "X=1" $G/q-fp8-block/qwen3_5-35b-a3b
b1 m35_nvfp4 "X=1" $G/q-nvfp4/qwen3_5-35b-a3b
b1 m35_nvfp4_all "X=1" $G/q-nvfp4-all/qwen3_5-35b-a3b
echo "== batch 1 x 512, GPU ms a step (graph replay), PDL on"
echo "Qwen3-30B-A3B   default (tiled by the rule) $(step m30_auto1) / $(step m30_auto2)   ATLAS_MOE_GATE_UP_TILED=0 $(step m30_off1) / $(step m30_off2)"
echo "Qwen3.5-35B-A3B bf16 $(step m35)   FP8-block $(step m35_fp8)   NVFP4 $(step m35_nvfp4)   NVFP4 +lm_head +linear_attn $(step m35_nvfp4_all)"
echo "Qwen3-8B        bf16 $(step d8)   FP8-block $(step d8_fp8)   NVFP4 $(step d8_nvfp4)"
echo "ALL DONE"
