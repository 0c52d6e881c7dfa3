#!/usr/bin/env bash
# session-25 call G: Qwen3-30B-A3B batch 1 x 512 at the fixed tree (gpu95's run merged and then combined its
# attention: a routing slip), and the moe_decode device checks again (gpu95: 6 of 213 failed on moe_down_sum t2,
# a kernel unchanged since gpu87's 359/359). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
step() { hdr "$1" | head -1 | grep -oE 'replay\) [0-9.]+' | cut -d' ' -f2; }
PLIM=45 prof m30 "X=1" --model $G/qwen3-30b-a3b --batch 1 --context 512
TAILN=2 t 100 checks python3 tools/gpu/check_kernels.py -m moe_decode --out $R/checks.json
grep -E "FAIL" $L/checks.log | cut -c1-160 | head -8
echo "== Qwen3-30B-A3B batch 1 x 512: $(step m30) ms a step"
echo "ALL DONE"
