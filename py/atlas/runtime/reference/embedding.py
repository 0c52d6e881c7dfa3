"""Reference for embedding_bf16 and embedding_scaled_bf16 (kernels/*/common/embedding.cu).

out[i, :] = table[ids[i], :] (bf16 rows; the scaled entry times `scale`, rounded to bf16
once); an id outside [0, vocab) yields a zero row. The model also uses the plain entry as a
row gather (ids = row indices, table = activations).
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import EMBEDDING, EMBEDDING_SCALED
from . import HostMemory, reference


@reference(EMBEDDING)
def embedding_bf16(mem: HostMemory, grid: Dim3, block: Dim3, ids: int, table: int, out: int,
                   n: int, dim: int, vocab: int) -> None:
    idx = mem.view(ids, np.int32, n).astype(np.int64)
    valid = (idx >= 0) & (idx < vocab)
    rows = mem.view(table, np.uint16, vocab * dim).reshape(vocab, dim)[np.where(valid, idx, 0)]
    rows[~valid] = 0
    mem.view(out, np.uint16, n * dim)[:] = rows.reshape(-1)


@reference(EMBEDDING_SCALED)
def embedding_scaled_bf16(mem: HostMemory, grid: Dim3, block: Dim3, ids: int, table: int,
                          out: int, n: int, dim: int, vocab: int, scale: float) -> None:
    embedding_bf16(mem, grid, block, ids, table, out, n, dim, vocab)
    rows = mem.view(out, np.uint16, n * dim)
    rows[:] = f32_to_bf16_bits(bf16_bits_to_f32(rows) * np.float32(scale))
