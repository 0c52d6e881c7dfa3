"""Launch builder of the Hopper wgmma prefill attention (hopper/common/attention_sm90.cu).

prefill_attn_bf16's contract on warpgroup MMA, head_dim 128 and 256: one block of two
warpgroups per (q head, 128-query tile from the end, sequence); S = Q K^T and O += P V as
wgmma from 128-byte-swizzled shared tiles (P from registers, one bf16 per probability),
the PV product of one K/V tile overlapping the softmax of the next, K/V through a 4-stage
cp.async ring of 16 KiB tiles (64 keys at D = 128, 32 at D = 256). `ops.attention.
prefill_attention` takes it where `uses_sm90` says so (ATLAS_PREFILL_ATTN_SM90=0 turns the
route off); its speed against prefill_attn_bf16 and PyTorch SDPA is the kernel table's
`T... sm90` rows (tools/gpu/run_suite.sh issue15_table).
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import PREFILL_ATTN_SM90, PREFILL_ATTN_SM90_QREG
from . import KernelCache

#: the head dimensions compiled (attention_sm90.cu's instantiations)
PREFILL_SM90_HEAD_DIMS = (128, 256)
#: the head dimension of the Q-in-registers entry point (prefill_attn_sm90_qreg_bf16)
PREFILL_SM90_QREG_HEAD_DIM = 128
#: two warpgroups per block, 64 query rows each (attention_sm90.cu kThreads, kBQ)
PREFILL_SM90_THREADS = 256
PREFILL_SM90_QUERY_TILE = 128
#: K/V ring stages and the bytes of one K or V tile (attention_sm90.cu kStages, kTileBytes)
PREFILL_SM90_STAGES = 4
PREFILL_SM90_TILE_BYTES = 16384


def prefill_sm90_smem(head_dim: int) -> int:
    """Dynamic shared memory of a launch: Q [128][head_dim] bf16, the ring of K and V tiles,
    and 1 KiB to align the 128-byte swizzle's 1024-byte atoms (attention_sm90.cu
    kSmemBytes): 164,864 bytes at head_dim 128, 197,632 at 256."""
    q_bytes = PREFILL_SM90_QUERY_TILE * head_dim * 2
    return q_bytes + PREFILL_SM90_STAGES * 2 * PREFILL_SM90_TILE_BYTES + 1024


def available(kc: KernelCache) -> bool:
    """Whether the backend's loaded kernels include attention_sm90 (sm_90a sets do)."""
    return PREFILL_ATTN_SM90.module in kc.backend.module_names


def uses_sm90(kc: KernelCache, head_dim: int) -> bool:
    """The routing rule: switched on (routes.prefill_attn_sm90), a compiled head_dim,
    loaded."""
    return (kc.routes.prefill_attn_sm90 and head_dim in PREFILL_SM90_HEAD_DIMS
            and available(kc))


def prefill_sm90_grid(hq: int, max_q_len: int, num_seqs: int) -> tuple[int, int, int]:
    """(q heads, 128-query tiles, sequences); the kernel numbers the tiles from the end."""
    return hq, -(-max_q_len // PREFILL_SM90_QUERY_TILE), num_seqs


def prefill_attention_sm90(kc: KernelCache, stream: Stream, q: DevicePtr, k_cache: DevicePtr,
                           v_cache: DevicePtr, block_tables: DevicePtr, cu_q: DevicePtr,
                           kv_lens: DevicePtr, out: DevicePtr, num_seqs: int, hq: int,
                           hkv: int, head_dim: int, block_size: int, max_blocks: int,
                           scale: float, max_q_len: int) -> None:
    """The launch (ops.attention.prefill_attention validated the shared arguments); head_dim
    128 takes the Q-in-registers entry point where routes.prefill_attn_qreg says so."""
    if head_dim not in PREFILL_SM90_HEAD_DIMS:
        raise ValueError(f"prefill_attention_sm90: head_dim={head_dim} (compiled: "
                         f"{PREFILL_SM90_HEAD_DIMS})")
    smem = prefill_sm90_smem(head_dim)
    qreg = kc.routes.prefill_attn_qreg and head_dim == PREFILL_SM90_QREG_HEAD_DIM
    sig = PREFILL_ATTN_SM90_QREG if qreg else PREFILL_ATTN_SM90
    launch = kc.get_with_shared(sig, prefill_sm90_smem(max(PREFILL_SM90_HEAD_DIMS)))
    launch(stream, prefill_sm90_grid(hq, max_q_len, num_seqs), PREFILL_SM90_THREADS, smem, q,
           k_cache, v_cache, block_tables, cu_q, kv_lens, out, num_seqs, hq, hkv, head_dim,
           block_size, max_blocks, scale)
