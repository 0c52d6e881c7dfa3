#!/usr/bin/env bash
# session-21 call H (short, the session's last device time): the staged entry's phase trace at batch 64 x 1,536 back to
# back against behind an L2-sized sweep (trace_decode_attn.py --long --quick, swept mode). Repo root, carry
# [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=3 t 150 trace python3 tools/gpu/trace_decode_attn.py --long --quick
grep -E "^phase trace|^shape|b64" $L/trace.log | cut -c1-260
echo "ALL DONE"
