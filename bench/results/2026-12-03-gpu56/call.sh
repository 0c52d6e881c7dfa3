#!/usr/bin/env bash
# session-18 call E (lead, the session's last device seconds): the late-trigger entry's check cases at one sequence
# (the launches that now take it: ops/attention_long.long_rope_kernel_for). Kernels: the a43cac3 set (unchanged since).
# Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
TAILN=8 t 150 checks python3 tools/gpu/check_kernels.py -k late --out $R/checks.json
echo "ALL DONE"
