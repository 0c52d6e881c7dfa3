"""Launch builder and routing of the long-context split-K decode attention (hopper/common/
attention_long.cu).

The kernel keeps decode_attn_bf16's contract (grid (num_splits, hkv, num_seqs), the split
rule of ops.attention.decode_split_rule, the partials the combine merges) and is built for
thousands of keys per split: the group's q heads as the rows of a tensor-core tile, K/V
through a 3-stage cp.async ring of 64-key tiles, block-table entries read one tile ahead.
`ops.attention.decode_attention` launches it instead of decode_attn_bf16 where `uses_long`
says so: the module is loaded, the head geometry fits, the routes allow it, and the engine's
block tables reach at least `KernelRoutes.decode_attn_long_min_keys` keys (a graph's grid
is fixed at capture, so the choice follows the longest context the launch can see, not the
live kv_len). `long_decode_splits` is the split count for such engines: whole waves of the
kernel's two blocks per SM.
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import DECODE_ATTN_LONG
from . import KernelCache

#: head dimensions the long kernel is compiled for (a [64][D] K and V tile per stage)
LONG_HEAD_DIMS = (64, 128)
#: q heads per kv head it serves: the 16 rows of one mma.m16n8k16 A tile
LONG_MAX_GROUP = 16
#: threads per block (attention_long.cu kThreads) and keys per ring tile (kBKV)
LONG_THREADS = 128
LONG_TILE_KEYS = 64
#: ring stages (kStages) and resident blocks per SM at D = 128 (the launch bounds)
LONG_STAGES = 3
LONG_BLOCKS_PER_SM = 2
#: an engine whose block tables reach this many keys takes the long kernel by default
#: (routes.DEFAULT_DECODE_ATTN_LONG_MIN_KEYS: the kernel table's 16k-history rows and up)
#: and gets `long_decode_splits`
LONG_CONTEXT_KEYS = 16384
#: fewest keys per split at the longest context when choosing the split count
LONG_MIN_SPLIT_KEYS = 512
#: most splits (the combine's partials per row stay small)
LONG_MAX_SPLITS = 64
#: a split count is good enough once the last wave of blocks is this full on average
LONG_WAVE_EFFICIENCY = 0.9


def long_smem_bytes(head_dim: int) -> int:
    """Dynamic shared memory of a launch: the ring of LONG_STAGES x (K and V) [64][D] bf16
    tiles (the warps' merge reuses it)."""
    return LONG_STAGES * 2 * LONG_TILE_KEYS * head_dim * 2


def available(kc: KernelCache) -> bool:
    """Whether the backend's loaded kernels include attention_long (hopper sets do)."""
    return DECODE_ATTN_LONG.module in kc.backend.module_names


def uses_long(kc: KernelCache, hq: int, hkv: int, head_dim: int, max_keys: int) -> bool:
    """The routing rule: switched on, loaded, a head geometry the kernel takes, and block
    tables of at least routes.decode_attn_long_min_keys keys."""
    return (kc.routes.decode_attn_long and head_dim in LONG_HEAD_DIMS
            and hq // hkv <= LONG_MAX_GROUP and max_keys >= kc.routes.decode_attn_long_min_keys
            and available(kc))


def long_decode_splits(pairs: int, max_seq_len: int, num_sms: int, cap: int | None = None
                       ) -> int:
    """Splits for `pairs` (sequence, kv head) pairs at a long max_seq_len: the fewest whose
    blocks fill at least one wave of the long kernel (num_sms x LONG_BLOCKS_PER_SM) and whose
    waves are at least LONG_WAVE_EFFICIENCY full on average (equal-length splits: a
    part-empty last wave idles the rest of the GPU for a whole block's time), at most
    max_seq_len // LONG_MIN_SPLIT_KEYS, LONG_MAX_SPLITS and `cap`; the longest allowed when
    none qualifies. E.g. on an H200 (264 slots) with 8 kv heads at 32k: batch 1 -> 33, batch
    8 -> 8 (512 blocks, 97% of 2 waves; the 2x-SMs rule's 5 give 320 blocks, 61% of 2)."""
    slots = num_sms * LONG_BLOCKS_PER_SM
    most = max(1, min(LONG_MAX_SPLITS, max_seq_len // LONG_MIN_SPLIT_KEYS,
                      cap if cap is not None else LONG_MAX_SPLITS))
    for splits in range(1, most + 1):
        blocks = pairs * splits
        waves = -(-blocks // slots)
        if blocks >= slots and blocks >= LONG_WAVE_EFFICIENCY * waves * slots:
            return splits
    return most


def decode_attention_long(kc: KernelCache, stream: Stream, q: DevicePtr, k_cache: DevicePtr,
                          v_cache: DevicePtr, block_tables: DevicePtr, kv_lens: DevicePtr,
                          part_o: DevicePtr, part_ml: DevicePtr, num_seqs: int, hq: int,
                          hkv: int, head_dim: int, block_size: int, max_blocks: int,
                          num_splits: int, scale: float) -> None:
    """The split-K partials of decode_attention on the long kernel (the caller validated
    the shared arguments and runs the combine)."""
    if head_dim not in LONG_HEAD_DIMS or hq // hkv > LONG_MAX_GROUP:
        raise ValueError(f"decode_attention_long: head_dim={head_dim} (needs one of "
                         f"{LONG_HEAD_DIMS}) and group {hq // hkv} (needs <= {LONG_MAX_GROUP})")
    smem = long_smem_bytes(head_dim)
    launch = kc.get_with_shared(DECODE_ATTN_LONG, long_smem_bytes(max(LONG_HEAD_DIMS)))
    launch(stream, (num_splits, hkv, num_seqs), LONG_THREADS, smem, q, k_cache, v_cache,
           block_tables, kv_lens, part_o, part_ml, num_seqs, hq, hkv, head_dim, block_size,
           max_blocks, num_splits, scale)
