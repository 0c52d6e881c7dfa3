#!/usr/bin/env bash
# session-21 call G (short): after an L2-sized sweep, does reading the attention's small inputs back into L2 (tables,
# kv_lens, positions, slots, qkv rows, norm weights, cos/sin) restore the back-to-back time? attn_step_gap.py twice.
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=17 t 150 gap_1 python3 tools/gpu/attn_step_gap.py
TAILN=17 t 150 gap_2 python3 tools/gpu/attn_step_gap.py
echo "ALL DONE"
