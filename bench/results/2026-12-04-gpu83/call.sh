#!/usr/bin/env bash
# session-23 call E: the batch-1 MoE down GEMV reading its act chunks once (default) against the per-tile reads
# (kernels_actt: -DATLAS_MOE_DOWN_ACT_ONCE=0): moe_decode checks, then Qwen3.5-35B-A3B and Qwen3-30B-A3B batch 1 x 512,
# default / per-tile / per-tile / default, and each once with PDL off (the down's own time). Repo root, carry
# [".device", ".whl"].
source tools/gpu/call_head.sh
D=$ATLAS_KERNELS_DIR; V=$PWD/.device/kernels_actt
[ -n "${SKIP_CHECKS:-}" ] || TAILN=3 t 150 checks python3 tools/gpu/check_kernels.py -m moe_decode --out $R/checks.json
grep -E "FAIL|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
b1() { PLIM=100 prof "$1" "ATLAS_KERNELS_DIR=$2 ${4:-}" --model $3 --batch 1 --context 512; }
b1 q35_d $D $G/qwen3_5-35b-a3b
b1 q35_t $V $G/qwen3_5-35b-a3b
b1 q30_d $D $G/qwen3-30b-a3b
b1 q30_t $V $G/qwen3-30b-a3b
b1 q35_t2 $V $G/qwen3_5-35b-a3b
b1 q35_d2 $D $G/qwen3_5-35b-a3b
b1 q30_t2 $V $G/qwen3-30b-a3b
b1 q30_d2 $D $G/qwen3-30b-a3b
b1 q35_dn $D $G/qwen3_5-35b-a3b ATLAS_PDL=0
b1 q35_tn $V $G/qwen3_5-35b-a3b ATLAS_PDL=0
echo "== batch 1 x 512, GPU ms a step (d: act once, the default; t: per tile; n: PDL off)"
for n in q35_d q35_t q35_t2 q35_d2 q30_d q30_t q30_t2 q30_d2 q35_dn q35_tn; do
  printf "%-7s %s | down %s\n" $n "$(hdr $n | head -1 | grep -oE 'replay\) [0-9.]+ ms')" \
    "$(grep -E '^moe_down_gemv' $L/$n.log | head -2 | awk '{print $(NF-1)}' | tr '\n' ' ')"; done
echo "ALL DONE"
