"""Reference for the gated delta rule (kernels/*/common/gated_delta.cu).

Specification (transformers' Qwen3-Next / Qwen3.5 `torch_*_gated_delta_rule` with
use_qk_l2norm_in_kernel=True), per value head h of a sequence, reading key head
h // (hv / hk):

    q, k  <- x / sqrt(sum(x^2) + 1e-6)        (L2 norm over dk), q *= dk^-0.5
    beta  =  bf16(sigmoid(b))                 (transformers takes the sigmoid in bf16)
    g     = -exp(A_log) * softplus(a + dt_bias)        (softplus threshold 20, as torch)
    S     =  exp(g) S;   S += k (beta (v - k^T S))^T;   o = q^T S     (one token at a time)

S is the fp32 [dk, dv] state of the sequence's slot; a sequence whose step starts at
position 0 starts from zero. The output is rounded once to bf16.

The prefill kernel evaluates the same function in chunks of CHUNK tokens (the WY/UT form,
`chunk_form` below: within a chunk, with gamma the cumulative sum of g,
A[i, j] = beta_i (k_i . k_j) exp(gamma_i - gamma_j) for j < i and
R_i = beta_i (v_i - exp(gamma_i) k_i^T S),
    (I + A) V' = R,   O = exp(gamma) Q S + ((Q K^T) * decay_{j <= i}) V',
    S <- exp(gamma_last) S + (K * exp(gamma_last - gamma))^T V'),
and the decode kernel one token at a time (`recurrent_form`). Both references evaluate in
float64; the CUDA kernels in float32 agree with them to float32 accumulation error. The
tests check both forms against a naive per-token float64 recurrence written separately
(runtime/cases/gated_delta.py).
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import Dim3
from ..kernel_abi import GATED_DELTA_CHUNK, GATED_DELTA_CHUNK_TC, GATED_DELTA_STEP
from ..ops.linear_attention import CHUNK
from . import HostMemory, pitched_rows, reference, step_sequences

L2_EPS = 1e-6


def softplus(x: np.ndarray) -> np.ndarray:
    """torch.nn.functional.softplus (beta 1, threshold 20)."""
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def gate_terms(b: np.ndarray, a: np.ndarray, a_log: np.ndarray,
               dt_bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(g, beta) float64 [T, hv] from the bf16-valued projections b, a and the weights."""
    b32 = np.asarray(b, dtype=np.float32)
    beta = round_bf16((1.0 / (1.0 + np.exp(-b32))).astype(np.float32)).astype(np.float64)
    a64 = np.asarray(a, dtype=np.float64) + np.asarray(dt_bias, dtype=np.float64)
    g = -np.exp(np.asarray(a_log, dtype=np.float64)) * softplus(a64)
    return g, beta


