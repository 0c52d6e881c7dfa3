#!/usr/bin/env bash
# Session 55, for a call with under ~500 s of device time left (call.sh needs ~575 s on an
# H200). On an H200: batch 1 of the two MoE flagships and three dense configs, then the four
# gate records at this HEAD (open since session 49). On any other card: ab.sh cut to its
# trigger A/B on the 35B and Llama-3.1-8B.
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 \
  || AB_SHORT=${AB_SHORT:-1} exec bash bench/results/next-gpu-call/ab.sh
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
b1() { PLIM=${PL:-75} prof "$1" "${3:-X=1}" --model $2 --batch 1 --context 512 > /dev/null; }
PL=120 b1 b1_q35 $G/qwen3_5-35b-a3b; PL=120 b1 b1_q30 $G/qwen3-30b-a3b
for m in qwen3-8b qwen3-1.7b llama-3.2-1b; do b1 b1_$m $G/$m; done
# the wgmma decode GEMM at batch 1 on the H200 (gpu193 has the H100's answer: gate_up at ~91%
# of the GEMV's rate): every Qwen3-8B linear on it, against b1_qwen3-8b
b1 b1_q8_dg1 $G/qwen3-8b ATLAS_DECODE_GEMM_MIN_M=1
h200_gates
echo "== gates"; grep -h -E "PASS|FAIL|recorded" $L/gate_*.log | head -8
echo "== batch 1 x 512: GPU replay / async wall ms a step | weights GB/s over GPU time"
for n in b1_q35 b1_q30 b1_qwen3-8b b1_qwen3-1.7b b1_llama-3.2-1b b1_q8_dg1; do
  printf "%-18s %s| %s\n" $n "$(aw $n)" "$(grep -oE 'weights [0-9.]+ GB -> [0-9]+ GB/s over GPU' $L/$n.log)"; done
echo "ALL DONE"
