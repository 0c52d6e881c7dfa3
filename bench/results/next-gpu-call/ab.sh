#!/usr/bin/env bash
# Session 51's A/B (any card; on an H200 after the standings, as a warm follow-up call): the
# batch-1 cluster router asking L2 for the routed experts' gate/up weights once it has routed
# (ATLAS_MOE_ROUTER_PREFETCH_KB=N, N KB an expert: half from its gate rows, half from its up
# rows; moe_router.cu prefetch_experts). Expected: the gate/up's critical stretch after the
# router (14.33 us of the 35B's, gpu179 H100) shorter by the grid completion + PDL release +
# ids read it no longer waits for (~1-2 us a layer, the 35B step -1..-3%), the router's own
# stretch (6.55 us) about even. Qwen3.5-35B-A3B at 1,024 (8 MB a layer) and 4,096 KB (the
# whole 4 MiB of each expert, 33.5 MB); Qwen3-30B-A3B at 2,048 (16 MB of its 50). Both orders.
# Then the late add + norm rule on configs it was not set from (session 50's plan).
# batch 1 x 512, GPU replay / async wall ms a step.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
TAILN=3 t 150 chk python3 tools/gpu/check_kernels.py -m moe_router -k cluster
Q35=$G/qwen3_5-35b-a3b; P1=ATLAS_MOE_ROUTER_PREFETCH_KB=1024; P4=ATLAS_MOE_ROUTER_PREFETCH_KB=4096
PL=80 b1 q35_off X=1 $Q35; PL=80 b1 q35_p1 $P1 $Q35; PL=80 b1 q35_p4 $P4 $Q35
PL=80 b1 q35_p4b $P4 $Q35; PL=80 b1 q35_p1b $P1 $Q35; PL=80 b1 q35_offb X=1 $Q35
echo "== 35B off $(aw q35_off)| 1024 $(aw q35_p1)| 4096 $(aw q35_p4)| 4096 $(aw q35_p4b)|" \
  "1024 $(aw q35_p1b)| off $(aw q35_offb)"
for v in off p1 p4; do grep -E "^moe_gate_up|^moe_add_rmsnorm_gate|^moe_down" $L/q35_$v.log \
  | cut -c1-100 | sed "s/^/q35 $v /"; done
Q30=$G/qwen3-30b-a3b; P2=ATLAS_MOE_ROUTER_PREFETCH_KB=2048
PL=80 b1 q30_off X=1 $Q30; PL=80 b1 q30_p2 $P2 $Q30; PL=80 b1 q30_p2b $P2 $Q30
PL=80 b1 q30_offb X=1 $Q30
echo "== 30B off $(aw q30_off)| 2048 $(aw q30_p2)| 2048 $(aw q30_p2b)| off $(aw q30_offb)"
for v in off p2; do grep -E "^moe_gate_up|^moe_add_rmsnorm_gate" $L/q30_$v.log \
  | cut -c1-100 | sed "s/^/q30 $v /"; done
OFF=ATLAS_NORM_LATE=0
for m in llama-3.2-3b llama-3.1-8b q-fp8-block-head/qwen3-8b qwen2.5-1.5b; do
  n=${m//\//_}
  PL=50 b1 ${n}_on X=1 $G/$m; PL=50 b1 ${n}_off $OFF $G/$m; PL=50 b1 ${n}_offb $OFF $G/$m
  PL=50 b1 ${n}_onb X=1 $G/$m
  echo "== $m late $(aw ${n}_on)| off $(aw ${n}_off)| off $(aw ${n}_offb)| late $(aw ${n}_onb)"
done
echo "ALL DONE"