def normalized_qk(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """L2-normalized float64 q (times dk^-0.5) and k, both [..., dk]."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    qn = q / np.sqrt((q * q).sum(-1, keepdims=True) + L2_EPS) * q.shape[-1] ** -0.5
    kn = k / np.sqrt((k * k).sum(-1, keepdims=True) + L2_EPS)
    return qn, kn


def chunk_form(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, beta: np.ndarray,
               state: np.ndarray, chunk: int = CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """Chunked delta rule of one sequence: q, k [T, H, dk] (normalized), v [T, H, dv],
    g, beta [T, H], state [H, dk, dv]; returns (o [T, H, dv], final state), float64."""
    s = np.asarray(state, dtype=np.float64).copy()
    out = np.empty(v.shape, dtype=np.float64)
    for c0 in range(0, q.shape[0], chunk):
        sl = slice(c0, c0 + chunk)
        qc, kc, vc = (x[sl].transpose(1, 0, 2) for x in (q, k, v))    # [H, n, d]
        gam = np.cumsum(g[sl].T, axis=1)                                # [H, n]
        bc = beta[sl].T
        n = gam.shape[1]
        lower = np.tril(np.ones((n, n), dtype=bool))
        diff = np.where(lower, gam[:, :, None] - gam[:, None, :], -np.inf)
        decay = np.exp(diff)                                            # 0 above the diagonal
        strict = decay * ~np.eye(n, dtype=bool)
        a_mat = bc[:, :, None] * (kc @ kc.transpose(0, 2, 1)) * strict
        r = bc[:, :, None] * (vc - np.exp(gam)[:, :, None] * (kc @ s))
        v_new = np.linalg.solve(np.eye(n) + a_mat, r)
        o = np.exp(gam)[:, :, None] * (qc @ s) + ((qc @ kc.transpose(0, 2, 1)) * decay) @ v_new
        out[sl] = o.transpose(1, 0, 2)
        last = gam[:, -1:]
        s = (np.exp(last)[:, :, None] * s
             + (kc * np.exp(last - gam)[:, :, None]).transpose(0, 2, 1) @ v_new)
    return out, s


def recurrent_form(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray,
                   beta: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same function one token at a time (shapes as chunk_form), float64."""
    s = np.asarray(state, dtype=np.float64).copy()
    out = np.empty(v.shape, dtype=np.float64)
    for t in range(q.shape[0]):
        s *= np.exp(g[t])[:, None, None]
        kv = np.einsum("hk,hkv->hv", k[t], s)
        delta = beta[t][:, None] * (v[t] - kv)
        s += k[t][:, :, None] * delta[:, None, :]
        out[t] = np.einsum("hk,hkv->hv", q[t], s)
    return out, s


def _run(mem: HostMemory, qkv: int, qkv_pitch: int, ba: int, ba_pitch: int, a_log: int,
         dt_bias: int, state: int, state_slots: int, cu_q: int, kv_lens: int, out: int,
         num_seqs: int, hk: int, hv: int, dk: int, dv: int, recurrent: bool) -> None:
    seqs = step_sequences(mem, cu_q, kv_lens, state_slots, num_seqs)
    if not seqs:
        return
    total = seqs[-1][1]
    x = bf16_bits_to_f32(pitched_rows(mem, qkv, total, qkv_pitch, 2 * hk * dk + hv * dv))
    group = hv // hk
    q = np.repeat(x[:, :hk * dk].reshape(total, hk, dk), group, axis=1)
    k = np.repeat(x[:, hk * dk:2 * hk * dk].reshape(total, hk, dk), group, axis=1)
    v = x[:, 2 * hk * dk:].reshape(total, hv, dv).astype(np.float64)
    b_a = bf16_bits_to_f32(pitched_rows(mem, ba, total, ba_pitch, 2 * hv))
    a_w = bf16_bits_to_f32(mem.view(a_log, np.uint16, hv))
    dt_w = bf16_bits_to_f32(mem.view(dt_bias, np.uint16, hv))
    g, beta = gate_terms(b_a[:, :hv], b_a[:, hv:], a_w, dt_w)
    qn, kn = normalized_qk(q, k)
    o = mem.view(out, np.uint16, total * hv * dv).reshape(total, hv, dv)
    per_slot = hv * dk * dv
    form = recurrent_form if recurrent else chunk_form
    for seq in seqs:
        lo, hi = seq.lo, seq.hi
        sv = mem.view(state + 4 * seq.slot * per_slot, np.float32, per_slot)
        s0 = np.zeros((hv, dk, dv)) if seq.fresh else sv.reshape(hv, dk, dv)
        ob, s1 = form(qn[lo:hi], kn[lo:hi], v[lo:hi], g[lo:hi], beta[lo:hi], s0)
        o[lo:hi] = f32_to_bf16_bits(ob.astype(np.float32))
        sv[:] = s1.astype(np.float32).reshape(-1)


@reference(GATED_DELTA_CHUNK)
def gated_delta_chunk_bf16(mem: HostMemory, grid: Dim3, block: Dim3, *args: int) -> None:
    _run(mem, *args, recurrent=False)


@reference(GATED_DELTA_CHUNK_TC)
def gated_delta_chunk_tc_bf16(mem: HostMemory, grid: Dim3, block: Dim3, *args: int) -> None:
    """The same function: the tensor-core kernel's split-bf16 products are near-f32."""
    _run(mem, *args, recurrent=False)


@reference(GATED_DELTA_STEP)
def gated_delta_step_bf16(mem: HostMemory, grid: Dim3, block: Dim3, *args: int) -> None:
    _run(mem, *args, recurrent=True)
