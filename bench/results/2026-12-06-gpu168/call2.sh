#!/usr/bin/env bash
# gpu168's second command: bf16 at 2,048 keys (the 35B bf16 at 16,384 does not fit an H100's
# KV budget beside 69 GB of weights), NVFP4 at 4,096 and 16,384 keys, gated on / off / off / on.
source tools/gpu/call_head.sh
run() { for n in on off off2 on2; do
  e=ATLAS_DECODE_ATTN_LONG_GATED=$([ ${n%2} = on ] && echo 1 || echo 0)
  PLIM=90 prof $1_$n "$e" --model $2 --batch 1 --context $3; done; }
run b2048 $G/qwen3_5-35b-a3b 2048
run n4096 $G/q-nvfp4/qwen3_5-35b-a3b 4096
run n16384 $G/q-nvfp4/qwen3_5-35b-a3b 16384
for p in b2048 n4096 n16384; do for n in on off off2 on2; do printf "%-12s %s\n" ${p}_$n "$(aw ${p}_$n)"; done; done
for n in n16384_on n16384_off; do echo "-- $n"; sed -n '/^critical path/,/^between/p' $L/$n.log | grep -E "attn|rope|gate_mul|combine" | cut -c1-110; done
echo "ALL DONE"
