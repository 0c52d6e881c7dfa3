#!/usr/bin/env bash
# session-30 call A: (1) bf16 CUDA-core GEMV threads with two 16-byte chunks of a row each (gemv_threads; the
# default now) against one (ATLAS_GEMV_CHUNKS=1, the old launch) on the models with k <= 2048 projections
# (Qwen3-0.6B, Qwen3-30B-A3B both orders; Qwen3.5-35B-A3B, Llama-3.2-1B, Qwen3-1.7B); (2) Qwen3-8B FP8-block with the
# LM head FP8 as `atlas models quantize` writes it (gemv_fp8_cvt_f32_single) against the published layout (bf16
# LM head), bf16 and NVFP4 (LM head NVFP4) in the same call; (3) checks of gemv / gemv_fp8 / attention_long; (4) the
# batch-1 attention's graph trace with the late-trigger twin (30B, 8B heads). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-60} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
python3 - "$G" <<'PY'
import sys
from pathlib import Path
from bench_moe import synthetic_model_dir
root = Path(sys.argv[1])
synthetic_model_dir("qwen3-8b", root / "q-fp8-block-lm", "fp8-block", lm_head=True)
synthetic_model_dir("qwen3-8b", root / "q-nvfp4-lm", "nvfp4", lm_head=True)
PY
TAILN=3 t 170 checks python3 tools/gpu/check_kernels.py -m gemv -m gemv_fp8 -m attention_long -x " leaf " --out $R/checks.json
grep -E "FAIL|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
C1="ATLAS_GEMV_CHUNKS=1"
bn d06 "X=1" $G/qwen3-0.6b 1; bn d06_c1 "$C1" $G/qwen3-0.6b 1; bn d06_c1b "$C1" $G/qwen3-0.6b 1; bn d06b "X=1" $G/qwen3-0.6b 1
M30=$G/qwen3-30b-a3b
bn m30 "X=1" $M30 1; bn m30_c1 "$C1" $M30 1; bn m30_c1b "$C1" $M30 1; bn m30b "X=1" $M30 1
bn m35 "X=1" $G/qwen3_5-35b-a3b 1; bn m35_c1 "$C1" $G/qwen3_5-35b-a3b 1
bn l1 "X=1" $G/llama-3.2-1b 1; bn l1_c1 "$C1" $G/llama-3.2-1b 1
bn q17 "X=1" $G/qwen3-1.7b 1; bn q17_c1 "$C1" $G/qwen3-1.7b 1
bn d8 "X=1" $G/qwen3-8b 1
bn d8f_pub "X=1" $G/q-fp8-block/qwen3-8b 1; bn d8f_lm "X=1" $G/q-fp8-block-lm/qwen3-8b 1
bn d8q_lm "X=1" $G/q-nvfp4-lm/qwen3-8b 1
TAILN=0 t 60 trace python3 tools/gpu/trace_decode_attn.py --long --heads qwen3-30b-a3b,qwen3-8b --keys 512 --trace-only
grep -E "graph|alone" $L/trace.log | cut -c1-250 | head -12
echo "== GPU ms a step (graph replay), PDL on, batch 1 x 512: two chunks a thread (default) / ATLAS_GEMV_CHUNKS=1"
echo "d06 $(step d06) / $(step d06b)  c1 $(step d06_c1) / $(step d06_c1b)"
echo "m30 $(step m30) / $(step m30b)  c1 $(step m30_c1) / $(step m30_c1b)"
for n in m35 l1 q17; do echo "$n $(step $n)  c1 $(step ${n}_c1)"; done
echo "== Qwen3-8B: bf16 $(step d8)  FP8-block published (bf16 LM head) $(step d8f_pub)  FP8 LM head $(step d8f_lm)  NVFP4 LM head $(step d8q_lm)"
echo "ALL DONE"
