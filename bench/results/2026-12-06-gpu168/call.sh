#!/usr/bin/env bash
# session-46, the warm H100 after gpu167 found no H200: Qwen3.5-35B-A3B batch 1 at 4,096 and
# 16,384 keys, gated launch (SpreadMerge) on / off / off / on: long contexts have more active
# splits (33-64), where the last-block merge walked several rounds.
source tools/gpu/call_head.sh
for c in 4096 16384; do
  for n in on off off2 on2; do
    e=ATLAS_DECODE_ATTN_LONG_GATED=$([ ${n%2} = on ] && echo 1 || echo 0)
    PLIM=90 prof c${c}_$n "$e" --model $G/qwen3_5-35b-a3b --batch 1 --context $c
  done
done
for c in 4096 16384; do for n in on off off2 on2; do printf "%-12s %s\n" c${c}_$n "$(aw c${c}_$n)"; done; done
for n in c16384_on c16384_off; do echo "-- $n"; sed -n '/^critical path/,/^between/p' $L/$n.log | grep -E "attn|rope|gate_mul|combine" | cut -c1-110; done
echo "ALL DONE"
