#!/usr/bin/env bash
# session-12 call 3 (lead): helpers' checks, verify tiles, FP8 CUDA-core GEMV, MoE L2 twins, batch-1 long-kernel A/B
cd "$(dirname "$0")"; source ./head.sh
TAILN=1 t 60 warm python3 tools/gpu/warm_jit.py
TAILN=3 t 170 checks python3 tools/gpu/check_kernels.py -k "verify cluster" -k gemv_fp8 -k gemv_qd_fp8 -k moe_down -k moe_gate -k "l2 t1" -k "gemv ring" -k long_rope -k decode_rope -k gemm_decode_tma --out $R/checks.json
grep -E "FAIL|differ|Traceback" $L/checks.log | head -8 | cut -c1-220
P1="python3 tools/gpu/profile_decode.py --synthetic-seed 0 --batch 1"
# verification tiles (helper verify)
for K in 3 4; do TAILN=0 t 60 pv$K env ATLAS_PDL=0 $P1 --model $G/qwen3-8b --context 512 --verify $K --out $R/pv$K.json; grep -E "decode_attn_verify|GPU per step \(graph" $L/pv$K.log | head -3 | cut -c1-140; done
# FP8 CUDA-core GEMV (helper quant), bf16 reference step
for q in 1 0; do TAILN=0 t 60 pfp8_core$q env ATLAS_QUANT_FP8_CORE=$q $P1 --model $G/q-fp8-block/qwen3-8b --context 512 --out $R/pfp8_core$q.json; hdr pfp8_core$q; done
TAILN=0 t 60 pfp8_core1_pdl0 env ATLAS_PDL=0 $P1 --model $G/q-fp8-block/qwen3-8b --context 512 --out $R/pfp8_core1_pdl0.json; grep -E "GPU per step|gemv_" $L/pfp8_core1_pdl0.log | head -4 | cut -c1-120
# MoE L2 twins (helper moe35), PDL on
for v in "def:" "down:ATLAS_MOE_DOWN_L2=1" "gu:ATLAS_MOE_GATE_UP_L2=1" "both:ATLAS_MOE_DOWN_L2=1 ATLAS_MOE_GATE_UP_L2=1"; do n=${v%%:*}; e=${v#*:}
  TAILN=0 t 60 m35_$n env $e $P1 --model $G/qwen3_5-35b-a3b --context 512 --out $R/m35_$n.json; hdr m35_$n; done
for v in "def:" "both:ATLAS_MOE_DOWN_L2=1 ATLAS_MOE_GATE_UP_L2=1"; do n=${v%%:*}; e=${v#*:}
  TAILN=0 t 60 m30_$n env $e $P1 --model $G/qwen3-30b-a3b --context 512 --out $R/m30_$n.json; hdr m30_$n; done
# batch 1 on the long kernel (min batch 1) vs the clustered latency kernel (default min batch 2)
for mc in qwen3-8b:512 qwen3-8b:1536 qwen3-0.6b:512 qwen3_5-35b-a3b:512; do m=${mc%%:*}; c=${mc##*:}; for mb in 2 1; do
  TAILN=0 t 60 b1_${m}_c${c}_mb$mb env ATLAS_DECODE_ATTN_LONG_MIN_BATCH=$mb $P1 --model $G/$m --context $c --out $R/b1_${m}_c${c}_mb$mb.json; hdr b1_${m}_c${c}_mb$mb
done; done
for v in "def:" "mb1apart:ATLAS_DECODE_ATTN_LONG_MIN_BATCH=1 ATLAS_DECODE_ATTN_VERIFY_MAX_BATCH=0"; do n=${v%%:*}; e=${v#*:}
  TAILN=0 t 120 spec_$n env $e python3 tools/gpu/bench_spec.py --model $G/qwen3-8b --synthetic-seed 0 --batches 1 --max-k 4 --k 3 --accept 0.7 --new 512 --prompts 3 --steps 20 --out $R/spec_$n.json
  grep -E "^ +1 " $L/spec_$n.log | cut -c1-170
done
