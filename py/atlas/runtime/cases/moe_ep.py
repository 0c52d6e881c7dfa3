"""Check cases for moe_ep_localize_i32: each rank of 2- and 4-way groups over decode and
prefill id lists, including ids on the range's edges and the -1 a previous rewrite left, and
rows carrying a shared expert's slots after the routed ids (left untouched)."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, moe_ep

#: (rows, top_k, shared slots, experts, ranks): Qwen3-30B-A3B decode at EP=2, a prefill
#: chunk at EP=4, Qwen2-MoE's 60 experts at EP=2 with 4 shared-expert slots per row (a row
#: count past one block)
SHAPES = [(1, 8, 0, 128, 2), (300, 8, 0, 128, 4), (37, 4, 4, 60, 2)]


def _case(rng: np.random.Generator, rows: int, top_k: int, shared: int, experts: int,
          rank: int, ranks: int) -> KernelCase:
    count, stride = experts // ranks, top_k + shared
    first = rank * count
    ids = rng.integers(0, experts, (rows, stride)).astype(np.int32)
    ids.flat[:4] = [first, first + count - 1, (first + count) % experts, -1]

    def oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        src = inputs["ids"].astype(np.int64)
        mine = (src >= first) & (src < first + count)
        out = np.where(mine, src - first, -1)
        out[:, top_k:] = src[:, top_k:]  # the shared expert's slots are not routed ids
        return {"ids": out}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        moe_ep.localize_ids(KernelCache(backend), stream, p["ids"], rows, stride, top_k, first,
                            count)

    return KernelCase(f"moe_ep_localize_{rows}x{top_k}+{shared}_e{experts}_r{rank}of{ranks}",
                      "moe_ep", {"ids": ids}, {"ids": OutputSpec(DType.I32, (rows, stride))},
                      run, oracle)


@kernel_cases("moe_ep")
def moe_ep_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [_case(rng, rows, k, sh, e, rank, ranks) for rows, k, sh, e, ranks in SHAPES
            for rank in range(ranks)]
