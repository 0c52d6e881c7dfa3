#!/usr/bin/env bash
# session-21 call E: does cycling through two input sets take the kernel table's back-to-back L2 help out of the
# batch-64 attention rows (bench_kernels.py --min-copies 1 / 2 / 3 / 1)? Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
kt c1 "" --min-copies 1 -k "b64 hist1536"
kt c2 "" --min-copies 2 -k "b64 hist1536"
kt c3 "" --min-copies 3 -k "b64 hist1536"
kt c1b "" --min-copies 1 -k "b64 hist1536"
echo "ALL DONE"
