#!/usr/bin/env bash
# session-40 call E (prepared, not run: no device time left): the kernel table's rows that
# issue 15 lists as losses to PyTorch, re-timed with today's kernels (the last full table is
# 934c90d, 2026-11-30): batched decode GEMV / decode GEMM, prefill GEMM and attention, decode
# attention (plain and rope-fused), embedding, sampling, the norms and the small fused kernels.
# Each group is its own bench_kernels.py run (a group cut short keeps the groups before it).
# Prepare: ATLAS_PREP_SETS="hopper__common__*" bash tools/gpu/prep_device.sh;
#   git archive HEAD py tools kernels | gzip -9 > .device/head_src.tgz;
#   git rev-parse --short HEAD > .device/commit. Repo root, carry [".device", ".whl"].
source tools/gpu/call_head.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
KLIM=200 kt prefill "X=1" -k prefill_gemm -k prefill_attention
KLIM=200 kt decode_attn "X=1" -k decode_attention
KLIM=150 kt batched "X=1" -k decode_batched_gemv
KLIM=120 kt small "X=1" -k embedding -k sampling -k greedy -k rmsnorm -k silu_mul -k qk_norm_rope_kv -k rope_kv_append
echo "ALL DONE"
