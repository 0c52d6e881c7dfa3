"""Reference for causal_conv1d_silu_bf16 (kernels/*/common/conv1d.cu).

Specification (transformers' causal_conv1d_fn / causal_conv1d_update with SiLU, bf16): for
each sequence b of the step (tokens cu_q[b] .. cu_q[b+1]-1 at positions start ..
kv_lens[b] - 1) and channel c, with the input history h = the inputs at positions
start - kernel + 1 .. start - 1 from the slot's conv state (zero below position 0):

    y[t, c]   = bf16(sum_j w[c, j] * x[t - kernel + 1 + j, c])      (sum in f32)
    out[t, c] = bf16(y * sigmoid(y))

The slot's state is a ring bf16 [kernel, C] holding the input at position p in row
p % kernel; the chunk's last kernel - 1 inputs are written into it (the rows of earlier
positions stay). The reference sums in float64 (the kernel's f32 sum differs by
accumulation order only).
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import Dim3
from ..kernel_abi import CONV1D
from . import HostMemory, pitched_rows, reference, step_sequences


def conv_silu(xs: np.ndarray, w: np.ndarray) -> np.ndarray:
    """xs float [history + n, C] (history = kernel - 1 rows first), w [C, kernel] ->
    float32 [n, C] bf16-valued outputs."""
    kernel = w.shape[1]
    n = xs.shape[0] - (kernel - 1)
    acc = np.zeros((n, xs.shape[1]), dtype=np.float64)
    for j in range(kernel):
        acc += xs[j:j + n].astype(np.float64) * w[:, j].astype(np.float64)
    y = round_bf16(acc.astype(np.float32))
    return round_bf16((y / (np.float32(1.0) + np.exp(-y))).astype(np.float32))


@reference(CONV1D)
def causal_conv1d_silu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, x_pitch: int,
                            w: int, conv_state: int, state_slots: int, cu_q: int, kv_lens: int,
                            out: int, num_seqs: int, channels: int, kernel: int) -> None:
    seqs = step_sequences(mem, cu_q, kv_lens, state_slots, num_seqs)
    if not seqs:
        return
    total = seqs[-1][1]
    xin = pitched_rows(mem, x, total, x_pitch, channels)
    wf = bf16_bits_to_f32(mem.view(w, np.uint16, channels * kernel)).reshape(channels, kernel)
    o = mem.view(out, np.uint16, total * channels).reshape(total, channels)
    for seq in seqs:
        ring = conv_ring(mem, conv_state, seq.slot, kernel, channels)
        xs = np.concatenate([ring_history(ring, seq.start, kernel - 1), xin[seq.lo:seq.hi]])
        o[seq.lo:seq.hi] = f32_to_bf16_bits(conv_silu(bf16_bits_to_f32(xs), wf))
        ring_append(ring, seq.start, xin[seq.lo:seq.hi], kernel - 1)


def conv_ring(mem: HostMemory, conv_state: int, slot: int, kernel: int,
              channels: int) -> np.ndarray:
    """A slot's conv state: a writable bf16-bits view [kernel, channels]."""
    per_slot = kernel * channels
    return mem.view(conv_state + 2 * slot * per_slot, np.uint16, per_slot).reshape(kernel,
                                                                                  channels)


def ring_history(ring: np.ndarray, start: int, rows: int) -> np.ndarray:
    """The inputs at positions start - rows .. start - 1 (bf16 bits; zero below 0)."""
    pos = np.arange(start - rows, start)
    return np.where((pos >= 0)[:, None], ring[pos % ring.shape[0]], np.uint16(0))


def ring_append(ring: np.ndarray, start: int, x: np.ndarray, keep: int) -> None:
    """Write the last `keep` >= 1 rows of x (the inputs at positions start ..) into the ring."""
    pos = np.arange(start, start + x.shape[0])[-keep:]
    ring[pos % ring.shape[0]] = x[pos - start]
