#!/usr/bin/env bash
# session-23 call A: the FP8 convert GEMV's SwiGLU twin (gemv_fp8_cvt_swiglu_bf16_single): its checks, then Qwen3-8B
# FP8-block batch 1 with ATLAS_QUANT_FP8_CORE_SWIGLU on / off / on; Nsight Compute on the batch-1 GEMVs (NVFP4 h2,
# FP8 convert, bf16) for their pipe utilization, issue and stall figures. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
TAILN=3 t 130 checks python3 tools/gpu/check_kernels.py -m gemv_fp8 --out $R/checks.json
grep -E "FAIL|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
F8=$G/q-fp8-block/qwen3-8b
PLIM=90 prof f8_on "ATLAS_QUANT_FP8_CORE_SWIGLU=1" --model $F8 --batch 1 --context 512
PLIM=90 prof f8_off "ATLAS_QUANT_FP8_CORE_SWIGLU=0" --model $F8 --batch 1 --context 512
SEC="--section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section Occupancy --section InstructionStats"
nc() {  # name regex model [env]
  TAILN=0 t 110 "ncu_$1" env ATLAS_PDL=0 ${4:-} $NCU --clock-control none --cache-control none -k "regex:$2" \
    --launch-skip 400 --launch-count 4 $SEC python3 tools/gpu/profile_decode.py --synthetic-seed 0 --model $3 \
    --batch 1 --context 512
  grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Issue Slots Busy|Executed Ipc A|Achieved Occupancy|Registers Per|Block Size|Grid Size" $L/ncu_$1.log | head -60 | cut -c1-150
}
nc nvfp4 gemv_nvfp4_h2 $G/q-nvfp4/qwen3-8b
nc fp8 gemv_fp8_cvt $F8 ATLAS_QUANT_FP8_CORE_SWIGLU=1
PLIM=90 prof f8_on2 "ATLAS_QUANT_FP8_CORE_SWIGLU=1" --model $F8 --batch 1 --context 512
nc bf16 "gemv_bf16_single|gemv_swiglu_bf16" $G/qwen3-8b
echo "== FP8-block b1 GPU ms a step: swiglu twin on / off / on"
for n in f8_on f8_off f8_on2; do printf "%-8s %s\n" $n "$(hdr $n | head -1 | cut -c1-120)"; done
echo "ALL DONE"
