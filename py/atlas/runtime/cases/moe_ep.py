"""Check cases for moe_ep_localize_i32: each rank of 2- and 4-way groups over decode and
prefill id lists, including ids on the range's edges and the -1 a previous rewrite left."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, moe_ep

#: (rows, top_k, experts, ranks): Qwen3-30B-A3B decode at EP=2, a prefill chunk at EP=4,
#: Qwen2-MoE's 60 experts at EP=2 (a row count past one block)
SHAPES = [(1, 8, 128, 2), (300, 8, 128, 4), (37, 4, 60, 2)]


def _case(rng: np.random.Generator, rows: int, top_k: int, experts: int, rank: int,
          ranks: int) -> KernelCase:
    count = experts // ranks
    first = rank * count
    ids = rng.integers(0, experts, (rows, top_k)).astype(np.int32)
    ids.flat[:4] = [first, first + count - 1, (first + count) % experts, -1]

    def oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        src = inputs["ids"].astype(np.int64)
        mine = (src >= first) & (src < first + count)
        return {"ids": np.where(mine, src - first, -1)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        moe_ep.localize_ids(KernelCache(backend), stream, p["ids"], rows * top_k, first, count)

    return KernelCase(f"moe_ep_localize_{rows}x{top_k}_e{experts}_r{rank}of{ranks}", "moe_ep",
                      {"ids": ids}, {"ids": OutputSpec(DType.I32, (rows, top_k))}, run, oracle)


@kernel_cases("moe_ep")
def moe_ep_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [_case(rng, rows, k, e, rank, ranks) for rows, k, e, ranks in SHAPES
            for rank in range(ranks)]
