"""How many sequences a runner is sized for when the operator does not say.

A server started with no flags should use the machine: on a large GPU that means hundreds of
concurrent sequences (vLLM's default is 256), because batch-64 decode reads the weights once
for 64 tokens. What costs memory per sequence slot is small for attention models (a block
table row, a sampler slot; the KV pool is sized from memory separately and shared), but a
hybrid model keeps a recurrent state per slot (Qwen3.5-35B-A3B: ~64 MB), so there the slot
count is bounded by a share of the memory left after the weights. The CPU reference backend
runs every kernel in numpy: a handful of sequences is all it can serve usefully.
"""

from __future__ import annotations

#: decode batch a CUDA runner is sized for by default (vLLM's default max_num_seqs)
AUTO_MAX_BATCH_CUDA = 256
#: the CPU reference backend's default
AUTO_MAX_BATCH_HOST = 8
#: at most this share of the memory left after weights goes to per-sequence recurrent state
STATE_MEMORY_SHARE = 0.25


def auto_max_batch_size(kind: str, state_bytes_per_seq: int, budget_bytes: int) -> int:
    """The default batch for backend `kind`: AUTO_MAX_BATCH_CUDA on CUDA unless the
    per-slot recurrent state (`state_bytes_per_seq`, 0 for attention-only models) would take
    more than STATE_MEMORY_SHARE of `budget_bytes` (device memory x utilization - weights);
    one slot is the graph padding rows', hence the -1. Never below 1: a model that cannot
    hold one sequence fails later with the KV planner's error, which names the bytes."""
    if kind != "cuda":
        return AUTO_MAX_BATCH_HOST
    if state_bytes_per_seq <= 0:
        return AUTO_MAX_BATCH_CUDA
    fit = int(max(budget_bytes, 0) * STATE_MEMORY_SHARE) // state_bytes_per_seq - 1
    return max(1, min(AUTO_MAX_BATCH_CUDA, fit))
