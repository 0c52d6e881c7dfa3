"""Check cases for embedding_bf16: in-range ids, repeated ids, and out-of-range ids (zeros);
and embedding_scaled_bf16 (Gemma's sqrt(hidden) as bf16: one rounding of the product)."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, embedding
from .gemv import random_bf16

#: (n, vocab, dim): one vector per row, SmolLM2 width, a width with a partial thread block;
#: decode batches whose 4096 / 1024-wide rows split over several blocks; then rows above
#: ops.embedding.EMBEDDING_LATENCY_ROWS (a block per row, or several for 8200 = 1025 vectors)
SHAPES = [(1, 3, 8), (9, 50, 576), (6, 1000, 2056), (1, 64, 4096), (33, 100, 1024),
          (65, 70, 576), (70, 40, 8200), (2048, 300, 4096)]


#: Gemma-3-1B's embedding scale, sqrt(1152) = 33.94 as bf16 (34.0)
GEMMA_SCALE = float(bf16_bits_to_f32(f32_to_bf16_bits(np.array([1152 ** 0.5], np.float32)))[0])


def _case(rng: np.random.Generator, n: int, vocab: int, dim: int,
          scale: float = 1.0) -> KernelCase:
    ids = rng.integers(0, vocab, n).astype(np.int32)
    if n > 3:
        ids[1], ids[2], ids[3] = -1, vocab, ids[0]  # below, above, repeated
    inputs = {"ids": ids, "table": random_bf16(rng, (vocab, dim), 2.0)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        embedding.embedding(KernelCache(backend), stream, p["ids"], p["table"], p["out"], n, dim,
                            vocab, scale)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        table = bf16_bits_to_f32(x["table"]).astype(np.float64)
        rows = [table[i] if 0 <= i < table.shape[0] else np.zeros(table.shape[1])
                for i in x["ids"].tolist()]
        return {"out": np.stack(rows) * scale}

    # scaled: the product rounded once, half a bf16 ulp from the float64 product
    tol = (0.0, 0.0) if scale == 1.0 else (0.0, 2.0 ** -8)
    name = "embedding" if scale == 1.0 else "embedding_scaled"
    return KernelCase(f"{name}_{n}x{vocab}x{dim}", "embedding", inputs,
                      {"out": OutputSpec(DType.BF16, (n, dim), tol=tol)}, run, oracle)


@kernel_cases("embedding")
def embedding_cases(rng: np.random.Generator) -> list[KernelCase]:
    return ([_case(rng, *shape) for shape in SHAPES]
            + [_case(rng, *shape, scale=GEMMA_SCALE) for shape in SHAPES[:4]])
