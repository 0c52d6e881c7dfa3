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

Short chunks past long histories take the split entry (`split_plan`): the grid above gives
such a chunk one block per q head, each walking every key of its history on one SM while
most SMs idle (the warm prefix-cache request, 24 queries over 2,064 cached keys: 32 blocks of
17 key tiles, 64.1 us a layer on gpu203). There a tile's rows become (query, q head) pairs
of one kv head's group (`pack`: the group's K/V read once, 96 of 128 rows used instead of
24), and each block's key tiles are cut into `splits` runs on blocks of their own
(`split_tiles`), their partials merged by prefill_attn_sm90_merge_bf16.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..gpu import DevicePtr, Stream
from ..kernel_abi import (PREFILL_ATTN_SM90, PREFILL_ATTN_SM90_MERGE, PREFILL_ATTN_SM90_QREG,
                          PREFILL_ATTN_SM90_SPLIT, PREFILL_ATTN_SM90_WIDE, S)
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
#: the most key splits a split launch takes (each a block per row tile; the grid's z is
#: sequences x splits)
PREFILL_SPLIT_MAX = 64
#: threads of the merge's blocks, one 4-element quad of a (token, q head) row each
PREFILL_MERGE_THREADS = 128


@dataclass(frozen=True, slots=True)
class PrefillPartials:
    """Scratch the split entry writes its partials into: part_o f32 and part_ml f32 holding
    `slots` (token, split) pairs of every q head ([slots, hq, head_dim] and [slots, hq, 2]
    elements: the decode partial buffers, whose rows x splits they are)."""

    part_o: DevicePtr
    part_ml: DevicePtr
    slots: int


@dataclass(frozen=True, slots=True)
class SplitPlan:
    """A split launch: `splits` key runs a row tile, rows packed by GQA group or not."""

    splits: int
    pack: bool

    def grid(self, hq: int, hkv: int, max_q_len: int, num_seqs: int) -> tuple[int, int, int]:
        """(kv heads when packed, else q heads; 128-row tiles; sequences x splits)."""
        rows = max_q_len * (hq // hkv if self.pack else 1)
        return ((hkv if self.pack else hq), -(-rows // PREFILL_SM90_QUERY_TILE),
                num_seqs * self.splits)


def split_key_tile(head_dim: int) -> int:
    """Keys in one K/V tile of the split entry: the wide geometry's 128 at head_dim 128, the
    default one's 8192 / head_dim elsewhere (32 at 256)."""
    return 128 if head_dim == PREFILL_SM90_VARIANT_HEAD_DIM else 8192 // head_dim


def split_tiles(n_tiles: int, t0: int, splits: int, split: int) -> tuple[int, int]:
    """The key tiles [ts, te) split `split` of a block takes when its rows see tiles
    [t0, n_tiles): runs of ceil((n_tiles - t0) / splits), the last ones possibly empty
    (attention_sm90.cu's rule; an empty split writes empty partials)."""
    per = -(-(n_tiles - t0) // splits)
    ts = min(t0 + split * per, n_tiles)
    return ts, min(ts + per, n_tiles)


def split_plan(hq: int, hkv: int, head_dim: int, max_q_len: int, max_kv_len: int,
               num_seqs: int, sm_count: int, slots: int, min_tiles: int) -> SplitPlan | None:
    """The split launch of a prefill whose plain grid (q heads x 128-query tiles x
    sequences) leaves SMs idle, or None (the plain entry). Rows pack by GQA group where that
    needs fewer row tiles (short chunks); keys split so that the blocks make at most one
    wave (the entries hold one block an SM), each split at least `min_tiles` key tiles of
    the longest history `max_kv_len`, within the partial buffers' `slots` (token, split)
    pairs (the tokens bounded by num_seqs x max_q_len); fewer than two splits: None."""
    group = hq // hkv
    plain = hq * -(-max_q_len // PREFILL_SM90_QUERY_TILE)
    packed = hkv * -(-max_q_len * group // PREFILL_SM90_QUERY_TILE)
    pack = group > 1 and packed < plain
    blocks = (packed if pack else plain) * num_seqs
    tiles = -(-max_kv_len // split_key_tile(head_dim))
    splits = min(sm_count // blocks, tiles // min_tiles, slots // (num_seqs * max_q_len),
                 PREFILL_SPLIT_MAX)
    if splits < 2:  # packing alone leaves fewer blocks each walking every key: slower
        return None   # (gpu205, H100: 71.6 us a layer on 8 packed blocks vs 60.5 on 32)
    return SplitPlan(splits, pack)


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
                           proj_dim: int | None = None, max_kv_len: int = 0,
                           partials: PrefillPartials | None = None) -> None:
    """The launch (ops.attention.prefill_attention validated the shared arguments) on the
    entry point `sm90_variant` picks, or on the split entry where `split_plan` (given the
    longest history `max_kv_len` and the `partials` scratch; routes.prefill_attn_split)
    says so; `window` and `proj_dim` as prefill_attention's."""
    if head_dim not in PREFILL_SM90_HEAD_DIMS:
        raise ValueError(f"prefill_attention_sm90: head_dim={head_dim} (compiled: "
                         f"{PREFILL_SM90_HEAD_DIMS})")
    proj = proj_dim_of(head_dim, proj_dim)
    if partials is not None and kc.routes.prefill_attn_split:
        plan = split_plan(hq, hkv, head_dim, max_q_len, max_kv_len, num_seqs,
                          kc.facts.sm_count, partials.slots,
                          kc.routes.prefill_attn_split_min_tiles)
        if plan is not None:  # the split entry, then the merge of its partials
            wide = head_dim == PREFILL_SM90_VARIANT_HEAD_DIM
            launch = kc.get_with_shared(PREFILL_ATTN_SM90_SPLIT,
                                        prefill_sm90_smem(PREFILL_SM90_VARIANT_HEAD_DIM, "wide"))
            launch(stream, plan.grid(hq, hkv, max_q_len, num_seqs), PREFILL_SM90_THREADS,
                   prefill_sm90_smem(head_dim, "wide" if wide else ""), q, k_cache, v_cache,
                   block_tables, cu_q, kv_lens, out, num_seqs, hq, hkv, head_dim, block_size,
                   max_blocks, scale, window, proj, plan.splits, int(plan.pack),
                   partials.part_o, partials.part_ml)
            quads = hq * head_dim // 4
            kc.get(PREFILL_ATTN_SM90_MERGE)(
                stream, (-(-quads // PREFILL_MERGE_THREADS), num_seqs * max_q_len, 1),
                PREFILL_MERGE_THREADS, 0, partials.part_o, partials.part_ml, cu_q, out,
                num_seqs, hq, head_dim, plan.splits, proj)
            return
    variant = sm90_variant(kc, head_dim)
    smem = prefill_sm90_smem(head_dim, variant)
    # an entry's shared-memory attribute: the most any of its launches asks for
    most = (prefill_sm90_smem(max(PREFILL_SM90_HEAD_DIMS)) if not variant else
            prefill_sm90_smem(PREFILL_SM90_VARIANT_HEAD_DIM, variant))
    launch = kc.get_with_shared(PREFILL_SM90_ENTRIES[variant], most)
    launch(stream, prefill_sm90_grid(hq, max_q_len, num_seqs), PREFILL_SM90_THREADS, smem, q,
           k_cache, v_cache, block_tables, cu_q, kv_lens, out, num_seqs, hq, hkv, head_dim,
           block_size, max_blocks, scale, window, proj)
