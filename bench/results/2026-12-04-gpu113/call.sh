#!/usr/bin/env bash
# session-29 call E: gpu112's graph trace put the 30B's batch-1 keyed attention blocks two per SM on 68 SMs.
# ATLAS_DECODE_ATTN_LONG_SOLO=1 (batch 1's rope entries launch with 116 KiB of shared memory: one block an SM)
# against the default: the graph trace (30B, 0.6B heads, 512 keys), then batch-1 steps (30B both orders, 0.6B,
# 8B). PTX of 31673a4c (unchanged since). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
bn() { PLIM=${PL:-60} prof "$1" "$2" --model $3 --batch $4 --context ${5:-512}; }
S="ATLAS_DECODE_ATTN_LONG_SOLO=1"
for v in "def X=1" "solo $S"; do
  set -- $v
  TAILN=0 t 60 trace_$1 env $2 python3 tools/gpu/trace_decode_attn.py --long --heads qwen3-30b-a3b,qwen3-0.6b --keys 512 --trace-only
  grep -E "graph" $L/trace_$1.log | cut -c1-250
done
M30=$G/qwen3-30b-a3b
bn m30_def "X=1" $M30 1; bn m30_solo "$S" $M30 1; bn m30_solo2 "$S" $M30 1; bn m30_def2 "X=1" $M30 1
bn d06_def "X=1" $G/qwen3-0.6b 1; bn d06_solo "$S" $G/qwen3-0.6b 1
bn d8_def "X=1" $G/qwen3-8b 1; bn d8_solo "$S" $G/qwen3-8b 1
echo "== GPU ms a step (graph replay), PDL on, batch 1 x 512: default / ATLAS_DECODE_ATTN_LONG_SOLO=1"
echo "m30 $(step m30_def) / $(step m30_def2)  solo $(step m30_solo) / $(step m30_solo2)"
for n in d06 d8; do echo "$n $(step ${n}_def)  solo $(step ${n}_solo)"; done
echo "ALL DONE"
