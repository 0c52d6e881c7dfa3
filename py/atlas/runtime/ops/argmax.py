"""Launch builder for the row argmax (argmax.cu): greedy token selection.

A row is split into ARGMAX_CHUNK-value chunks, one block each; the blocks leave (value, index)
partials in caller-owned scratch and the last block of a row reduces them. `counters` (u32,
one per row) must start zeroed; every launch leaves them zero, so a captured launch replays.
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import ARGMAX
from . import KernelCache
from ._preconditions import require_aligned

#: argmax.cu kChunk / kThreads: 4096 values per 256-thread block
ARGMAX_CHUNK = 4096
ARGMAX_THREADS = 256
#: argmax.cu ArgBest: one (f32 value, i32 index) partial per block
ARGMAX_PARTIAL_BYTES = 8


def argmax_chunks(n: int) -> int:
    """Blocks per row of n values."""
    return -(-n // ARGMAX_CHUNK)


def argmax_scratch_bytes(rows: int, n: int) -> tuple[int, int]:
    """(partials, counters) bytes for launches of up to `rows` rows of n values."""
    return rows * argmax_chunks(n) * ARGMAX_PARTIAL_BYTES, 4 * rows


def argmax(kc: KernelCache, stream: Stream, logits: DevicePtr, out: DevicePtr,
           partials: DevicePtr, counters: DevicePtr, rows: int, n: int) -> None:
    """out[r] (i32) = index of the largest logits[r, :n] (f32); lowest index on ties."""
    if n < 1:
        raise ValueError(f"argmax: n={n} must be positive")
    if rows > 65535:
        raise ValueError(f"argmax: rows={rows} exceeds the grid's 65535 rows")
    for name, ptr in (("logits", logits), ("out", out), ("partials", partials),
                      ("counters", counters)):
        require_aligned("argmax", name, ptr, 4)
    if rows:
        kc.get(ARGMAX)(stream, (argmax_chunks(n), rows, 1), ARGMAX_THREADS, 0, logits, out,
                       partials, counters, rows, n)
