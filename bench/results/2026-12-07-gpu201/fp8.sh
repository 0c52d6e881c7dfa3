#!/usr/bin/env bash
# Prepared in session 57 for the FP8 tensor-core decode GEMM's second persistent form
# (gemm_decode_fp8.cu, ATLAS_QUANT_FP8_WGMMA=1): split-K partials pushed into the summing
# rank's inbox with st.async (no DSMEM reads, no peer waits at the end), the weight scales
# copied into each slot by the producer warp (cp.async with the slot's mbarrier) instead of
# two global loads a k-tile in the consumers, the trace's wait totals (consumers for weights,
# producer for slots). Any card: its checks, the trace, the b1 FP8 kernel rows (GEMVs vs wg),
# Qwen3-8B FP8 batch 1 x 512 default / wgmma / default (+ the LM-head-quantized checkpoint
# both ways, bf16 for the ratio; batch 8 both ways).
# Expectation (H200 gpu199 the baseline: end - last tile 1.6-2.1 us, qkv 10.62 / o_proj 8.66 /
# gate_up 30.15 / down 17.10 us): the tail under 1 us, each projection 1-1.5 us faster; the
# consumer wait total says whether the stream (large) or the MMAs (small) bind between tiles.
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name --format=csv,noheader
TAILN=3 t 240 chk_fp8 python3 tools/gpu/check_kernels.py -m gemm_decode_fp8
grep -E " FAIL" $L/chk_fp8.log | cut -c1-200
TAILN=12 t 90 trace_fp8 python3 tools/gpu/trace_decode_fp8.py
KLIM=150 kt f8 X=1 -k "qwen3-8b qkv b1 fp8-block" -k "qwen3-8b o_proj b1 fp8-block" \
  -k "qwen3-8b gate_up b1 fp8-block" -k "qwen3-8b down b1 fp8-block" \
  -k "qwen3-8b gate_up+swiglu b1 fp8-block" -k "qwen3-8b lm_head b1 fp8-block" | grep -vE " (ring|n1|n2|tc|h2) "
F8=$G/q-fp8-block/qwen3-8b; F8H=$G/q-fp8-block-head/qwen3-8b; WG=ATLAS_QUANT_FP8_WGMMA=1
# in order of need (a call cut short keeps what ran)
for v in def:X=1 wg:$WG; do
  PLIM=60 prof f8_${v%%:*} "${v#*:}" --model $F8 --batch 1 --context 512 > /dev/null; done
for v in def:X=1 wg:$WG; do
  PLIM=60 prof f8b8_${v%%:*} "${v#*:}" --model $F8 --batch 8 --context 512 > /dev/null; done
PLIM=60 prof bf16 X=1 --model $G/qwen3-8b --batch 1 --context 512 > /dev/null
PLIM=60 prof f8_defb X=1 --model $F8 --batch 1 --context 512 > /dev/null
for v in def:X=1 wg:$WG; do
  PLIM=60 prof f8h_${v%%:*} "${v#*:}" --model $F8H --batch 1 --context 512 > /dev/null; done
echo "== Qwen3-8B batch 1 (b8: batch 8) x 512: GPU replay / async wall ms a step"
for n in f8_def f8_wg f8_defb bf16 f8h_def f8h_wg f8b8_def f8b8_wg; do
  printf "%-8s %s\n" $n "$(aw $n)"; done
echo "ALL DONE"
