#!/usr/bin/env bash
# session-16 call C (lead): per-kernel breakdowns that add up (PDL off) on this tree's defaults, for the issues' notes
# and the next sessions: Qwen3-8B batch 64 x 1,536 and its 2,048-token prefill, Qwen3.5-35B-A3B batch 1 bf16 and NVFP4,
# Qwen3-30B-A3B batch 1; Nsight Compute on the batch-64 decode GEMMs and attention. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
prof b1_30_def "X=1" --model $G/qwen3-30b-a3b --batch 1 --context 512
prof b1_30_pdl0 "ATLAS_PDL=0" --model $G/qwen3-30b-a3b --batch 1 --context 512
prof b1_35_pdl0 "ATLAS_PDL=0" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
prof b1_35n_pdl0 "ATLAS_PDL=0" --model $G/q-nvfp4/qwen3_5-35b-a3b --batch 1 --context 512
PLIM=90 prof b64_8_def "X=1" --model $G/qwen3-8b --batch 64 --context 1536
PLIM=90 prof b64_8_pdl0 "ATLAS_PDL=0" --model $G/qwen3-8b --batch 64 --context 1536
for f in b1_30_pdl0 b1_35_pdl0 b1_35n_pdl0 b64_8_pdl0; do echo "-- $f"; grep -E "^[a-z_0-9]+ +[0-9]+ " $L/$f.log | head -9 | cut -c1-100; done
TAILN=0 t 90 pf_8_pdl0 env ATLAS_PDL=0 python3 tools/gpu/profile_prefill.py --synthetic-seed 0 --model $G/qwen3-8b --tokens 2048 --out $R/pf_8_pdl0.json
grep -E "tok/s|^[a-z_0-9]+ +[0-9]+ " $L/pf_8_pdl0.log | head -9 | cut -c1-100
ncu_row() { local name=$1 kern=$2 sel=$3; TAILN=0 t 120 ncu_$name ncu --kernel-name regex:$kern --launch-skip 3 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats python3 tools/gpu/bench_kernels.py --repeats 5 -k "$sel" --out-dir $R/ncu_$name; grep -E "DRAM Throughput|Memory Throughput|Duration|Registers Per|Achieved Occupancy|Grid Size|Block Size|Stall|Warp Cycles Per Issued|Compute \(SM\)" $L/ncu_$name.log | head -16 | cut -c1-120; }
ncu_row oproj64 gemm_decode_tma "qwen3-8b o_proj b64 dgemm"
ncu_row gateup64 gemm_decode_tma "qwen3-8b gate_up b64 dgemm"
ncu_row attn64 decode_attn "qwen3-8b b64 hist1536 +rope"
echo "ALL DONE"
