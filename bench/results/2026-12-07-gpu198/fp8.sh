#!/usr/bin/env bash
# Prepared in session 56 for the FP8 tensor-core decode GEMM (gemm_decode_fp8.cu,
# ATLAS_QUANT_FP8_WGMMA=1; H100 so far: checks 25/25 at gpu196, 19% slower a Qwen3-8B FP8
# step at gpu195, every larger split slower at gpu197). Any card: its 24 check cases, the
# phase trace of its Qwen3-8B projections (where a block's fixed microseconds go), the b1 FP8
# kernel rows (the GEMVs, the wg rows). On an H200 also Qwen3-8B FP8 batch 1 x 512 default /
# wgmma / default, the LM-head-quantized checkpoint both ways, bf16 for the ratio, then the
# four gate records.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
TAILN=3 t 240 chk_fp8 python3 tools/gpu/check_kernels.py -m gemm_decode_fp8
grep -E " FAIL" $L/chk_fp8.log | cut -c1-200
TAILN=12 t 90 trace_fp8 python3 tools/gpu/trace_decode_fp8.py  # where a block's time goes
KLIM=150 kt f8 X=1 -k "qwen3-8b qkv b1 fp8-block" -k "qwen3-8b o_proj b1 fp8-block" \
  -k "qwen3-8b gate_up b1 fp8-block" -k "qwen3-8b down b1 fp8-block" \
  -k "qwen3-8b gate_up+swiglu b1 fp8-block" -k "qwen3-8b lm_head b1 fp8-block"
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "ALL DONE"; exit 0; }
F8=$G/q-fp8-block/qwen3-8b; F8H=$G/q-fp8-block-head/qwen3-8b; WG=ATLAS_QUANT_FP8_WGMMA=1
for v in def:X=1 wg:$WG defb:X=1; do
  PLIM=60 prof f8_${v%%:*} "${v#*:}" --model $F8 --batch 1 --context 512 > /dev/null; done
PLIM=60 prof bf16 X=1 --model $G/qwen3-8b --batch 1 --context 512 > /dev/null
for v in def:X=1 wg:$WG; do
  PLIM=60 prof f8h_${v%%:*} "${v#*:}" --model $F8H --batch 1 --context 512 > /dev/null; done
echo "== Qwen3-8B batch 1 x 512: GPU replay / async wall ms a step"
for n in f8_def f8_wg f8_defb bf16 f8h_def f8h_wg; do printf "%-8s %s\n" $n "$(aw $n)"; done
h200_gates
echo "== gates"; grep -h -E "PASS|FAIL|recorded" $L/gate_*.log 2>/dev/null | head -8
echo "ALL DONE"
