"""Launch builder for the embedding lookup / row gather (embedding.cu).

Each thread copies up to EMBEDDING_VECS 16-byte vectors, all loads issued before the stores.
A decode batch (few rows) is latency-bound: warp-sized blocks split each row over several
blocks, so a handful of tokens still spreads over many SMs. Many rows (prefill) are
bandwidth-bound: a row takes one block of up to EMBEDDING_MAX_THREADS threads, small enough
that an SM holds many rows at once (a 2048-token prefill of 4096-wide rows is one wave).
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import EMBEDDING, EMBEDDING_SCALED
from . import KernelCache
from ._preconditions import require_aligned, require_multiple, warp_threads

#: embedding.cu kVecs: 16-byte vectors per thread
EMBEDDING_VECS = 4
EMBEDDING_MAX_THREADS = 128
#: up to this many rows a block is one warp, so a row spreads over several blocks
EMBEDDING_LATENCY_ROWS = 64


def embedding_geometry(n: int, dim: int) -> tuple[tuple[int, int], int]:
    """(grid, block) for n rows of dim: grid = (rows, blocks per row), the row's vectors
    shared evenly between its blocks (8200 = 1025 vectors is 3 x 96 threads, not 3 x 128)."""
    threads_needed = -(-(dim // 8) // EMBEDDING_VECS)
    cap = 32 if n <= EMBEDDING_LATENCY_ROWS else EMBEDDING_MAX_THREADS
    blocks_per_row = -(-threads_needed // cap)
    return (n, blocks_per_row), warp_threads(-(-threads_needed // blocks_per_row), cap)


def embedding(kc: KernelCache, stream: Stream, ids: DevicePtr, table: DevicePtr, out: DevicePtr,
              n: int, dim: int, vocab: int, scale: float = 1.0) -> None:
    """out[i] = table[ids[i]] for i < n (bf16 rows of dim); ids outside [0, vocab) give zeros.
    `scale` != 1: each element times it, rounded to bf16 once (embedding_scaled_bf16)."""
    require_multiple("embedding", "dim", dim, 8)
    require_aligned("embedding", "table", table, 16)
    require_aligned("embedding", "out", out, 16)
    require_aligned("embedding", "ids", ids, 4)
    if n:
        grid, threads = embedding_geometry(n, dim)
        if scale == 1.0:
            kc.get(EMBEDDING)(stream, grid, threads, 0, ids, table, out, n, dim, vocab)
        else:
            kc.get(EMBEDDING_SCALED)(stream, grid, threads, 0, ids, table, out, n, dim, vocab,
                                     scale)
