#!/usr/bin/env bash
# session-27 call C: the norms' early trigger as the rule for batched steps (ops/norm.NORM_EARLY_MIN_ROWS = 2: the
# add_rmsnorm of 2+ rows lets the next projection launch before its wait; one row keeps the trigger after it),
# A/B against ATLAS_NORM_EARLY_TRIGGER=0 across models at batch 8 x 512, Qwen3-8B at batch 64 x 1,536, and a
# 2,048-token prefill; checks of the rmsnorm module, tiny-fixture parity (their prefill runs the early entries).
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-60} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
OFF="ATLAS_NORM_EARLY_TRIGGER=0"
python3 - "$G" <<'PY'
import sys
from pathlib import Path
from bench_moe import synthetic_model_dir
synthetic_model_dir("qwen3_5-35b-a3b", Path(sys.argv[1]) / "q-nvfp4-all", "nvfp4", lm_head=True, linear_attn=True)
PY
TAILN=2 t 60 checks python3 tools/gpu/check_kernels.py -m rmsnorm --out $R/checks.json
grep -hE "FAIL" $L/checks.log | cut -c1-160 | head -10
TINY="--model tests/fixtures/tiny-llama --model tests/fixtures/tiny-qwen3 --model tests/fixtures/tiny-qwen3_5 --model tests/fixtures/tiny-qwen3_5_moe"
TAILN=6 t 120 parity python3 tools/gpu/model_parity.py --backend cuda $TINY --out $R/parity.json
bn d8b8_a "X=1" $G/qwen3-8b 8; bn d8b8_off_a "$OFF" $G/qwen3-8b 8
bn d8b8_off_b "$OFF" $G/qwen3-8b 8; bn d8b8_b "X=1" $G/qwen3-8b 8
for m in "d06 $G/qwen3-0.6b" "d8q $G/q-nvfp4/qwen3-8b" "d8f $G/q-fp8-block/qwen3-8b" "m30 $G/qwen3-30b-a3b" \
         "m35 $G/qwen3_5-35b-a3b" "n35a $G/q-nvfp4-all/qwen3_5-35b-a3b"; do
  set -- $m
  bn ${1}b8 "X=1" $2 8; bn ${1}b8_off "$OFF" $2 8
done
PL=120 bn d8b64 "X=1" $G/qwen3-8b 64 1536; PL=120 bn d8b64_off "$OFF" $G/qwen3-8b 64 1536
TAILN=3 t 90 pf python3 tools/gpu/profile_prefill.py --model $G/qwen3-8b --synthetic-seed 0 --tokens 2048 --out $R/pf.json
TAILN=3 t 90 pf_off env $OFF python3 tools/gpu/profile_prefill.py --model $G/qwen3-8b --synthetic-seed 0 --tokens 2048 --out $R/pf_off.json
echo "== GPU ms a step (graph replay), PDL on; early rule (default) / trigger after the wait (=0)"
echo "d8b8  default $(step d8b8_a) / $(step d8b8_b)   off $(step d8b8_off_a) / $(step d8b8_off_b)"
for n in d06b8 d8qb8 d8fb8 m30b8 m35b8 n35ab8 d8b64; do echo "$n  default $(step $n)   off $(step ${n}_off)"; done
echo "prefill 2048: default $(grep -iE 'wall|GPU' $L/pf.log | head -2 | tr '\n' ' ')"
echo "prefill 2048: off     $(grep -iE 'wall|GPU' $L/pf_off.log | head -2 | tr '\n' ' ')"
echo "ALL DONE"
