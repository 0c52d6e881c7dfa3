#!/usr/bin/env bash
# session-28 call A: the early-trigger twins of silu_mul, the attention combine and the output gate (ops/early_trigger.py:
# every kind from 2 rows on, the new default) A/B against the session-27 default (ATLAS_EARLY_TRIGGER=norm) across models
# at batch 8 x 512, the in-kernel split merge at batch 8 (ATLAS_DECODE_ATTN_LONG_MERGE=1), the combine / gate twins at
# batch 1 on Qwen3.5-35B-A3B, a 2,048-token prefill; the batched MoE router's add + norm in one L2 trip (a0ef6a42: against
# gpu103's b8 numbers, no runtime switch); the batch-2..8 MoE gate/up on tensor cores (ATLAS_MOE_GATE_UP_MMA=1) at
# batch 4 / 8; checks of the changed modules, tiny-fixture parity.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-60} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
OLD="ATLAS_EARLY_TRIGGER=norm"
MERGE="ATLAS_DECODE_ATTN_LONG_MERGE=1"
python3 - "$G" <<'PY'
import sys
from pathlib import Path
from bench_moe import synthetic_model_dir
synthetic_model_dir("qwen3_5-35b-a3b", Path(sys.argv[1]) / "q-nvfp4-all", "nvfp4", lm_head=True, linear_attn=True)
PY
TAILN=2 t 200 checks python3 tools/gpu/check_kernels.py -m rmsnorm -m silu_mul -m attn_gate -m attention_long -m moe_router -m moe_decode_mma -x " leaf " --out $R/checks.json
grep -hE "FAIL" $L/checks.log | cut -c1-160 | head -10
TINY="--model tests/fixtures/tiny-llama --model tests/fixtures/tiny-qwen3 --model tests/fixtures/tiny-qwen3_5 --model tests/fixtures/tiny-qwen3_5_moe"
TAILN=6 t 120 parity python3 tools/gpu/model_parity.py --backend cuda $TINY --out $R/parity.json
bn d8b8_a "X=1" $G/qwen3-8b 8; bn d8b8_old_a "$OLD" $G/qwen3-8b 8
bn d8b8_old_b "$OLD" $G/qwen3-8b 8; bn d8b8_b "X=1" $G/qwen3-8b 8
bn d8b8_m "$MERGE" $G/qwen3-8b 8
for m in "d06 $G/qwen3-0.6b" "m30 $G/qwen3-30b-a3b"; do
  set -- $m
  bn ${1}b8 "X=1" $2 8; bn ${1}b8_old "$OLD" $2 8; bn ${1}b8_m "$MERGE" $2 8
done
for m in "d8q $G/q-nvfp4/qwen3-8b" "d8f $G/q-fp8-block/qwen3-8b" "m35 $G/qwen3_5-35b-a3b" \
         "n35a $G/q-nvfp4-all/qwen3_5-35b-a3b"; do
  set -- $m
  bn ${1}b8 "X=1" $2 8; bn ${1}b8_old "$OLD" $2 8
done
MMA="ATLAS_MOE_GATE_UP_MMA=1"
for m in "m30 $G/qwen3-30b-a3b" "m35 $G/qwen3_5-35b-a3b"; do
  set -- $m
  bn ${1}b8_mma "$MMA" $2 8; bn ${1}b4 "X=1" $2 4; bn ${1}b4_mma "$MMA" $2 4; bn ${1}b8_mmb "$MMA" $2 8
done
bn m35b1 "X=1" $G/qwen3_5-35b-a3b 1; bn m35b1_all "ATLAS_EARLY_TRIGGER=combine" $G/qwen3_5-35b-a3b 1
bn n35ab1 "X=1" $G/q-nvfp4-all/qwen3_5-35b-a3b 1; bn n35ab1_all "ATLAS_EARLY_TRIGGER=combine" $G/q-nvfp4-all/qwen3_5-35b-a3b 1
TAILN=3 t 90 pf python3 tools/gpu/profile_prefill.py --model $G/qwen3-8b --synthetic-seed 0 --tokens 2048 --out $R/pf.json
TAILN=3 t 90 pf_old env $OLD python3 tools/gpu/profile_prefill.py --model $G/qwen3-8b --synthetic-seed 0 --tokens 2048 --out $R/pf_old.json
echo "== GPU ms a step (graph replay), PDL on; new default (all kinds from 2 rows) / session-27 default (norm only) / merge"
echo "d8b8  new $(step d8b8_a) / $(step d8b8_b)   old $(step d8b8_old_a) / $(step d8b8_old_b)   merge $(step d8b8_m)"
for n in d06b8 m30b8; do echo "$n  new $(step $n)   old $(step ${n}_old)   merge $(step ${n}_m)"; done
for n in d8qb8 d8fb8 m35b8 n35ab8; do echo "$n  new $(step $n)   old $(step ${n}_old)"; done
for n in m30 m35; do echo "$n MoE gate/up: b8 default $(step ${n}b8) / mma $(step ${n}b8_mma) / $(step ${n}b8_mmb)   b4 default $(step ${n}b4) / mma $(step ${n}b4_mma)"; done
for n in m35b1 n35ab1; do echo "$n  default $(step $n)   combine early $(step ${n}_all)"; done
echo "prefill 2048: new $(grep -iE 'wall|GPU' $L/pf.log | head -2 | tr '\n' ' ')"
echo "prefill 2048: old $(grep -iE 'wall|GPU' $L/pf_old.log | head -2 | tr '\n' ' ')"
echo "ALL DONE"
