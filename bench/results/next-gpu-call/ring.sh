#!/usr/bin/env bash
# Still due on an H200 (session 58): gpu203's ring-depth A/B of the FP8 tensor-core decode GEMM
# (checks at 9 and 3 slots, Qwen3-8B FP8 batch 1 and 8 on the GEMV against the kernel at 3..12
# slots), as it ran on an H100; on an H200 it is the FP8 default decision.
exec bash bench/results/2026-12-07-gpu203/ring.sh
