"""Launch builder of the Hopper wgmma prefill attention (hopper/common/attention_sm90.cu).

prefill_attn_bf16's contract and grid (one block per q head, 64-query tile from the end,
sequence), head_dim 128 only, on warpgroup MMA: S = Q K^T and O += P V as wgmma m64n64k16
from 128-byte-swizzled shared tiles (P from registers), K/V through a 2-stage cp.async ring
of 64-key tiles. `ops.attention.prefill_attention` takes it where `uses_sm90` says so
(ATLAS_PREFILL_ATTN_SM90=0 turns the route off). On by default since it passed the H200
check (2026-12-01); its speed against prefill_attn_bf16 is the kernel table's `T... sm90`
rows (tools/gpu/run_suite.sh issue15_table).
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import PREFILL_ATTN_SM90
from . import KernelCache

#: the head dimension compiled (attention_sm90.cu D)
PREFILL_SM90_HEAD_DIM = 128
PREFILL_SM90_THREADS = 128
#: dynamic shared memory: Q [64][128] + 2 stages of K and V [64][128] bf16 + 1 KiB to align
#: the 128-byte swizzle's 1024-byte atoms (attention_sm90.cu SMEM_BYTES)
PREFILL_SM90_SMEM = 16384 + 2 * 32768 + 1024


def available(kc: KernelCache) -> bool:
    """Whether the backend's loaded kernels include attention_sm90 (sm_90a sets do)."""
    return PREFILL_ATTN_SM90.module in kc.backend.module_names


def uses_sm90(kc: KernelCache, head_dim: int) -> bool:
    """The routing rule: switched on (routes.prefill_attn_sm90), head_dim 128, loaded."""
    return (kc.routes.prefill_attn_sm90 and head_dim == PREFILL_SM90_HEAD_DIM
            and available(kc))


def prefill_attention_sm90(kc: KernelCache, stream: Stream, grid: tuple[int, int, int],
                           q: DevicePtr, k_cache: DevicePtr, v_cache: DevicePtr,
                           block_tables: DevicePtr, cu_q: DevicePtr, kv_lens: DevicePtr,
                           out: DevicePtr, num_seqs: int, hq: int, hkv: int, head_dim: int,
                           block_size: int, max_blocks: int, scale: float) -> None:
    """The launch on `grid` (ops.attention.prefill_attention validated the arguments)."""
    if head_dim != PREFILL_SM90_HEAD_DIM:
        raise ValueError(f"prefill_attention_sm90: head_dim={head_dim} (compiled: "
                         f"{PREFILL_SM90_HEAD_DIM})")
    launch = kc.get_with_shared(PREFILL_ATTN_SM90, PREFILL_SM90_SMEM)
    launch(stream, grid, PREFILL_SM90_THREADS, PREFILL_SM90_SMEM, q, k_cache, v_cache,
           block_tables, cu_q, kv_lens, out, num_seqs, hq, hkv, head_dim, block_size,
           max_blocks, scale)
