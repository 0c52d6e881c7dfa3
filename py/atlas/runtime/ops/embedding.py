"""Launch builder for the embedding lookup / row gather (embedding.cu)."""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import EMBEDDING
from . import KernelCache
from ._preconditions import require_aligned, require_multiple, warp_threads

EMBEDDING_MAX_THREADS = 256


def embedding(kc: KernelCache, stream: Stream, ids: DevicePtr, table: DevicePtr, out: DevicePtr,
              n: int, dim: int, vocab: int) -> None:
    """out[i] = table[ids[i]] for i < n (bf16 rows of dim); ids outside [0, vocab) give zeros."""
    require_multiple("embedding", "dim", dim, 8)
    require_aligned("embedding", "table", table, 16)
    require_aligned("embedding", "out", out, 16)
    require_aligned("embedding", "ids", ids, 4)
    if n:
        kc.get(EMBEDDING)(stream, n, warp_threads(dim // 8, EMBEDDING_MAX_THREADS), 0, ids,
                          table, out, n, dim, vocab)
