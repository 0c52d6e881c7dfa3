#!/usr/bin/env bash
# Session 51's A/B (any card; on an H200 after the standings, as a warm follow-up call): the
# batch-1 cluster router's two L2 prefetches, both in the window where DRAM idles under it.
# * ATLAS_MOE_ROUTER_NEXT_MB=N: after its PDL wait, the first N MB of the next layer's first
#   projection (the 30B's 21 MB qkv, the 35B's 50.6 MB GDN in_proj / 37.7 MB qkv). Expected:
#   that GEMV after the norm (30B 6.78 us, 35B 16.57 us of the critical path, H100) shorter by
#   what lands under the router (~5-6 us of DRAM time), if the lines outlast the MoE block's
#   evict-first expert stream; the gate/up a little later where the prefetch is still going.
# * ATLAS_MOE_ROUTER_PREFETCH_KB=N: once routed, N KB of each routed expert's gate/up (half
#   gate rows, half up rows). Expected: the gate/up's stretch after the router shorter by the
#   grid completion + PDL release + ids read it no longer waits for (~1-2 us a layer).
# Qwen3.5-35B-A3B (N 24 MB; 4,096 KB: whole experts), Qwen3-30B-A3B (16 MB; 2,048 KB an
# expert), both orders; then the late add + norm rule on configs it was not set from.
# batch 1 x 512, GPU replay / async wall ms a step.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=3 t 150 chk python3 tools/gpu/check_kernels.py -m moe_router -k cluster
crit() {  # the MoE block's and the next GEMV's critical-path rows of run $1
  sed -n '/^critical path/,/^between/p' $L/$1.log | grep -E "^moe_|^gemv_bf16_(lean_)?single +add_rms" \
    | cut -c1-100 | sed "s/^/$1 /"
}
# ab NAME DIR NEXT_MB PREFETCH_KB: off, next, experts, experts, next, off; then their rows
ab() {
  local n=$1 d=$2 nx=ATLAS_MOE_ROUTER_NEXT_MB=$3 px=ATLAS_MOE_ROUTER_PREFETCH_KB=$4
  b1 ${n}_off X=1 $d; b1 ${n}_n $nx $d; b1 ${n}_p $px $d; b1 ${n}_pb $px $d; b1 ${n}_nb $nx $d
  b1 ${n}_offb X=1 $d
  echo "== $n off $(aw ${n}_off)| next$3 $(aw ${n}_n)| exp$4 $(aw ${n}_p)| exp$4 $(aw ${n}_pb)|" \
    "next$3 $(aw ${n}_nb)| off $(aw ${n}_offb)"
  for v in off n p; do crit ${n}_$v; done
}
Q30=$G/qwen3-30b-a3b; Q35=$G/qwen3_5-35b-a3b
PL=80 ab q35 $Q35 24 4096
PL=60 ab q30 $Q30 16 2048
PL=60 b1 q30_n8 ATLAS_MOE_ROUTER_NEXT_MB=8 $Q30; PL=80 b1 q35_n48 ATLAS_MOE_ROUTER_NEXT_MB=48 $Q35
echo "== 30B next8 $(aw q30_n8)| 35B next48 $(aw q35_n48)"
OFF=ATLAS_NORM_LATE=0
for m in llama-3.2-3b llama-3.1-8b q-fp8-block-head/qwen3-8b qwen2.5-1.5b; do
  n=${m//\//_}
  PL=50 b1 ${n}_on X=1 $G/$m; PL=50 b1 ${n}_off $OFF $G/$m; PL=50 b1 ${n}_offb $OFF $G/$m
  PL=50 b1 ${n}_onb X=1 $G/$m
  echo "== $m late $(aw ${n}_on)| off $(aw ${n}_off)| off $(aw ${n}_offb)| late $(aw ${n}_onb)"
done
echo "ALL DONE"
