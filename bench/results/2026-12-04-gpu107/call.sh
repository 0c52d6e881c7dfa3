#!/usr/bin/env bash
# session-28 call B: the tree with the new defaults (early-trigger twins from 2 rows, split merge in the kernel up to 8
# sequences, the batched router's per-token norm loop back); the tensor-core MoE gate/up with several column tiles a
# block (ATLAS_MOE_GATE_UP_MMA=1) against the default at batch 4 / 8; Qwen3-8B batch-8 decode at 16k / 32k keys
# (the merge default's long-context check); checks of the changed modules. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-60} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
MMA="ATLAS_MOE_GATE_UP_MMA=1"
TAILN=2 t 150 checks python3 tools/gpu/check_kernels.py -m moe_decode_mma -m moe_router -x " leaf " --out $R/checks.json
grep -hE "FAIL" $L/checks.log | cut -c1-160 | head -10
bn d8b8 "X=1" $G/qwen3-8b 8; bn d06b8 "X=1" $G/qwen3-0.6b 8
for m in "m30 $G/qwen3-30b-a3b" "m35 $G/qwen3_5-35b-a3b"; do
  set -- $m
  bn ${1}b8 "X=1" $2 8; bn ${1}b8_mma "$MMA" $2 8; bn ${1}b4 "X=1" $2 4; bn ${1}b4_mma "$MMA" $2 4
done
TAILN=14 t 200 long python3 tools/gpu/bench_long_context.py --config qwen3-8b --prefill 0 --out $R/long.json
echo "== GPU ms a step (graph replay), PDL on, defaults"
for n in d8b8 d06b8; do echo "$n $(step $n)"; done
for n in m30 m35; do echo "$n b8 default $(step ${n}b8) / mma $(step ${n}b8_mma)   b4 default $(step ${n}b4) / mma $(step ${n}b4_mma)"; done
echo "ALL DONE"
