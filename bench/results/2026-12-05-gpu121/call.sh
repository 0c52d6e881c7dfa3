#!/usr/bin/env bash
# session-33 call E: the batch-1 split merge staged in shared memory (56c714ad + 13bfc38a: the last block's partial reads in
# one L2 trip for up to 11 heads, where a GQA group of 8 took two) on the device: its
# check cases, then GPU ms a step against the tree before it (.device/kernels_oldmerge: 56c714ad~1's
# attention_long, the only module that differs), old / new / new / old on the groups of 8 and 6, new / old on the
# groups of 2 and 4; Qwen3.5-35B-A3B's D-256 group of 8 on the combine (its default) against the new merge
# (ATLAS_DECODE_ATTN_LONG_MERGE=1). Synthetic weights (seed 0), batch 1 x 512 keys, PDL on. Also the sampler's check cases (general
# logit_bias values, 88b8a563) and MiniMax-M2 2 of 62 layers against transformers again, its config now stating
# partial_rotary_factor beside rotary_dim (gpu119's 0.48 was transformers 5.17 ignoring rotary_dim).
# Repo root, carry [".device", ".whl"]; .device/head_src.tgz is `git archive HEAD py tools kernels` of the call.
tar xzf .device/head_src.tgz || exit 3
source tools/gpu/call_head.sh
TAILN=3 t 200 checks python3 tools/gpu/check_kernels.py -m attention_long -m sampler --out $R/checks.json
OLD="ATLAS_KERNELS_DIR=$PWD/.device/kernels_oldmerge"
b1() { PLIM=90 prof "$1" "$2" --model $G/$3 --batch 1 --context 512; }
b1 m30_old "$OLD" qwen3-30b-a3b; b1 m30_new "X=1" qwen3-30b-a3b; b1 m30_new2 "X=1" qwen3-30b-a3b; b1 m30_old2 "$OLD" qwen3-30b-a3b
b1 q15_old "$OLD" qwen2.5-1.5b; b1 q15_new "X=1" qwen2.5-1.5b; b1 q15_new2 "X=1" qwen2.5-1.5b; b1 q15_old2 "$OLD" qwen2.5-1.5b
b1 d06_new "X=1" qwen3-0.6b; b1 d06_old "$OLD" qwen3-0.6b
b1 d8_new "X=1" qwen3-8b; b1 d8_old "$OLD" qwen3-8b
b1 m35_comb "X=1" qwen3_5-35b-a3b; b1 m35_merge "ATLAS_DECODE_ATTN_LONG_MERGE=1" qwen3_5-35b-a3b
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
echo "== GPU ms a step (graph replay): old / new / new / old"
for m in m30 q15; do echo "$m $(step ${m}_old) $(step ${m}_new) $(step ${m}_new2) $(step ${m}_old2)"; done
for m in d06 d8; do echo "$m old $(step ${m}_old) new $(step ${m}_new)"; done
echo "m35 combine $(step m35_comb) merged $(step m35_merge)"
TAILN=2 t 150 mk_mm2 python3 tools/make_fixtures.py --config minimax-m2-2l --device cuda --out $C/minimax-m2-2l
TAILN=6 t 120 par_mm2 python3 tools/gpu/model_parity.py --backend cuda --model $C/minimax-m2-2l --tail \
  --out $R/parity_minimax-m2-2l.json
echo "ALL DONE"
