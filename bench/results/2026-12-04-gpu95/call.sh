#!/usr/bin/env bash
# session-25 call F: the session's defaults measured once more at the final tree (the tiled gate/up rule, the long
# attention's merge rule: Qwen3.5's D-256 plain entry on the combine, the rope-fused entries merging), batch 1 x 512:
# Qwen3.5-35B-A3B bf16 / NVFP4 / NVFP4 + LM head + linear attention, Qwen3-30B-A3B, Qwen3-8B, Qwen3-0.6B; device
# checks of the attention and MoE decode modules. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
b1() { PLIM=45 prof "$1" "$2" --model $3 --batch 1 --context 512; }
python3 - "$G" <<'PY'
import sys
from pathlib import Path
from bench_moe import synthetic_model_dir
synthetic_model_dir("qwen3_5-35b-a3b", Path(sys.argv[1]) / "q-nvfp4-all", "nvfp4", lm_head=True, linear_attn=True)
PY
TAILN=2 t 120 checks python3 tools/gpu/check_kernels.py -m attention_long -m moe_decode --out $R/checks.json
b1 m35 "X=1" $G/qwen3_5-35b-a3b
b1 n35 "X=1" $G/q-nvfp4/qwen3_5-35b-a3b
b1 n35_all "X=1" $G/q-nvfp4-all/qwen3_5-35b-a3b
b1 m30 "X=1" $G/qwen3-30b-a3b
b1 d8 "X=1" $G/qwen3-8b
b1 d06 "X=1" $G/qwen3-0.6b
echo "== batch 1 x 512, GPU ms a step: Qwen3.5-35B-A3B bf16 $(step m35)  NVFP4 $(step n35)  NVFP4+lm_head+linear_attn $(step n35_all)  Qwen3-30B-A3B $(step m30)  Qwen3-8B $(step d8)  Qwen3-0.6B $(step d06)"
echo "ALL DONE"
