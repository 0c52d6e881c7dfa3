#!/usr/bin/env bash
# session-12 call 2 (lead): batch 2-4 decode attention route A/B (cluster kernel vs the long tensor-core kernel)
cd "$(dirname "$0")"; source ./head.sh
TAILN=1 t 60 warm python3 tools/gpu/warm_jit.py
prof() { local name=$1; shift; TAILN=${TN:-3} t 90 $name env "$@" --out $R/$name.json; hdr $name; grep -E "decode_attn" $L/$name.log | head -2 | cut -c1-120; }
for mc in qwen3-8b:512 qwen3-8b:1536 qwen3-0.6b:1536; do m=${mc%%:*}; c=${mc##*:}; for b in 2 4; do for mb in 8 2; do
  TN=0 prof ab_${m}_b${b}_c${c}_mb${mb} ATLAS_DECODE_ATTN_LONG_MIN_BATCH=$mb python3 tools/gpu/profile_decode.py --model $G/$m --synthetic-seed 0 --batch $b --context $c
done; done; done
for mb in 8 1; do TN=0 prof ab_qwen3-8b_b1_c512_mb$mb ATLAS_DECODE_ATTN_LONG_MIN_BATCH=$mb python3 tools/gpu/profile_decode.py --model $G/qwen3-8b --synthetic-seed 0 --batch 1 --context 512; done
for mb in 8 2; do TN=0 prof ab_qwen3-30b-a3b_b4_c1536_mb$mb ATLAS_DECODE_ATTN_LONG_MIN_BATCH=$mb python3 tools/gpu/profile_decode.py --model $G/qwen3-30b-a3b --synthetic-seed 0 --batch 4 --context 1536; done
