#!/usr/bin/env bash
# session-23 call C: batch-1 MoE gate/up asking L2 for the down launch's expert weights (ATLAS_MOE_DOWN_L2_PREFETCH):
# the moe_decode checks (its new cases), then Qwen3.5-35B-A3B and Qwen3-30B-A3B batch 1 x 512 with the switch off / on /
# on / off, and Qwen3-8B NVFP4 batch 1 on the now-default convert decode. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 150 checks python3 tools/gpu/check_kernels.py -m moe_decode --out $R/checks.json
grep -E "FAIL|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
b1() { PLIM=100 prof "$1" "$2" --model $3 --batch 1 --context 512; }
P=ATLAS_MOE_DOWN_L2_PREFETCH
b1 q35_off "$P=0" $G/qwen3_5-35b-a3b
b1 q35_on "$P=1" $G/qwen3_5-35b-a3b
b1 q30_on "$P=1" $G/qwen3-30b-a3b
b1 q30_off "$P=0" $G/qwen3-30b-a3b
b1 q35_on2 "$P=1" $G/qwen3_5-35b-a3b
b1 q35_off2 "$P=0" $G/qwen3_5-35b-a3b
b1 q30_off2 "$P=0" $G/qwen3-30b-a3b
b1 q30_on2 "$P=1" $G/qwen3-30b-a3b
b1 n4 "X=1" $G/q-nvfp4/qwen3-8b
echo "== batch 1 x 512, GPU ms a step"
for n in q35_off q35_on q35_on2 q35_off2 q30_off q30_on q30_on2 q30_off2 n4; do
  printf "%-9s %s\n" $n "$(hdr $n | head -1 | grep -oE 'replay\) [0-9.]+ ms')"; done
for n in q35_off q35_on q30_off q30_on; do echo "-- $n"; sed -n '/critical path/,/attention keys/p' $L/$n.log | grep -E "moe_|gemv_bf16_single " | head -6 | cut -c1-110; done
echo "ALL DONE"
