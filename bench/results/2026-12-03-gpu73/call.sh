#!/usr/bin/env bash
# session-21 call F (short): attn_step_gap.py as committed (its launches timed by bench_kernels.median_eager_us), with
# the tiny variant (a one-element add between launches), twice. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=15 t 150 gap_1 python3 tools/gpu/attn_step_gap.py
TAILN=15 t 150 gap_2 python3 tools/gpu/attn_step_gap.py
echo "ALL DONE"
