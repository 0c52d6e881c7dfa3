"""The paged KV cache: block accounting, pool sizing, and the device pools themselves.

Three pieces, usable apart:

* `BlockAllocator` — pure bookkeeping of block ids (the scheduler owns one). O(1) allocate
  and free from a stack of free ids, with per-block reference counts so that prefix
  caching can share a block between sequences.
* `KvCacheConfig` — how many blocks a device can hold; `KvCacheConfig.plan` is the policy.
* `PagedKvCache` — the device memory: per-layer K and V pools of
  [num_blocks, num_kv_heads, block_size, row] (the layout in `kernel_abi`; a row is head_dim
  elements in bf16 or FP8, or NVFP4's nibbles and group scales), carved from
  one allocation, and an i32 [max_batch_size, max_blocks_per_seq] block-table buffer with a
  host mirror edited in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..core.dtype import DType
from .gpu import DevicePtr, GpuBackend, Stream

#: tokens per KV block, the default of every paged-attention engine and of our kernels
DEFAULT_BLOCK_SIZE = 16
_POOL_ALIGNMENT = 256


class KvBlockError(RuntimeError):
    """A block id was misused: double free, foreign id, or sharing a free block."""


class OutOfBlocksError(KvBlockError):
    """More blocks were requested than are free; check `can_allocate` first."""


class KvCacheBudgetError(RuntimeError):
    """The memory budget cannot hold even one sequence of max_seq_len tokens."""


# ---- block accounting -------------------------------------------------------------------

class BlockAllocator:
    """KV block ids 0..num_blocks-1 with reference counts.

    Free ids live on a stack (a Python list used with pop/append: O(1), no allocation per
    call once built), so the most recently freed block is reused first. A fresh allocator
    hands out 0, 1, 2, ... in order.
    """

    __slots__ = ("num_blocks", "_free", "_ref")

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        self.num_blocks = num_blocks
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))
        self._ref: list[int] = [0] * num_blocks

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self._free)

    def can_allocate(self, n: int) -> bool:
        return n <= len(self._free)

    def allocate_one(self) -> int:
        if not self._free:
            raise OutOfBlocksError(f"all {self.num_blocks} KV blocks are in use")
        block = self._free.pop()
        self._ref[block] = 1
        return block

    def allocate(self, n: int) -> list[int]:
        """`n` fresh blocks (all or nothing), each with reference count 1."""
        free = self._free
        if n < 0:
            raise ValueError(f"cannot allocate {n} blocks")
        if n > len(free):
            raise OutOfBlocksError(f"{n} KV blocks requested, {len(free)} of "
                                   f"{self.num_blocks} free")
        if n == 0:
            return []
        out = free[-n:]
        del free[-n:]
        out.reverse()
        ref = self._ref
        for b in out:
            ref[b] = 1
        return out

    def incref(self, block: int) -> None:
        """Share an allocated block (prefix caching): it is freed after one more `free`."""
        self._check_id(block)
        if self._ref[block] == 0:
            raise KvBlockError(f"cannot share KV block {block}: it is not allocated")
        self._ref[block] += 1

    def free_one(self, block: int) -> None:
        """Drop one reference; the block returns to the free stack at zero."""
        self._check_id(block)
        ref = self._ref[block]
        if ref == 0:
            raise KvBlockError(f"double free of KV block {block}")
        self._ref[block] = ref - 1
        if ref == 1:
            self._free.append(block)

    def free(self, blocks: Sequence[int]) -> None:
        """Drop one reference on each of `blocks` (a finished sequence's block table)."""
        for b in blocks:
            self.free_one(b)

    def ref_count(self, block: int) -> int:
        self._check_id(block)
        return self._ref[block]

    def _check_id(self, block: int) -> None:
        if not 0 <= block < self.num_blocks:
            raise KvBlockError(f"KV block id {block} outside 0..{self.num_blocks - 1}")


# ---- sizing -----------------------------------------------------------------------------

#: KV cache element formats `--kv-cache-dtype` accepts, by label (nvfp4: E2M1 elements with
#: an E4M3 scale per 16, the pools' DType naming the element)
KV_DTYPES = {"bf16": DType.BF16, "fp8": DType.FP8E4M3, "nvfp4": DType.E2M1}
#: elements per NVFP4 group scale
NVFP4_GROUP = 16


def kv_row_bytes(dtype: DType, head_dim: int) -> int:
    """Bytes of one token's row of one kv head in a `dtype` pool: head_dim elements, plus
    one E4M3 scale byte per 16 elements for NVFP4 (0.5625 bytes per element)."""
    if dtype is DType.E2M1:
        if head_dim % NVFP4_GROUP:
            raise ValueError(f"nvfp4 KV needs head_dim a multiple of {NVFP4_GROUP}, got "
                             f"{head_dim}")
        return dtype.nbytes(head_dim) + head_dim // NVFP4_GROUP
    return dtype.nbytes(head_dim)


def parse_kv_dtype(label: str) -> DType:
    """The pool format of a `--kv-cache-dtype` label."""
    try:
        return KV_DTYPES[label]
    except KeyError:
        raise ValueError(f"unknown KV cache dtype {label!r}; known: "
                         f"{', '.join(KV_DTYPES)}") from None


def kv_dtype_label(dtype: DType) -> str:
    return next(k for k, v in KV_DTYPES.items() if v is dtype)


@dataclass(frozen=True, slots=True)
class KvCacheConfig:
    """Shape of the paged KV cache of one model on one device.

    `dtype` is the pool format of the quantized layers; the first and last
    `high_precision_layers` layers keep bf16 pools (the layers most sensitive to KV error).
    A quantized (FP8 or NVFP4) layer also holds f32 [2, num_kv_heads] scales (K, then V),
    counted per layer in `scale_bytes`, not per block: they do not grow with the pool
    (NVFP4's per-16 group scales are part of each row, `kv_row_bytes`).
    """

    num_layers: int
    num_kv_heads: int
    head_dim: int
    num_blocks: int
    max_batch_size: int
    max_seq_len: int
    block_size: int = DEFAULT_BLOCK_SIZE
    dtype: DType = DType.BF16
    #: block-table rows when more than max_batch_size: a speculative verification step
    #: gives each of a sequence's K + 1 rows its own row (decode attention reads row i's
    #: table and kv_len), so the table has max_batch_size * (K + 1) rows
    table_rows: int = 0
    high_precision_layers: int = 0

    @property
    def num_table_rows(self) -> int:
        return max(self.table_rows, self.max_batch_size)

    @property
    def max_blocks_per_seq(self) -> int:
        return -(-self.max_seq_len // self.block_size)

    @property
    def layer_dtypes(self) -> tuple[DType, ...]:
        return layer_kv_dtypes(self.num_layers, self.dtype, self.high_precision_layers)

    def layer_pool_bytes(self, layer: int) -> int:
        """Bytes of one layer's K (or V) pool, rounded up to the pool alignment."""
        raw = (self.num_blocks * self.num_kv_heads * self.block_size
               * kv_row_bytes(self.layer_dtypes[layer], self.head_dim))
        return -(-raw // _POOL_ALIGNMENT) * _POOL_ALIGNMENT

    @property
    def bytes_per_block(self) -> int:
        """Device bytes one block costs across all layers, K and V."""
        return kv_bytes_per_block(self.num_layers, self.num_kv_heads, self.head_dim,
                                  self.block_size, self.dtype, self.high_precision_layers)

    @property
    def bytes_per_token(self) -> float:
        return self.bytes_per_block / self.block_size

    @property
    def scale_bytes(self) -> int:
        """f32 K and V scales per kv head of every quantized layer."""
        quantized = sum(dt is not DType.BF16 for dt in self.layer_dtypes)
        return quantized * 2 * 4 * self.num_kv_heads

    @property
    def pool_bytes(self) -> int:
        return 2 * sum(self.layer_pool_bytes(i) for i in range(self.num_layers))

    @property
    def block_table_bytes(self) -> int:
        return 4 * self.num_table_rows * self.max_blocks_per_seq

    @property
    def max_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @classmethod
    def plan(cls, *, num_layers: int, num_kv_heads: int, head_dim: int, max_batch_size: int,
             max_seq_len: int, total_memory: int, weight_bytes: int, arena_bytes: int,
             gpu_memory_utilization: float = 0.9, free_memory: int | None = None,
             block_size: int = DEFAULT_BLOCK_SIZE, dtype: DType = DType.BF16,
             max_num_blocks: int | None = None, table_rows: int = 0,
             high_precision_layers: int = 0) -> "KvCacheConfig":
        """Size the pool. The policy, in order:

        1. budget = total_memory * gpu_memory_utilization - weight_bytes - arena_bytes
           - block-table bytes - KV scale bytes. When `free_memory` (measured with weights
           and arena already resident) is given, the budget is also at most that, so another
           process on the device is never counted as ours.
        2. blocks = budget // bytes_per_block (K and V, every layer, each in its own dtype).
        3. capped at max_batch_size * ceil(max_seq_len / block_size): more blocks than
           every batch slot at full length can never be used. `max_num_blocks`, when
           given, caps further (an operator override, and small test pools).
        4. fewer blocks than one max_seq_len sequence needs is an error naming needed vs
           available bytes: the server could not finish a single long request.
        """
        for label, value in (("num_layers", num_layers), ("num_kv_heads", num_kv_heads),
                             ("head_dim", head_dim), ("max_batch_size", max_batch_size),
                             ("max_seq_len", max_seq_len), ("block_size", block_size)):
            if value <= 0:
                raise ValueError(f"{label} must be positive, got {value}")
        if not 0.0 < gpu_memory_utilization <= 1.0:
            raise ValueError("gpu_memory_utilization must be in (0, 1], got "
                             f"{gpu_memory_utilization}")
        layer_dtypes = layer_kv_dtypes(num_layers, dtype, high_precision_layers)
        per_block = kv_bytes_per_block(num_layers, num_kv_heads, head_dim, block_size, dtype,
                                       high_precision_layers)
        per_seq = -(-max_seq_len // block_size)
        table_bytes = 4 * max(table_rows, max_batch_size) * per_seq
        table_bytes += sum(dt is not DType.BF16 for dt in layer_dtypes) * 8 * num_kv_heads
        budget = int(total_memory * gpu_memory_utilization) - weight_bytes - arena_bytes \
            - table_bytes
        if free_memory is not None:
            budget = min(budget, free_memory - table_bytes)
        fit = max(budget, 0) // per_block
        num_blocks = min(fit, max_batch_size * per_seq)
        if max_num_blocks is not None:
            num_blocks = min(num_blocks, max_num_blocks)
        if num_blocks < per_seq:
            needed = per_seq * per_block
            if max_num_blocks is not None and max_num_blocks < per_seq <= fit:
                raise KvCacheBudgetError(
                    f"max_num_blocks={max_num_blocks} holds fewer than the {per_seq} blocks "
                    f"one {max_seq_len}-token sequence needs")
            raise KvCacheBudgetError(
                f"KV cache budget too small: one {max_seq_len}-token sequence needs "
                f"{needed:,} bytes ({per_seq} blocks of {per_block:,}), but only "
                f"{max(budget, 0):,} bytes are available (total {total_memory:,} x "
                f"{gpu_memory_utilization} - weights {weight_bytes:,} - scratch "
                f"{arena_bytes:,}{'' if free_memory is None else f', free {free_memory:,}'}); "
                "lower --max-seq-len or raise --gpu-memory-utilization")
        return cls(num_layers, num_kv_heads, head_dim, num_blocks, max_batch_size,
                   max_seq_len, block_size, dtype, table_rows, high_precision_layers)


def layer_kv_dtypes(num_layers: int, dtype: DType, high_precision_layers: int = 0
                    ) -> tuple[DType, ...]:
    """Each layer's pool format: `dtype`, except bf16 for the first and last
    `high_precision_layers` layers."""
    if dtype not in KV_DTYPES.values():
        raise ValueError(f"KV cache dtype {dtype.label} is not supported; known: "
                         f"{', '.join(KV_DTYPES)}")
    if high_precision_layers < 0:
        raise ValueError(f"high_precision_layers must be >= 0, got {high_precision_layers}")
    n = high_precision_layers
    return tuple(DType.BF16 if i < n or i >= num_layers - n else dtype
                 for i in range(num_layers))


def kv_bytes_per_block(num_layers: int, num_kv_heads: int, head_dim: int, block_size: int,
                       dtype: DType = DType.BF16, high_precision_layers: int = 0) -> int:
    """Bytes of K and V for `block_size` tokens across all layers, each in its format."""
    return sum(2 * num_kv_heads * block_size * kv_row_bytes(dt, head_dim)
               for dt in layer_kv_dtypes(num_layers, dtype, high_precision_layers))


# ---- device pools -----------------------------------------------------------------------

class PagedKvCache:
    """The KV pools of every layer and the block-table buffer, on one device.

    Pools are one allocation: layer l's K pool is at `k_cache(l)`, its V pool right after.
    The block-table host mirror is pinned memory edited in place by `set_block_table`;
    `upload_block_tables` copies only the rows changed since the last upload, in one copy.
    Because the copy is asynchronous from pinned memory, the mirror must not be edited
    again until the stream has passed that copy (the engine synchronizes every step).
    """

    def __init__(self, backend: GpuBackend, cfg: KvCacheConfig) -> None:
        self.backend = backend
        self.cfg = cfg
        self.num_blocks = cfg.num_blocks
        self.block_size = cfg.block_size
        self.max_blocks_per_seq = cfg.max_blocks_per_seq
        self.layer_dtypes = cfg.layer_dtypes
        self._pools = backend.alloc(max(cfg.pool_bytes + cfg.scale_bytes, 1))
        k_ptrs, v_ptrs, scale_ptrs = [], [], []
        at, scale_at = self._pools, self._pools + cfg.pool_bytes
        for layer, dt in enumerate(self.layer_dtypes):
            stride = cfg.layer_pool_bytes(layer)
            k_ptrs.append(at)
            v_ptrs.append(at + stride)
            at += 2 * stride
            if dt is DType.BF16:
                scale_ptrs.append(0)
            else:
                scale_ptrs.append(scale_at)
                scale_at += 8 * cfg.num_kv_heads
        self.k_ptrs: tuple[DevicePtr, ...] = tuple(k_ptrs)
        self.v_ptrs: tuple[DevicePtr, ...] = tuple(v_ptrs)
        #: f32 [2, hkv] K/V scales of each quantized layer (0 for a bf16 layer); all zero
        #: (uncalibrated) until `set_scales` or the first prefill's calibration
        self.scale_ptrs: tuple[DevicePtr, ...] = tuple(scale_ptrs)
        self._fixed_scales: dict[int, np.ndarray] = {}
        if cfg.scale_bytes:
            backend.memset(self._pools + cfg.pool_bytes, 0, cfg.scale_bytes)
        rows, cols = cfg.num_table_rows, cfg.max_blocks_per_seq
        self.block_tables: DevicePtr = backend.alloc(4 * rows * cols)
        self.block_tables_host = backend.alloc_host_pinned(4 * rows * cols).view(
            np.int32).reshape(rows, cols)
        self.block_tables_host.fill(0)
        self._row_len = [0] * rows
        backend.copy_h2d(self.block_tables, self.block_tables_host)
        self._dirty_lo, self._dirty_hi = rows, 0

    @property
    def nbytes(self) -> int:
        """Device bytes held: pools, scales and the block-table buffer."""
        return self.cfg.pool_bytes + self.cfg.scale_bytes + self.cfg.block_table_bytes

    @property
    def dtype_label(self) -> str:
        """"bf16", "fp8", "nvfp4", or e.g. "fp8+bf16" when high-precision layers keep some in
        bf16."""
        labels = {kv_dtype_label(dt) for dt in self.layer_dtypes}
        main = kv_dtype_label(self.cfg.dtype)
        return main if labels == {main} else f"{main}+bf16"

    def describe(self) -> str:
        """The startup line: tokens the pool holds, its format and bytes per token."""
        return (f"KV pool: {self.cfg.max_tokens:,} tokens ({self.dtype_label}, "
                f"{self.cfg.bytes_per_token:,.0f} bytes per token)")

    def set_scales(self, layer: int, scales: np.ndarray) -> None:
        """Fix a quantized layer's f32 [2, hkv] K/V scales (from the checkpoint): positive
        scales are never recalibrated."""
        ptr = self.scale_ptrs[layer]
        if not ptr:
            raise ValueError(f"KV layer {layer} is bf16: it has no scales")
        arr = np.ascontiguousarray(scales, dtype=np.float32)
        if arr.shape != (2, self.cfg.num_kv_heads) or not (arr > 0).all() \
                or not np.isfinite(arr).all():
            raise ValueError(f"KV layer {layer}: scales must be positive finite f32 "
                             f"[2, {self.cfg.num_kv_heads}], got shape {arr.shape}")
        self._fixed_scales[layer] = arr
        self.backend.copy_h2d(ptr, arr)

    def reset_scales(self) -> None:
        """Zero every calibrated scale, keeping the checkpoint's: the next prefill calibrates
        again (after the preflight step, whose synthetic tokens must not fix the scales)."""
        if self.cfg.scale_bytes:
            self.backend.memset(self._pools + self.cfg.pool_bytes, 0, self.cfg.scale_bytes)
        for layer, arr in self._fixed_scales.items():
            self.backend.copy_h2d(self.scale_ptrs[layer], arr)

    def k_cache(self, layer: int) -> DevicePtr:
        return self.k_ptrs[layer]

    def v_cache(self, layer: int) -> DevicePtr:
        return self.v_ptrs[layer]

    def set_block_table(self, row: int, blocks: Sequence[int]) -> None:
        """Make batch row `row` list `blocks`; entries past them are zeroed."""
        n = len(blocks)
        if n > self.max_blocks_per_seq:
            raise ValueError(f"block table of {n} blocks exceeds max_blocks_per_seq="
                             f"{self.max_blocks_per_seq}")
        line = self.block_tables_host[row]
        if n:
            seg = line[:n]
            seg[:] = blocks
            if int(seg.min()) < 0 or int(seg.max()) >= self.num_blocks:
                bad = [b for b in blocks if not 0 <= b < self.num_blocks]
                line[:n] = 0
                raise KvBlockError(f"block ids {bad[:8]} outside 0..{self.num_blocks - 1}")
        old = self._row_len[row]
        if old > n:
            line[n:old] = 0
        self._row_len[row] = n
        if row < self._dirty_lo:
            self._dirty_lo = row
        if row >= self._dirty_hi:
            self._dirty_hi = row + 1

    def clear_row(self, row: int) -> None:
        self.set_block_table(row, ())

    def upload_block_tables(self, stream: Stream | None = None) -> int:
        """Copy the rows edited since the last upload (one contiguous copy); returns how many."""
        lo, hi = self._dirty_lo, self._dirty_hi
        if lo >= hi:
            return 0
        row_bytes = 4 * self.max_blocks_per_seq
        self.backend.copy_h2d(self.block_tables + lo * row_bytes,
                              self.block_tables_host[lo:hi], stream)
        self._dirty_lo, self._dirty_hi = len(self._row_len), 0
        return hi - lo

    def release(self) -> None:
        """Free the device memory (at shutdown)."""
        if self._pools:
            self.backend.free(self._pools)
            self.backend.free(self.block_tables)
            self._pools = 0
