#!/usr/bin/env bash
# session-17 call D (lead, short: the session's last device seconds): ATLAS_MAX_SHARED_CARVEOUT A/B at batch 1 (every
# kernel on the most-shared-memory carveout, so the long attention's ~100 KiB blocks never wait for an SM to empty and
# reconfigure after the GEMVs). Kernels: the f658cce set (default paths as this tree). Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
b1() { prof "$1" "$2" --model "$3" --batch 1 --context 512; }
b1 c30_0 "X=1" $G/qwen3-30b-a3b
b1 c30_1 "ATLAS_MAX_SHARED_CARVEOUT=1" $G/qwen3-30b-a3b
b1 c8_1 "ATLAS_MAX_SHARED_CARVEOUT=1" $G/qwen3-8b
b1 c8_0 "X=1" $G/qwen3-8b
b1 c35_1 "ATLAS_MAX_SHARED_CARVEOUT=1" $G/qwen3_5-35b-a3b
for f in c30_0 c30_1; do echo "-- $f"; grep -E "^decode_attn" $L/$f.log | head -1 | cut -c1-100; done
echo "ALL DONE"
