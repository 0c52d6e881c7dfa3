"""Reference for stage_step_inputs_i32 (kernels/*/common/step_io.cu): a captured decode
step's input copy as a kernel inside its graph.

dst[w] = src[w] over the three token spans [k * tok_stride, + tokens) and the tail
[tail_at, + tail_words); a negative word v of the first span (a carried token id) takes
sampled[-1 - v]; then ack[0] = src[seq_word].
"""

from __future__ import annotations

import numpy as np

from ..gpu import Dim3
from ..kernel_abi import STEP_STAGE_INPUTS
from . import HostMemory, reference


@reference(STEP_STAGE_INPUTS)
def stage_step_inputs_i32(mem: HostMemory, grid: Dim3, block: Dim3, src: int, dst: int,
                          tokens: int, tok_stride: int, tail_at: int, tail_words: int,
                          sampled: int, ack: int, seq_word: int) -> None:
    for k in range(3):
        got = mem.view(src + 4 * k * tok_stride, np.int32, tokens).copy()
        if k == 0:
            carried = got < 0
            if carried.any():
                rows = (-1 - got[carried]).astype(np.int64)
                got[carried] = mem.view(sampled, np.int32, int(rows.max()) + 1)[rows]
        mem.view(dst + 4 * k * tok_stride, np.int32, tokens)[:] = got
    mem.view(dst + 4 * tail_at, np.int32, tail_words)[:] = mem.view(src + 4 * tail_at, np.int32,
                                                                    tail_words)
    mem.view(ack, np.int32, 1)[0] = mem.view(src + 4 * seq_word, np.int32, 1)[0]
