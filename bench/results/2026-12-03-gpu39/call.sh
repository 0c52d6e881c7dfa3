#!/usr/bin/env bash
# session-14 call B (lead): checks of the merged session-13 work, kernel rows and decode A/Bs to choose defaults:
# decode GEMM any split, b64 attention entries, batch 1 on the tensor-core attention (b1spec), MoE router norm,
# the 35B size leaf, NVFP4 h2, FP8 core chunks
cd "$(dirname "$0")"; source ./head.sh
TAILN=3 t 170 checks python3 tools/gpu/check_kernels.py -k split3 -k split5 -k split6 -k split7 -k long_rope -k moe_gate_topk -k moe_topk -k nvfp4_h2 -k gemv_fp8_cvt -k verify -k long -k "row invariance" -k decode_rope --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -12 | cut -c1-200
kt() { local name=$1 envs=$2; shift 2; TAILN=0 t 90 kt_$name env $envs python3 tools/gpu/bench_kernels.py --repeats 40 "$@" --out-dir $R/kt_$name; grep -E "^\| " $L/kt_$name.log | grep -v "^| kernel\|^|---" | awk -F'|' '{printf "  %-44s %8s %8s %6s %5s\n", substr($3,1,44), $6, $7, $8, $10}'; }
prof() { local name=$1 envs=$2; shift 2; TAILN=0 t 100 $name env $envs python3 tools/gpu/profile_decode.py --synthetic-seed 0 "$@" --out $R/$name.json; echo "  $name: $(hdr $name | head -1 | cut -c1-120)"; grep -E "attention keys" $L/$name.log | head -1 | cut -c1-160; }
prof b64_def "X=1" --model $G/qwen3-8b --batch 64 --context 1536
prof b64_any "ATLAS_DECODE_GEMM_ANY_SPLIT=1" --model $G/qwen3-8b --batch 64 --context 1536
prof b1_06_def "X=1" --model $G/qwen3-0.6b --batch 1 --context 512
prof b1_06_old "ATLAS_DECODE_ATTN_LONG_MIN_BATCH=2" --model $G/qwen3-0.6b --batch 1 --context 512
prof b1_8_def "X=1" --model $G/qwen3-8b --batch 1 --context 1536
prof b1_8_old "ATLAS_DECODE_ATTN_LONG_MIN_BATCH=2" --model $G/qwen3-8b --batch 1 --context 1536
prof b1_30_def "X=1" --model $G/qwen3-30b-a3b --batch 1 --context 512
prof b1_30_old "ATLAS_DECODE_ATTN_LONG_MIN_BATCH=2" --model $G/qwen3-30b-a3b --batch 1 --context 512
prof b1_35_def "X=1" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
prof b1_35_rnorm "ATLAS_MOE_ROUTER_NORM=1" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
prof b1_30_rnorm "ATLAS_MOE_ROUTER_NORM=1" --model $G/qwen3-30b-a3b --batch 1 --context 512
prof b1_nvfp4_def "X=1" --model $G/q-nvfp4/qwen3-8b --batch 1 --context 512
prof b1_nvfp4_tc "ATLAS_QUANT_NVFP4_H2=0" --model $G/q-nvfp4/qwen3-8b --batch 1 --context 512
prof b1_bf16_8_512 "X=1" --model $G/qwen3-8b --batch 1 --context 512
prof b1_fp8_def "X=1" --model $G/q-fp8-block/qwen3-8b --batch 1 --context 512
prof b1_fp8_ch4 "ATLAS_QUANT_FP8_CORE_CHUNKS=4" --model $G/q-fp8-block/qwen3-8b --batch 1 --context 512
prof b64_ahead "ATLAS_DECODE_ATTN_LONG_L2_AHEAD=1" --model $G/qwen3-8b --batch 64 --context 1536
prof b64_staged "ATLAS_DECODE_ATTN_LONG_STAGED=1" --model $G/qwen3-8b --batch 64 --context 1536
prof b64_def_pdl0 "ATLAS_PDL=0" --model $G/qwen3-8b --batch 64 --context 1536
kt rope_def "X=1" -k "qwen3-8b b64 hist1536 +rope"
kt rope_staged "ATLAS_DECODE_ATTN_LONG_STAGED=1" -k "qwen3-8b b64 hist1536 +rope"
kt rope_ahead "ATLAS_DECODE_ATTN_LONG_L2_AHEAD=1" -k "qwen3-8b b64 hist1536 +rope"
kt dgemm_def "X=1" -k "b64 dgemm" -k "b16 dgemm"
kt dgemm_any "ATLAS_DECODE_GEMM_ANY_SPLIT=1" -k "b64 dgemm" -k "b16 dgemm"
kt nvfp4 "X=1" -k "qwen3-8b qkv b1 nvfp4" -k "qwen3-8b down b1 nvfp4" -k "qwen3-8b gate_up+swiglu b1 nvfp4" -k "qwen3-8b lm_head b1 nvfp4"
mkdir -p .device/kfam && for f in .device/kernels/*; do case $f in *qwen3.5-35b*) ;; *) ln -s $PWD/$f .device/kfam/;; esac; done
prof b1_35_family "ATLAS_KERNELS_DIR=$PWD/.device/kfam" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
prof b1_06_normgemv "ATLAS_NORM_GEMV=1" --model $G/qwen3-0.6b --batch 1 --context 512
echo "ALL DONE"
