"""Reference for allreduce_oneshot_bf16 (kernels/*/common/allreduce.cu): the protocol on one
host, every workspace in the same memory.

For each block b (e = own calls[b] + 1): copy `in` into the own workspace's data[e & 1],
publish e into every peer's flags[b][rank]; every peer must already have published e into
the own flags[b][p] (on the host there is no one to wait for: a missing arrival is an
error, where the GPU would time out); out = bf16(sum over ranks in order of float(data_r));
calls[b] = e.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import ALLREDUCE_ONESHOT
from ..ops.allreduce import DATA_OFFSET, MAX_BLOCKS, MAX_WORLD
from . import HostMemory, reference

_CALLS = MAX_BLOCKS * MAX_WORLD * 4


@reference(ALLREDUCE_ONESHOT)
def allreduce_oneshot_bf16(mem: HostMemory, grid: Dim3, block: Dim3, peers: int, inp: int,
                           out: int, count: int, capacity: int, world: int, rank: int) -> None:
    blocks = grid[0]
    bases = [int(p) for p in mem.view(peers, np.uint64, world)]
    own = bases[rank]
    calls = mem.view(own + _CALLS, np.uint32, blocks)
    if (calls != calls[0]).any():
        raise RuntimeError(f"allreduce_oneshot: per-block call counters disagree: {calls}")
    e = int(calls[0]) + 1
    offset = DATA_OFFSET + (e & 1) * 2 * capacity
    mem.view(own + offset, np.uint16, count)[:] = mem.view(inp, np.uint16, count)
    for p, base in enumerate(bases):
        mem.view(base, np.uint32, MAX_BLOCKS * MAX_WORLD).reshape(
            MAX_BLOCKS, MAX_WORLD)[:blocks, rank] = e
    arrived = mem.view(own, np.uint32, MAX_BLOCKS * MAX_WORLD).reshape(
        MAX_BLOCKS, MAX_WORLD)[:blocks, :world]
    if (arrived < e).any():
        raise RuntimeError(f"allreduce_oneshot: call {e} on rank {rank}: peers "
                           f"{sorted(set(np.nonzero(arrived < e)[1].tolist()))} have not "
                           "arrived")
    acc = np.zeros(count, np.float32)
    for base in bases:
        acc = acc + bf16_bits_to_f32(mem.view(base + offset, np.uint16, count))
    mem.view(out, np.uint16, count)[:] = f32_to_bf16_bits(acc)
    calls[:] = e
