#!/usr/bin/env bash
# session-16 call A (lead): the unmeasured session-15 defaults: checks, then batch-1 A/Bs (bf16 gate_up GEMV ending in
# SwiGLU, attention output gate in o_proj's x load, FP8 GEMV on HFMA2), the TMA prefill GEMM rows and prefill steps,
# batch-1 defaults of the other sizes. Run from the repo root: carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 170 checks python3 tools/gpu/check_kernels.py -k "gemv " -k "fp8 h2" -k gemv_nvfp4_h2 -k gemm_sm90 -k "gemm_decode_tma tuned" --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
# a failing family's default goes off for the rest of the call (its A/B rows then compare off with off)
fails=$(python3 -c "
import json,sys
d=json.load(open('$R/checks.json')); bad=[c['case'] for c in d['cases'] if not c['passed']]
flags={'gemv swiglu':'ATLAS_GEMV_SWIGLU=0','gemv attn_gate':'ATLAS_GEMV_ATTN_GATE=0','fp8 h2':'ATLAS_QUANT_FP8_H2=0','gemm_sm90_tma':'ATLAS_GEMM_TMA=0'}
print(' '.join(sorted({v for k,v in flags.items() for b in bad if k in b})))" 2>&1)
echo "fallbacks: [$fails]"; [ -n "$fails" ] && export $fails
prof b1_8_def "X=1" --model $G/qwen3-8b --batch 1 --context 512
prof b1_8_sw0 "ATLAS_GEMV_SWIGLU=0" --model $G/qwen3-8b --batch 1 --context 512
prof b1_17_def "X=1" --model $G/qwen3-1.7b --batch 1 --context 512
prof b1_17_sw0 "ATLAS_GEMV_SWIGLU=0" --model $G/qwen3-1.7b --batch 1 --context 512
prof b1_35_def "X=1" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
prof b1_35_ag0 "ATLAS_GEMV_ATTN_GATE=0" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
prof b1_fp8_def "X=1" --model $G/q-fp8-block/qwen3-8b --batch 1 --context 512
prof b1_fp8_h20 "ATLAS_QUANT_FP8_H2=0" --model $G/q-fp8-block/qwen3-8b --batch 1 --context 512
kt pg_tma0 "ATLAS_GEMM_TMA=0" -k prefill_gemm
kt pg_tma "X=1" -k prefill_gemm
kt pg_mc "ATLAS_GEMM_TMA_MULTICAST=1" -k prefill_gemm
kt pg_pers "ATLAS_GEMM_TMA_PERSISTENT=1" -k prefill_gemm
pp() { local name=$1 envs=$2; shift 2; TAILN=0 t 90 $name env $envs python3 tools/gpu/profile_prefill.py --synthetic-seed 0 "$@" --out $R/$name.json; grep -E "tok/s|GPU|gemm" $L/$name.log | head -5 | cut -c1-160; }
pp pf_8_tma0 "ATLAS_GEMM_TMA=0" --model $G/qwen3-8b --tokens 2048
pp pf_8_tma "X=1" --model $G/qwen3-8b --tokens 2048
prof b1_06_def "X=1" --model $G/qwen3-0.6b --batch 1 --context 512
prof b1_4_def "X=1" --model $G/qwen3-4b --batch 1 --context 512
prof b1_l8_def "X=1" --model $G/llama-3.1-8b --batch 1 --context 512
prof b1_l8_sw0 "ATLAS_GEMV_SWIGLU=0" --model $G/llama-3.1-8b --batch 1 --context 512
prof b1_35n_def "X=1" --model $G/q-nvfp4/qwen3_5-35b-a3b --batch 1 --context 512
echo "ALL DONE"
