"""Reference for argmax_f32 (kernels/*/common/argmax.cu).

Per row: the index of the largest value; equal values go to the lowest index, NaN entries are
ignored, and a row with nothing but NaN yields 0. The sampler's greedy path uses the same rule.
"""

from __future__ import annotations

import numpy as np

from ..gpu import Dim3
from ..kernel_abi import ARGMAX
from . import HostMemory, reference


def argmax_rows(x: np.ndarray) -> np.ndarray:
    """i32 [rows]: argmax of each row of float32 `x` [rows, n] under the rule above."""
    nan = np.isnan(x)
    best = np.where(nan, -np.inf, x).max(axis=1)
    hit = x == best[:, None]  # NaN never compares equal, so a NaN slot never wins
    return np.where(hit.any(axis=1), hit.argmax(axis=1), 0).astype(np.int32)


@reference(ARGMAX)
def argmax_f32(mem: HostMemory, grid: Dim3, block: Dim3, logits: int, out: int, partials: int,
               counters: int, rows: int, n: int) -> None:
    # partials and counters are the kernel's block-to-block workspace: nothing to model (the
    # counters stay zero, as the kernel leaves them).
    x = mem.view(logits, np.float32, rows * n).reshape(rows, n)
    mem.view(out, np.int32, rows)[:] = argmax_rows(x)
