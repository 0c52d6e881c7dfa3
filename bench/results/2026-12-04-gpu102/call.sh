#!/usr/bin/env bash
# session-27 call B: the norms' early trigger (ATLAS_NORM_EARLY_TRIGGER=1: add_rmsnorm[_offset]_early_bf16 let the
# next projection launch before their wait, so its first weight tiles are requested under the kernel before the
# norm). Checks of the rmsnorm module (the early entries' cases); parity of the tiny fixtures (greedy continuations vs transformers goldens, the graph
# with PDL) on both kernel sets, then batch-1 x 512 steps, default / early / early / default: Qwen3-0.6B,
# Qwen3-8B NVFP4, Qwen3.5-35B-A3B bf16 and NVFP4 + LM head + linear attention; one each: Qwen3-8B bf16 and
# FP8-block, Qwen3-30B-A3B; Qwen3-8B bf16 batch 8 and 64 x 512. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
b1() { PLIM=45 prof "$1" "$2" --model $3 --batch 1 --context 512; }
NET="ATLAS_NORM_EARLY_TRIGGER=1"
python3 - "$G" <<'PY'
import sys
from pathlib import Path
from bench_moe import synthetic_model_dir
synthetic_model_dir("qwen3_5-35b-a3b", Path(sys.argv[1]) / "q-nvfp4-all", "nvfp4", lm_head=True, linear_attn=True)
PY
TINY="--model tests/fixtures/tiny-llama --model tests/fixtures/tiny-qwen3 --model tests/fixtures/tiny-qwen3_5 --model tests/fixtures/tiny-qwen3_5_moe"
TAILN=2 t 60 checks python3 tools/gpu/check_kernels.py -m rmsnorm --out $R/checks.json
grep -hE "FAIL" $L/checks.log | cut -c1-160 | head -10
TAILN=6 t 120 parity_net env $NET python3 tools/gpu/model_parity.py --backend cuda $TINY --out $R/parity_net.json
TAILN=6 t 120 parity python3 tools/gpu/model_parity.py --backend cuda $TINY --out $R/parity.json
N35=$G/q-nvfp4-all/qwen3_5-35b-a3b
for m in "d06 $G/qwen3-0.6b" "d8q $G/q-nvfp4/qwen3-8b" "n35a $N35" "m35 $G/qwen3_5-35b-a3b"; do
  set -- $m
  b1 ${1}_a "X=1" $2; b1 ${1}_ea "$NET" $2; b1 ${1}_eb "$NET" $2; b1 ${1}_b "X=1" $2
done
for m in "d8 $G/qwen3-8b" "d8f $G/q-fp8-block/qwen3-8b" "m30 $G/qwen3-30b-a3b"; do
  set -- $m
  b1 ${1}_a "X=1" $2; b1 ${1}_ea "$NET" $2
done
PLIM=60 prof d8b8_a "X=1" --model $G/qwen3-8b --batch 8 --context 512
PLIM=60 prof d8b8_ea "$NET" --model $G/qwen3-8b --batch 8 --context 512
PLIM=90 prof d8b64_a "X=1" --model $G/qwen3-8b --batch 64 --context 512
PLIM=90 prof d8b64_ea "$NET" --model $G/qwen3-8b --batch 64 --context 512
echo "== GPU ms a step (graph replay), PDL on; default / early trigger (both orders where four)"
for n in d06 d8q n35a m35; do echo "$n  default $(step ${n}_a) / $(step ${n}_b)   early $(step ${n}_ea) / $(step ${n}_eb)"; done
for n in d8 d8f m30 d8b8 d8b64; do echo "$n  default $(step ${n}_a)   early $(step ${n}_ea)"; done
echo "ALL DONE"
