#!/usr/bin/env bash
# session-24 call B: the batch-1 MoE router as one 16-block cluster (ATLAS_MOE_ROUTER_CLUSTER=1, commit 18e3b666):
# its device checks (moe_router, the cluster cases and the rest), then Qwen3.5-35B-A3B and Qwen3-30B-A3B batch 1 x 512
# with the separate add_rmsnorm after the down (ATLAS_MOE_DOWN_NORM=0, gpu85's winner), cluster off / on / on / off,
# and the PDL-off per-kernel rows of each. Repo root, carry [".device", ".whl"].
tar xJf .device/tree.tar.xz  # the committed py/ and tools/ (a helper's edits in progress stay out)
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
TAILN=3 t 200 checks python3 tools/gpu/check_kernels.py -m moe_router --out $R/checks.json
grep -E "FAIL|Traceback|rror|passed" $L/checks.log | head -8 | cut -c1-200
b1() { PLIM=60 prof "$1" "ATLAS_MOE_DOWN_NORM=0 $2" --model $3 --batch 1 --context 512; }
for m in "m35:$G/qwen3_5-35b-a3b" "m30:$G/qwen3-30b-a3b"; do
  k=${m%%:*}; p=${m#*:}
  b1 ${k}_tk1 "X=1" $p
  b1 ${k}_cl1 "ATLAS_MOE_ROUTER_CLUSTER=1" $p
  b1 ${k}_cl2 "ATLAS_MOE_ROUTER_CLUSTER=1" $p
  b1 ${k}_tk2 "X=1" $p
  b1 ${k}_tk_off "ATLAS_PDL=0" $p
  b1 ${k}_cl_off "ATLAS_MOE_ROUTER_CLUSTER=1 ATLAS_PDL=0" $p
done
echo "== batch 1 x 512, GPU ms a step (graph replay), PDL on; ATLAS_MOE_DOWN_NORM=0 throughout"
for k in m35 m30; do
  echo "$k  ticket router $(step ${k}_tk1) / $(step ${k}_tk2)   cluster router $(step ${k}_cl1) / $(step ${k}_cl2)   (PDL off: $(step ${k}_tk_off) / $(step ${k}_cl_off))"
  for v in tk_off cl_off cl1; do
    echo "  $v:"; sed -n '/^kernel  /,/^attention/p' $L/${k}_$v.log | grep -E "^moe_|^add_rmsnorm" | awk '{printf "    %-42s %-32s %s %s %s\n", $1, $2, $3, $4, $5}'
  done
done
echo "ALL DONE"
