#!/usr/bin/env bash
# session-24 call C: (1) device checks of the modules touched today: gemv (the add_rmsnorm folded into the batch-1
# GEMV, ATLAS_GEMV_NORM_IN: its cases demand the unfused pair's bits), moe_decode / moe_decode_quant (the fused down
# + norm tail removed), moe_router; (2) ATLAS_GEMV_NORM_IN off / on / on / off at batch 1 x 512 on Qwen3.5-35B-A3B,
# Qwen3-30B-A3B, Qwen3-8B and Qwen3-0.6B (bf16), with PDL-off per-kernel rows; (3) the NVFP4 35B A/B of the quantized
# down's removed norm tail: tree c3b0edf4 (its PTX as the `old` set) against this tree with the ticket router
# (ATLAS_MOE_ROUTER_CLUSTER=0, as c3b0edf4 had), old / new / new / old. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
TAILN=3 t 280 checks python3 tools/gpu/check_kernels.py -m gemv -m moe_decode -m moe_decode_quant -m moe_router --out $R/checks.json
grep -E "FAIL|Traceback|rror|passed" $L/checks.log | head -8 | cut -c1-200
b1() { PLIM=60 prof "$1" "$2" --model $3 --batch 1 --context 512; }
for m in "m35:$G/qwen3_5-35b-a3b" "m30:$G/qwen3-30b-a3b" "d8:$G/qwen3-8b" "d06:$G/qwen3-0.6b"; do
  k=${m%%:*}; p=${m#*:}
  b1 ${k}_off1 "X=1" $p
  b1 ${k}_on1 "ATLAS_GEMV_NORM_IN=1" $p
  b1 ${k}_on2 "ATLAS_GEMV_NORM_IN=1" $p
  b1 ${k}_off2 "X=1" $p
done
for k in m35 d8; do
  p=$G/qwen3_5-35b-a3b; [ $k = d8 ] && p=$G/qwen3-8b
  b1 ${k}_on_nopdl "ATLAS_GEMV_NORM_IN=1 ATLAS_PDL=0" $p
  b1 ${k}_off_nopdl "ATLAS_PDL=0" $p
done
# the old tree (c3b0edf4) beside this one
mkdir -p /tmp/old && tar xJf .device/old_tree.tar.xz -C /tmp/old
oldprof() {
  TAILN=0 t 100 "$1" env PYTHONPATH=/tmp/old/py:/tmp/old/tools:/tmp/old/tools/gpu:/tmp/site \
    ATLAS_KERNELS_DIR=$PWD/.device/kernels_old python3 /tmp/old/tools/gpu/profile_decode.py --synthetic-seed 0 \
    --model $G/q-nvfp4/qwen3_5-35b-a3b --batch 1 --context 512 --out "$R/$1.json"
  echo "  $1: $(hdr "$1" | head -1 | cut -c1-150)"
}
N=$G/q-nvfp4/qwen3_5-35b-a3b
oldprof n35_old1
b1 n35_new1 "ATLAS_MOE_ROUTER_CLUSTER=0" $N
b1 n35_new2 "ATLAS_MOE_ROUTER_CLUSTER=0" $N
oldprof n35_old2
b1 n35_cl "X=1" $N
b1 f35_cl "X=1" $G/q-fp8-block/qwen3_5-35b-a3b
echo "== batch 1 x 512, GPU ms a step (graph replay), PDL on"
for k in m35 m30 d8 d06; do
  echo "$k  add_rmsnorm launch $(step ${k}_off1) / $(step ${k}_off2)   ATLAS_GEMV_NORM_IN=1 $(step ${k}_on1) / $(step ${k}_on2)"
done
for k in m35 d8; do
  echo "$k  PDL off: off $(step ${k}_off_nopdl) / on $(step ${k}_on_nopdl)"
  for v in off_nopdl on_nopdl on1; do
    echo "  $v:"; sed -n '/^kernel  /,/^attention/p' $L/${k}_$v.log | grep -E "^gemv_|^add_rmsnorm" | awk '{printf "    %-42s %-32s %s %s %s\n", $1, $2, $3, $4, $5}'
  done
done
echo "n35 NVFP4  old tree (fused quantized down tail) $(step n35_old1) / $(step n35_old2)   this tree, ticket router $(step n35_new1) / $(step n35_new2)   cluster router (default) $(step n35_cl)"
echo "f35 FP8-block default $(step f35_cl)"
echo "ALL DONE"
