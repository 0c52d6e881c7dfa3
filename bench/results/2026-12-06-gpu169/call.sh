#!/usr/bin/env bash
# session-46: the gated launch by default where the qkv projection is bf16 (gated_pays), no
# switch set: Qwen3.5-35B-A3B bf16 batch 1 at 512 and 4,096 keys (expect gpu165 / gpu168's
# "on" times and the one launch in the critical path), its NVFP4 at 512 (the four launches).
source tools/gpu/call_head.sh
PLIM=60 prof d512 "" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
PLIM=60 prof d4096 "" --model $G/qwen3_5-35b-a3b --batch 1 --context 4096
PLIM=60 prof n512 "" --model $G/q-nvfp4/qwen3_5-35b-a3b --batch 1 --context 512
for n in d512 d4096 n512; do printf "%-7s %s\n" $n "$(aw $n)"
  sed -n '/^critical path/,/^between/p' $L/$n.log | grep -E "attn|rope_kv|gate_mul|combine" | cut -c1-100; done
echo "ALL DONE"
