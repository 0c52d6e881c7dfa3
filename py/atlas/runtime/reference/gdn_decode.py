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
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import GDN_DECODE
from . import HostMemory, pitched_rows, reference, step_sequences
from .conv1d import conv_ring, conv_silu, ring_append, ring_history
from .gated_delta import gate_terms, normalized_qk, recurrent_form
from .gated_rmsnorm import gated_rms_norm


@reference(GDN_DECODE)
def gated_deltanet_decode_bf16(mem: HostMemory, grid: Dim3, block: Dim3, proj: int,
                               proj_pitch: int, conv_w: int, conv_state: int, a_log: int,
                               dt_bias: int, norm_w: int, state: int, state_slots: int,
                               cu_q: int, kv_lens: int, out: int, num_seqs: int, hk: int,
                               hv: int, dk: int, dv: int, kernel: int, eps: float) -> None:
    seqs = step_sequences(mem, cu_q, kv_lens, state_slots, num_seqs)
    if not seqs:
        return
    conv_dim = 2 * hk * dk + hv * dv
    rows = pitched_rows(mem, proj, seqs[-1].hi, proj_pitch, conv_dim + hv * dv + 2 * hv)
    wf = bf16_bits_to_f32(mem.view(conv_w, np.uint16, conv_dim * kernel)).reshape(conv_dim,
                                                                                 kernel)
    a_w = bf16_bits_to_f32(mem.view(a_log, np.uint16, hv))
    dt_w = bf16_bits_to_f32(mem.view(dt_bias, np.uint16, hv))
    norm = bf16_bits_to_f32(mem.view(norm_w, np.uint16, dv))
    o = mem.view(out, np.uint16, seqs[-1].hi * hv * dv).reshape(-1, hv, dv)
    per_slot = hv * dk * dv
    group = hv // hk
    for seq in seqs:
        row = rows[seq.lo:seq.hi]  # one token
        ring = conv_ring(mem, conv_state, seq.slot, kernel, conv_dim)
        xs = np.concatenate([ring_history(ring, seq.start, kernel - 1), row[:, :conv_dim]])
        x = conv_silu(bf16_bits_to_f32(xs), wf)
        ring_append(ring, seq.start, row[:, :conv_dim], kernel - 1)
        q = np.repeat(x[:, :hk * dk].reshape(1, hk, dk), group, axis=1)
        k = np.repeat(x[:, hk * dk:2 * hk * dk].reshape(1, hk, dk), group, axis=1)
        v = x[:, 2 * hk * dk:].reshape(1, hv, dv).astype(np.float64)
        b_a = bf16_bits_to_f32(row[:, conv_dim + hv * dv:])
        g, beta = gate_terms(b_a[:, :hv], b_a[:, hv:], a_w, dt_w)
        qn, kn = normalized_qk(q, k)
        sv = mem.view(state + 4 * seq.slot * per_slot, np.float32, per_slot)
        s0 = np.zeros((hv, dk, dv)) if seq.fresh else sv.reshape(hv, dk, dv)
        core, s1 = recurrent_form(qn, kn, v, g, beta, s0)
        sv[:] = s1.astype(np.float32).reshape(-1)
        core_bf16 = bf16_bits_to_f32(f32_to_bf16_bits(core.astype(np.float32)))
        z = bf16_bits_to_f32(row[:, conv_dim:conv_dim + hv * dv]).reshape(1, hv, dv)
        o[seq.lo:seq.hi] = gated_rms_norm(core_bf16, z, norm, eps)
