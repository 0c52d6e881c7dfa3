"""Launch builder and workspace layout of the one-shot all-reduce (allreduce.cu).

Each rank owns a workspace of `workspace_bytes(capacity)`: arrival flags, per-block call
counters and an error word in its first `DATA_OFFSET` bytes, then two bf16 buffers of
`capacity` elements (calls alternate between them). Every rank's workspace must start zeroed
and be mapped into every other rank (comm/oneshot.py does that over CUDA IPC); `peers` is a
device array of the world's workspace addresses as this process sees them, own included.
The grid is the same `ONESHOT_BLOCKS` blocks on every call: the per-block call counters of
all ranks advance together only if every call runs every block.
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import ALLREDUCE_ONESHOT
from . import KernelCache
from ._preconditions import require_aligned, require_multiple

#: allreduce.cu kMaxWorld, kMaxBlocks, kDataOffset, kErrorOffset
MAX_WORLD = 8
MAX_BLOCKS = 64
DATA_OFFSET = 4096
ERROR_OFFSET = MAX_BLOCKS * MAX_WORLD * 4 + MAX_BLOCKS * 4
ONESHOT_BLOCKS = 16
ONESHOT_THREADS = 512


def workspace_bytes(capacity: int) -> int:
    """Bytes of one rank's workspace for messages of up to `capacity` bf16 elements."""
    require_multiple("allreduce_oneshot", "capacity", capacity, 8)
    return DATA_OFFSET + 2 * 2 * capacity


def oneshot(kc: KernelCache, stream: Stream, peers: DevicePtr, inp: DevicePtr, out: DevicePtr,
            count: int, capacity: int, world: int, rank: int) -> None:
    """out [count] = the bf16 sum over the world's `inp` (rank order, float32 accumulation)."""
    if not 1 <= world <= MAX_WORLD or not 0 <= rank < world:
        raise ValueError(f"allreduce_oneshot: rank {rank} of world {world} (at most "
                         f"{MAX_WORLD} ranks)")
    if count > capacity:
        raise ValueError(f"allreduce_oneshot: {count} elements exceed the workspace's "
                         f"{capacity}")
    require_multiple("allreduce_oneshot", "count", count, 8)
    for name, ptr in (("in", inp), ("out", out)):
        require_aligned("allreduce_oneshot", name, ptr, 16)
    require_aligned("allreduce_oneshot", "peers", peers, 8)
    kc.get(ALLREDUCE_ONESHOT)(stream, ONESHOT_BLOCKS, ONESHOT_THREADS, 0, peers, inp, out, count,
                              capacity, world, rank)
