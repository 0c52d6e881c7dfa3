#!/usr/bin/env bash
# Prepared in session 57 for the persistent FP8 tensor-core decode GEMM (gemm_decode_fp8.cu,
# ATLAS_QUANT_FP8_WGMMA=1): clusters hold their tiles in a loop, stage x once, stream the ring
# across tiles and sum split-K partials on mbarriers (gpu198's trace of the one-tile form: x
# staging ~5 us a block, a 1.5 us cluster epilogue, gate_up's 768 blocks at 50 us = 2 TB/s).
# Any card: its check cases (30: three new ones give clusters several tiles), the phase trace
# of Qwen3-8B's projections, the b1 FP8 kernel rows (GEMVs vs wg), Qwen3-8B FP8 batch 1 x 512
# default / wgmma / default (+ the LM-head-quantized checkpoint both ways, bf16 for the ratio).
# On an H200 also the four gate records.
# Expectation (H100, gpu198 the baseline): gate_up + SwiGLU 40.4 -> ~35 us (copy rate, the
# GEMV's 34.6), LM head unchanged (~198-202), qkv / o_proj / down ~unchanged (one tile a
# cluster: the persistence changes only their epilogue's barriers, a few hundred ns).
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
TAILN=3 t 240 chk_fp8 python3 tools/gpu/check_kernels.py -m gemm_decode_fp8
grep -E " FAIL" $L/chk_fp8.log | cut -c1-200
TAILN=12 t 90 trace_fp8 python3 tools/gpu/trace_decode_fp8.py
KLIM=150 kt f8 X=1 -k "qwen3-8b qkv b1 fp8-block" -k "qwen3-8b o_proj b1 fp8-block" \
  -k "qwen3-8b gate_up b1 fp8-block" -k "qwen3-8b down b1 fp8-block" \
  -k "qwen3-8b gate_up+swiglu b1 fp8-block" -k "qwen3-8b lm_head b1 fp8-block" | grep -vE " (ring|n1|n2|tc|h2) "
F8=$G/q-fp8-block/qwen3-8b; F8H=$G/q-fp8-block-head/qwen3-8b; WG=ATLAS_QUANT_FP8_WGMMA=1
for v in def:X=1 wg:$WG defb:X=1; do
  PLIM=60 prof f8_${v%%:*} "${v#*:}" --model $F8 --batch 1 --context 512 > /dev/null; done
PLIM=60 prof bf16 X=1 --model $G/qwen3-8b --batch 1 --context 512 > /dev/null
for v in def:X=1 wg:$WG; do
  PLIM=60 prof f8h_${v%%:*} "${v#*:}" --model $F8H --batch 1 --context 512 > /dev/null; done
echo "== Qwen3-8B batch 1 x 512: GPU replay / async wall ms a step"
for n in f8_def f8_wg f8_defb bf16 f8h_def f8h_wg; do printf "%-8s %s\n" $n "$(aw $n)"; done
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "ALL DONE"; exit 0; }
h200_gates
echo "== gates"; grep -h -E "PASS|FAIL|recorded" $L/gate_*.log 2>/dev/null | head -8
echo "ALL DONE"
