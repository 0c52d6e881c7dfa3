"""Reference for gated_deltanet_decode_bf16 (kernels/*/common/gdn_decode.cu).

Specification: a Gated-DeltaNet layer's decode step between its projections is the
composition of three kernels' specifications, one token per sequence (row cu_q[b], position
kv_lens[b] - 1):

    x   = conv1d + SiLU of the row's q | k | v channels     (reference/conv1d.py, ring state)
    o   = bf16(one recurrent delta-rule step on x, b, a)    (reference/gated_delta.py)
    out = gated RMSNorm(o, z) per value head               (reference/gated_rmsnorm.py)

with the projection row [q (hk*dk) | k (hk*dk) | v (hv*dv) | z (hv*dv) | b (hv) | a (hv)].
The fused kernel keeps every bf16 rounding of the three (so a layer computes the same
values fused or not); only f32 summation orders differ.

Row b reads its states at slot state_slots[b] and leaves them at state_out[b] (in place
where equal). Rows continuing a run (the same slot as the row before, at the next position:
a verification's K + 1 tokens of one sequence) read the state the row before left instead:
every row is one decode step, its state stored (f32 delta state, bf16 ring) between steps
exactly as separate decode steps store it, so a run computes bit for bit what those steps
do. An out-of-place row writes its whole ring into its out slot (the rows of positions
pos - kernel + 1 .. pos at or above 0): what the in-place step leaves in its slot.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import GDN_DECODE
from . import HostMemory, pitched_rows, reference
from .conv1d import conv_ring, conv_silu, ring_append, ring_history
from .gated_delta import gate_terms, normalized_qk, recurrent_form
from .gated_rmsnorm import gated_rms_norm


@reference(GDN_DECODE)
def gated_deltanet_decode_bf16(mem: HostMemory, grid: Dim3, block: Dim3, proj: int,
                               proj_pitch: int, conv_w: int, conv_state: int, a_log: int,
                               dt_bias: int, norm_w: int, state: int, state_slots: int,
                               state_out: int, cu_q: int, kv_lens: int, out: int,
                               num_seqs: int, hk: int, hv: int, dk: int, dv: int, kernel: int,
                               eps: float) -> None:
    if num_seqs == 0:
        return
    cu = mem.view(cu_q, np.int32, num_seqs + 1).astype(np.int64)
    lens = mem.view(kv_lens, np.int32, num_seqs).astype(np.int64)
    slots = mem.view(state_slots, np.int32, num_seqs).astype(np.int64)
    outs = mem.view(state_out, np.int32, num_seqs).astype(np.int64)
    conv_dim = 2 * hk * dk + hv * dv
    rows = pitched_rows(mem, proj, int(cu[:num_seqs].max()) + 1, proj_pitch,
                        conv_dim + hv * dv + 2 * hv)
    wf = bf16_bits_to_f32(mem.view(conv_w, np.uint16, conv_dim * kernel)).reshape(conv_dim,
                                                                                 kernel)
    a_w = bf16_bits_to_f32(mem.view(a_log, np.uint16, hv))
    dt_w = bf16_bits_to_f32(mem.view(dt_bias, np.uint16, hv))
    norm = bf16_bits_to_f32(mem.view(norm_w, np.uint16, dv))
    o = mem.view(out, np.uint16, (int(cu[:num_seqs].max()) + 1) * hv * dv).reshape(-1, hv, dv)
    per_slot = hv * dk * dv
    group = hv // hk
    for b in range(num_seqs):
        t, pos = int(cu[b]), int(lens[b] - 1)
        continues = b > 0 and slots[b] == slots[b - 1] and lens[b] == lens[b - 1] + 1
        src, dst = (int(outs[b - 1]) if continues else int(slots[b])), int(outs[b])
        if continues and src == slots[b]:
            raise ValueError(f"gdn_decode: row {b} continues a run whose row {b - 1} wrote in "
                             "place; a run of several rows needs out slots apart from its slot")
        row = rows[t:t + 1]  # one token
        ring_in = conv_ring(mem, conv_state, src, kernel, conv_dim)
        hist = ring_history(ring_in, pos, kernel - 1)
        x = conv_silu(bf16_bits_to_f32(np.concatenate([hist, row[:, :conv_dim]])), wf)
        ring_out = conv_ring(mem, conv_state, dst, kernel, conv_dim)
        if dst == src:
            ring_append(ring_out, pos, row[:, :conv_dim], 1)
        else:  # every row: positions pos - kernel + 1 .. pos (those at or above 0)
            first = max(0, pos - (kernel - 1))
            window = np.concatenate([hist, row[:, :conv_dim]])[first - (pos - (kernel - 1)):]
            ring_append(ring_out, first, window, len(window))
        q = np.repeat(x[:, :hk * dk].reshape(1, hk, dk), group, axis=1)
        k = np.repeat(x[:, hk * dk:2 * hk * dk].reshape(1, hk, dk), group, axis=1)
        v = x[:, 2 * hk * dk:].reshape(1, hv, dv).astype(np.float64)
        b_a = bf16_bits_to_f32(row[:, conv_dim + hv * dv:])
        g, beta = gate_terms(b_a[:, :hv], b_a[:, hv:], a_w, dt_w)
        qn, kn = normalized_qk(q, k)
        s_in = mem.view(state + 4 * src * per_slot, np.float32, per_slot)
        s0 = np.zeros((hv, dk, dv)) if pos == 0 else s_in.reshape(hv, dk, dv)
        core, s1 = recurrent_form(qn, kn, v, g, beta, s0)
        mem.view(state + 4 * dst * per_slot, np.float32, per_slot)[:] = (
            s1.astype(np.float32).reshape(-1))
        core_bf16 = bf16_bits_to_f32(f32_to_bf16_bits(core.astype(np.float32)))
        z = bf16_bits_to_f32(row[:, conv_dim:conv_dim + hv * dv]).reshape(1, hv, dv)
        o[t:t + 1] = gated_rms_norm(core_bf16, z, norm, eps)
