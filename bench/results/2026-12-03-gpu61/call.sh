#!/usr/bin/env bash
# session-19 call E (lead, short): the MoE down's fused norm tail on rmsnorm_core.cuh (4c168350: the same operations,
# its PTX unpacks in another order) against its references, and the MoE steps with it. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 150 checks python3 tools/gpu/check_kernels.py -k moe_down -k moe_add_rmsnorm -k rmsnorm --out $R/checks.json
grep -E "FAIL|differ|outside|Traceback|rror" $L/checks.log | head -8 | cut -c1-200
prof q30 "X=1" --model $G/qwen3-30b-a3b --batch 1 --context 512
prof q35 "X=1" --model $G/qwen3_5-35b-a3b --batch 1 --context 512
echo "ALL DONE"
