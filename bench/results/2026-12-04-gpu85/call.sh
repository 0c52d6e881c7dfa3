#!/usr/bin/env bash
# session-24 call A (existing switches, no code change): the both-orders A/B of ATLAS_MOE_DOWN_NORM=0 (the MoE down
# writes its sum, an add_rmsnorm launch does the residual add + next norm, instead of the fused ticket + last-block
# RMSNorm) on Qwen3.5-35B-A3B, Qwen3-30B-A3B and Qwen3.5-35B-A3B NVFP4, batch 1 x 512, PDL on; then with it, the
# router variants: ATLAS_MOE_ROUTER_NORM=0 and ATLAS_MOE_ROUTE_IN_EXPERTS=1 + ATLAS_MOE_GATE_UP_TILED=1, and PDL-off
# per-kernel rows of those. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
b1() { PLIM=60 prof "$1" "$2" --model $3 --batch 1 --context 512; }
for m in "m35:$G/qwen3_5-35b-a3b" "m30:$G/qwen3-30b-a3b" "n35:$G/q-nvfp4/qwen3_5-35b-a3b"; do
  k=${m%%:*}; p=${m#*:}
  b1 ${k}_def1 "X=1" $p
  b1 ${k}_nn1 "ATLAS_MOE_DOWN_NORM=0" $p
  b1 ${k}_nn2 "ATLAS_MOE_DOWN_NORM=0" $p
  b1 ${k}_def2 "X=1" $p
done
for m in "m35:$G/qwen3_5-35b-a3b" "m30:$G/qwen3-30b-a3b"; do
  k=${m%%:*}; p=${m#*:}
  b1 ${k}_nn_rn "ATLAS_MOE_DOWN_NORM=0 ATLAS_MOE_ROUTER_NORM=0" $p
  b1 ${k}_nn_rie "ATLAS_MOE_DOWN_NORM=0 ATLAS_MOE_ROUTE_IN_EXPERTS=1 ATLAS_MOE_GATE_UP_TILED=1" $p
  b1 ${k}_nn_off "ATLAS_MOE_DOWN_NORM=0 ATLAS_PDL=0" $p
  b1 ${k}_nn_rie_off "ATLAS_MOE_DOWN_NORM=0 ATLAS_MOE_ROUTE_IN_EXPERTS=1 ATLAS_MOE_GATE_UP_TILED=1 ATLAS_PDL=0" $p
done
echo "== batch 1 x 512, GPU ms a step (graph replay), PDL on"
for k in m35 m30 n35; do
  echo "$k  default $(step ${k}_def1) / $(step ${k}_def2)   DOWN_NORM=0 $(step ${k}_nn1) / $(step ${k}_nn2)"
done
for k in m35 m30; do
  echo "$k  DOWN_NORM=0 + ROUTER_NORM=0 $(step ${k}_nn_rn)   + ROUTE_IN_EXPERTS $(step ${k}_nn_rie)   (PDL off: $(step ${k}_nn_off) / rie $(step ${k}_nn_rie_off))"
  for v in nn_off nn_rie_off; do
    echo "  $v:"; sed -n '/^kernel  /,/^critical/p' $L/${k}_$v.log | grep -E "^moe_|^add_rmsnorm" | awk '{printf "    %-42s %s calls %s us\n", $1, $2, $4}'
  done
done
echo "ALL DONE"
