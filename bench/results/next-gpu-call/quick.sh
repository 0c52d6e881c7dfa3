#!/usr/bin/env bash
# The A/B's first question alone, for a call with little device time left: Qwen3.5-35B-A3B
# batch 1 x 512 with the router's next-layer prefetch (24 MB) against none, both orders, then
# the expert prefetch (whole experts) once. GPU replay / async wall ms a step.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
Q35=$G/qwen3_5-35b-a3b; N24=ATLAS_MOE_ROUTER_NEXT_MB=24
PL=70 b1 q35_off X=1 $Q35; PL=70 b1 q35_n $N24 $Q35; PL=70 b1 q35_nb $N24 $Q35
PL=70 b1 q35_offb X=1 $Q35
echo "== 35B off $(aw q35_off)| next24 $(aw q35_n)| next24 $(aw q35_nb)| off $(aw q35_offb)"
PL=70 b1 q35_p ATLAS_MOE_ROUTER_PREFETCH_KB=4096 $Q35
echo "== 35B exp4096 $(aw q35_p)"
for v in off n p; do sed -n '/^critical path/,/^between/p' $L/q35_$v.log 2>/dev/null \
  | grep -E "^moe_|^gemv_bf16_single +add_rms" | cut -c1-100 | sed "s/^/q35_$v /"; done
echo "ALL DONE"
