"""Launch builder of the Hopper wgmma prefill attention (hopper/common/attention_sm90.cu).

prefill_attn_bf16's contract on warpgroup MMA, head_dim 128 and 256: one block of two
warpgroups per (q head, 128-query tile from the end, sequence); S = Q K^T and O += P V as
wgmma from 128-byte-swizzled shared tiles (P from registers, one bf16 per probability),
the PV product of one K/V tile overlapping the softmax of the next, K/V through a 4-stage
cp.async ring of 16 KiB tiles (64 keys at D = 128, 32 at D = 256). Head_dim 128 has two
more entry points (`variant`): 128-key tiles in a 3-stage ring ("wide",
routes.prefill_attn_wide, the default at D = 128 since gpu26: ATLAS_PREFILL_ATTN_WIDE=0 takes
the 64-key tiles) and the opt-in Q in registers ("qreg", routes.prefill_attn_qreg, on 64-key
tiles, which wins where both are set). `ops.attention.prefill_attention` takes it
where `uses_sm90` says so (ATLAS_PREFILL_ATTN_SM90=0 turns the route off); its speed
against prefill_attn_bf16 and PyTorch SDPA is the kernel table's `T... sm90` rows
(tools/gpu/run_suite.sh issue15_table).
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import PREFILL_ATTN_SM90, PREFILL_ATTN_SM90_QREG, PREFILL_ATTN_SM90_WIDE, S
from . import KernelCache
from ._preconditions import proj_dim_of

#: the head dimensions compiled (attention_sm90.cu's instantiations)
PREFILL_SM90_HEAD_DIMS = (128, 256)
#: the head dimension of the A/B entry points (prefill_attn_sm90_{qreg,wide}_bf16)
PREFILL_SM90_VARIANT_HEAD_DIM = 128
#: entry point by variant ("": the default one)
PREFILL_SM90_ENTRIES: dict[str, S] = {"": PREFILL_ATTN_SM90, "qreg": PREFILL_ATTN_SM90_QREG,
                                      "wide": PREFILL_ATTN_SM90_WIDE}
#: two warpgroups per block, 64 query rows each (attention_sm90.cu kThreads, kBQ)
PREFILL_SM90_THREADS = 256
PREFILL_SM90_QUERY_TILE = 128
#: K/V ring stages and the bytes of one K or V tile (attention_sm90.cu Sm90Geometry's
#: kStages, kTileBytes), and the same of the "wide" variant (kWide: 128 keys at D = 128)
PREFILL_SM90_STAGES = 4
PREFILL_SM90_TILE_BYTES = 16384
PREFILL_SM90_WIDE_STAGES = 3
PREFILL_SM90_WIDE_TILE_BYTES = 32768


def prefill_sm90_smem(head_dim: int, variant: str = "") -> int:
    """Dynamic shared memory of a launch: Q [128][head_dim] bf16, the ring of K and V tiles,
    and 1 KiB to align the 128-byte swizzle's 1024-byte atoms (attention_sm90.cu
    kSmemBytes): 164,864 bytes at head_dim 128, 197,632 at 256, 230,400 for "wide"."""
    q_bytes = PREFILL_SM90_QUERY_TILE * head_dim * 2
    stages, tile = ((PREFILL_SM90_WIDE_STAGES, PREFILL_SM90_WIDE_TILE_BYTES) if variant == "wide"
                    else (PREFILL_SM90_STAGES, PREFILL_SM90_TILE_BYTES))
    return q_bytes + stages * 2 * tile + 1024


def available(kc: KernelCache) -> bool:
    """Whether the backend's loaded kernels include attention_sm90 (sm_90a sets do)."""
    return PREFILL_ATTN_SM90.module in kc.backend.module_names


def uses_sm90(kc: KernelCache, head_dim: int) -> bool:
    """The routing rule: switched on (routes.prefill_attn_sm90), a compiled head_dim,
    loaded."""
    return (kc.routes.prefill_attn_sm90 and head_dim in PREFILL_SM90_HEAD_DIMS
            and available(kc))


def sm90_variant(kc: KernelCache, head_dim: int) -> str:
    """The entry point the routes pick for `head_dim` (PREFILL_SM90_ENTRIES' key)."""
    if head_dim != PREFILL_SM90_VARIANT_HEAD_DIM:
        return ""
    return "qreg" if kc.routes.prefill_attn_qreg else "wide" if kc.routes.prefill_attn_wide else ""


def prefill_sm90_grid(hq: int, max_q_len: int, num_seqs: int) -> tuple[int, int, int]:
    """(q heads, 128-query tiles, sequences); the kernel numbers the tiles from the end."""
    return hq, -(-max_q_len // PREFILL_SM90_QUERY_TILE), num_seqs


def prefill_attention_sm90(kc: KernelCache, stream: Stream, q: DevicePtr, k_cache: DevicePtr,
                           v_cache: DevicePtr, block_tables: DevicePtr, cu_q: DevicePtr,
                           kv_lens: DevicePtr, out: DevicePtr, num_seqs: int, hq: int,
                           hkv: int, head_dim: int, block_size: int, max_blocks: int,
                           scale: float, max_q_len: int, window: int = 0,
                           proj_dim: int | None = None) -> None:
    """The launch (ops.attention.prefill_attention validated the shared arguments) on the
    entry point `sm90_variant` picks; `window` and `proj_dim` as prefill_attention's."""
    if head_dim not in PREFILL_SM90_HEAD_DIMS:
        raise ValueError(f"prefill_attention_sm90: head_dim={head_dim} (compiled: "
                         f"{PREFILL_SM90_HEAD_DIMS})")
    variant = sm90_variant(kc, head_dim)
    smem = prefill_sm90_smem(head_dim, variant)
    # an entry's shared-memory attribute: the most any of its launches asks for
    most = (prefill_sm90_smem(max(PREFILL_SM90_HEAD_DIMS)) if not variant else
            prefill_sm90_smem(PREFILL_SM90_VARIANT_HEAD_DIM, variant))
    launch = kc.get_with_shared(PREFILL_SM90_ENTRIES[variant], most)
    launch(stream, prefill_sm90_grid(hq, max_q_len, num_seqs), PREFILL_SM90_THREADS, smem, q,
           k_cache, v_cache, block_tables, cu_q, kv_lens, out, num_seqs, hq, hkv, head_dim,
           block_size, max_blocks, scale, window, proj_dim_of(head_dim, proj_dim))
