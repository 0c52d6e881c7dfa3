"""Check cases for allreduce_oneshot_bf16 on one GPU: a world of one (three calls in a row:
both halves of the double buffer, the call counters), and both ranks of a world of two whose
workspaces live on the same GPU (rank 1's arrival pre-published for rank 0's call, rank 0's
publication then serving rank 1's): their sums must match the oracle and each other.
The world-of-one cases come first in each count: the GPU graph check captures a module's
first case and replays it (a world of one can run any number of calls; the two-rank case's
pre-published arrival is for one call)."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, allreduce
from .gemv import random_bf16

#: elements: one Qwen3-32B decode row (hidden 5120), 64 rows of a 4096-wide model, and a
#: count that leaves the grid's last stride partly empty
COUNTS = [5120, 64 * 4096, 8 * 1000 + 8]


class _PeersOnce:
    """Writes a case's peer table (its workspaces' device addresses) into its `peers` buffer
    once per set of buffers. The GPU graph check runs a case once eagerly, then again on the
    same buffers inside a stream capture, where a host-to-device copy would invalidate the
    capture: the table is already in place by then. Buffer sets are told apart by the
    identity of their pointer dicts (held here, so an identity is never reused)."""

    def __init__(self) -> None:
        self._done: list[dict[str, DevicePtr]] = []

    def __call__(self, backend: GpuBackend, p: dict[str, DevicePtr], names: list[str]) -> None:
        if any(q is p for q in self._done):
            return
        backend.copy_h2d(p["peers"], np.array([p[n] for n in names], dtype=np.uint64))
        self._done.append(p)


def _world1(rng: np.random.Generator, count: int) -> KernelCase:
    capacity = count + 64
    inputs = {"x": random_bf16(rng, (count,), 2.0),
              "ws": np.zeros(allreduce.workspace_bytes(capacity), np.uint8),
              "peers": np.zeros(1, np.uint64)}

    peers = _PeersOnce()

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        peers(backend, p, ["ws"])
        kc = KernelCache(backend)
        for _ in range(3):  # calls 1, 2, 3: data[1], data[0], data[1]
            allreduce.oneshot(kc, stream, p["peers"], p["x"], p["out"], count, capacity, 1, 0)

    return KernelCase(f"allreduce_oneshot_w1_{count}", "allreduce", inputs,
                      {"out": OutputSpec(DType.BF16, (count,), tol=(0.0, 0.0))}, run,
                      lambda i: {"out": bf16_bits_to_f32(i["x"]).astype(np.float64)})


def _world2(rng: np.random.Generator, count: int) -> KernelCase:
    capacity = count
    nbytes = allreduce.workspace_bytes(capacity)
    x, y = random_bf16(rng, (count,), 2.0), random_bf16(rng, (count,), 2.0)
    ws0 = np.zeros(nbytes, np.uint8)
    flags0 = ws0[:allreduce.DATA_OFFSET].view(np.uint32)
    flags0[:allreduce.MAX_BLOCKS * allreduce.MAX_WORLD].reshape(
        allreduce.MAX_BLOCKS, allreduce.MAX_WORLD)[:, 1] = 1  # rank 1 arrived
    ws1 = np.zeros(nbytes, np.uint8)  # rank 1 published y into data[1] of call 1
    ws1[allreduce.DATA_OFFSET + 2 * capacity:].view(np.uint16)[:] = y
    inputs = {"x": x, "y": y, "ws0": ws0, "ws1": ws1, "peers": np.zeros(2, np.uint64)}

    peers = _PeersOnce()

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        peers(backend, p, ["ws0", "ws1"])
        kc = KernelCache(backend)
        allreduce.oneshot(kc, stream, p["peers"], p["x"], p["out0"], count, capacity, 2, 0)
        allreduce.oneshot(kc, stream, p["peers"], p["y"], p["out1"], count, capacity, 2, 1)

    def oracle(i: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        total = (bf16_bits_to_f32(i["x"]).astype(np.float64)
                 + bf16_bits_to_f32(i["y"]).astype(np.float64))
        return {"out0": total, "out1": total}

    spec = OutputSpec(DType.BF16, (count,))
    return KernelCase(f"allreduce_oneshot_w2_{count}", "allreduce", inputs,
                      {"out0": spec, "out1": spec}, run, oracle)


@kernel_cases("allreduce")
def allreduce_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [make(rng, count) for count in COUNTS for make in (_world1, _world2)]
