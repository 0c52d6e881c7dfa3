#!/usr/bin/env bash
# session-23 call B: the NVFP4 h2 GEMV's compile-time A/Bs (kernels_cvt: -DATLAS_NVFP4_H2_CVT=1, the E2M1 decode
# through the E4M3 convert; kernels_cvt4: that and -DATLAS_NVFP4_H2_BLOCKS_PER_SM=4, 64 registers): their checks, then
# Qwen3-8B batch 1 x 512 bf16 / FP8-block (the SwiGLU twin now default) / NVFP4 default, cvt, cvt4, default, cvt in
# one run (issue 12's ratios), and Nsight Compute on the cvt set's h2 GEMVs and on Qwen3.5-35B-A3B NVFP4's
# batch-1 MoE kernels (router, gate/up, down). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
D=$ATLAS_KERNELS_DIR; V=$PWD/.device/kernels_cvt; V4=$PWD/.device/kernels_cvt4
TAILN=3 t 100 checks_cvt env ATLAS_KERNELS_DIR=$V python3 tools/gpu/check_kernels.py -m gemv_nvfp4 --out $R/checks_cvt.json
grep -E "FAIL|Traceback|rror" $L/checks_cvt.log | head -8 | cut -c1-200
TAILN=3 t 100 checks_cvt4 env ATLAS_KERNELS_DIR=$V4 python3 tools/gpu/check_kernels.py -m gemv_nvfp4 -k h2 --out $R/checks_cvt4.json
grep -E "FAIL|Traceback|rror" $L/checks_cvt4.log | head -8 | cut -c1-200
N4=$G/q-nvfp4/qwen3-8b; F8=$G/q-fp8-block/qwen3-8b
b1() { PLIM=90 prof "$1" "ATLAS_KERNELS_DIR=$2" --model $3 --batch 1 --context 512; }
b1 bf16 $D $G/qwen3-8b
b1 fp8 $D $F8
b1 n_def $D $N4
b1 n_cvt $V $N4
b1 n_cvt4 $V4 $N4
b1 n_def2 $D $N4
b1 n_cvt2 $V $N4
SEC="--section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section Occupancy"
TAILN=0 t 110 ncu_cvt env ATLAS_PDL=0 ATLAS_KERNELS_DIR=$V $NCU --clock-control none --cache-control none \
  -k "regex:gemv_nvfp4_h2" --launch-skip 400 --launch-count 4 --metrics \
  sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fp16.avg.pct_of_peak_sustained_active \
  $SEC python3 tools/gpu/profile_decode.py --synthetic-seed 0 --model $N4 --batch 1 --context 512
grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Issue Slots Busy|highest-utilized|pipe_|Achieved Occupancy" $L/ncu_cvt.log | head -50 | cut -c1-150
TAILN=0 t 110 ncu_moe35n env ATLAS_PDL=0 $NCU --clock-control none --cache-control none -k "regex:moe_" \
  --launch-skip 300 --launch-count 3 $SEC --section WarpStateStats --section LaunchStats python3 tools/gpu/profile_decode.py \
  --synthetic-seed 0 --model $G/q-nvfp4/qwen3_5-35b-a3b --batch 1 --context 512
grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Issue Slots Busy|highest-utilized|Achieved Occupancy|Registers Per|Theoretical Occ" $L/ncu_moe35n.log | head -40 | cut -c1-150
echo "== Qwen3-8B batch 1 x 512, GPU ms a step"
for n in bf16 fp8 n_def n_cvt n_cvt4 n_def2 n_cvt2; do printf "%-8s %s\n" $n "$(hdr $n | head -1 | grep -oE 'replay\) [0-9.]+ ms')"; done
echo "ALL DONE"
