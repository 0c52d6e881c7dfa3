#!/usr/bin/env bash
# session-19 call A (lead): the gated D-256 long attention (ATLAS_DECODE_ATTN_LONG_GATE=1: the output gate applied
# where the attention writes its output, no sigmoid_gate_mul launch before o_proj, late trigger at batch 1) and the
# GDN decode late trigger (ATLAS_GDN_DECODE_LATE_TRIGGER=1) on Qwen3.5-35B-A3B batch 1, both orders; their checks,
# and the one-sequence late-trigger long attention cases session 18 could not run. Kernels: the fda231e2 set.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 240 checks python3 tools/gpu/check_kernels.py -k late -k gated -k gdn_decode --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
b1() { prof "$1" "$2" --model "$3" --batch ${4:-1} --context 512; }
GA=ATLAS_DECODE_ATTN_LONG_GATE=1; GL=ATLAS_GDN_DECODE_LATE_TRIGGER=1
b1 d35 "X=1" $G/qwen3_5-35b-a3b
b1 g35 "$GA" $G/qwen3_5-35b-a3b
b1 l35 "$GL" $G/qwen3_5-35b-a3b
b1 gl35 "$GA $GL" $G/qwen3_5-35b-a3b
b1 gl35_2 "$GA $GL" $G/qwen3_5-35b-a3b
b1 l35_2 "$GL" $G/qwen3_5-35b-a3b
b1 g35_2 "$GA" $G/qwen3_5-35b-a3b
b1 d35_2 "X=1" $G/qwen3_5-35b-a3b
b1 dn35 "X=1" $G/q-nvfp4/qwen3_5-35b-a3b
b1 gln35 "$GA $GL" $G/q-nvfp4/qwen3_5-35b-a3b
b1 d30 "X=1" $G/qwen3-30b-a3b
for f in d35 gl35; do echo "-- $f"; grep -A24 "^critical path" $L/$f.log | cut -c1-110; done
echo "ALL DONE"
