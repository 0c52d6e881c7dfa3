#!/usr/bin/env bash
# session-23 call D (diagnosis, no code change): where the batch-1 MoE block's time goes. Qwen3.5-35B-A3B and
# Qwen3-30B-A3B batch 1 x 512 with PDL off (each kernel's own time in the graph) beside PDL on, and Nsight Compute on
# the router, gate/up and down launches of the decode steps (each kernel alone). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
b1() { PLIM=100 prof "$1" "$2" --model $3 --batch 1 --context 512; }
b1 q35_pdl "X=1" $G/qwen3_5-35b-a3b
b1 q35_nopdl "ATLAS_PDL=0" $G/qwen3_5-35b-a3b
b1 q30_pdl "X=1" $G/qwen3-30b-a3b
b1 q30_nopdl "ATLAS_PDL=0" $G/qwen3-30b-a3b
SEC="--section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats"
nc() {  # name model
  TAILN=0 t 120 "ncu_$1" env ATLAS_PDL=0 $NCU --clock-control none --cache-control none \
    -k "regex:moe_(down_gemv|add_rmsnorm_gate|gate_up_gemv)" --launch-skip 60 --launch-count 6 $SEC \
    python3 tools/gpu/profile_decode.py --synthetic-seed 0 --model $2 --batch 1 --context 512
  grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Waves Per SM|Warp Cycles Per Issued" $L/ncu_$1.log | head -60 | cut -c1-150
}
nc q35 $G/qwen3_5-35b-a3b
nc q30 $G/qwen3-30b-a3b
for n in q35_pdl q35_nopdl q30_pdl q30_nopdl; do echo "-- $n: $(hdr $n | head -1 | grep -oE 'replay\) [0-9.]+ ms')"
  sed -n '/^kernel  /,/^critical/p' $L/$n.log | grep -E "moe_|gemv_bf16_single |gated_delta|decode_attn" | head -8 | cut -c1-100; done
echo "ALL DONE"
