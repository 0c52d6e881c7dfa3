"""A thread-level numpy transliteration of gated_delta.cu and conv1d.cu, checked against the
reference kernels: the index math of the CUDA source (shared-memory carve-up and padded
strides, the per-phase idx -> (row, column) maps, the forward substitution's quads, the
state-slot and fresh-sequence handling, the conv's sliding window and state rows) without a
GPU. Each function follows its kernel phase by phase; a loop over `idx` stands for the
block's threads striding over it (every idx is owned by one thread and no phase reads what
the same phase writes, so the order is immaterial), float32 throughout as on the device."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from atlas.runtime.cases.gated_delta import Heads
from atlas.runtime.host import HostBackend
from atlas.runtime.ops import KernelCache, linear_attention

K_CHUNK, K_DV_TILE, THREADS, WARPS = 64, 32, 128, 4
f32 = np.float32


def _gate(ba_row: np.ndarray, h: int, hv: int, a_log: float, dt_bias: float):
    b = f32(ba_row[h])
    x = f32(ba_row[hv + h]) + f32(dt_bias)
    softplus = x if x > 20 else f32(np.log1p(np.exp(x)))
    beta = round_bf16(np.array([1 / (1 + np.exp(-b))], np.float32))[0]
    return f32(beta), f32(-np.exp(f32(a_log)) * softplus)


class Operand:
    """gated_delta.cu's F32Operand: element (row, col) at smem[base + row * rs + col * cs],
    times smem[scale + col] when scale is given."""

    def __init__(self, smem, base, rs, cs, scale=None):
        self.smem, self.base, self.rs, self.cs, self.scale = smem, base, rs, cs, scale

    def tile(self, r0, c0, rows, cols):
        r = np.arange(r0, r0 + rows)[:, None]
        c = np.arange(c0, c0 + cols)[None, :]
        v = self.smem[self.base + r * self.rs + c * self.cs]
        return v * self.smem[self.scale + c] if self.scale is not None else v

    def a_tile(self, r0, k0):
        """The 16x16 A operand at (r0, k0)."""
        return self.tile(r0, k0, 16, 16)

    def b_tile_t(self, k0, n0):
        """The 16x8 B operand B[k][n] = this(n, k) at (k0, n0) (b_frag_t)."""
        return self.tile(n0, k0, 8, 16).T


def _split(x):
    hi = round_bf16(np.asarray(x, np.float32))
    return hi, round_bf16((x - hi).astype(np.float32))


def mma_split(acc, a, b):
    """acc (a 16x8 f32 view) += a b as the kernel's three bf16 mma.m16n8k16 (lo*hi, hi*lo,
    hi*hi; products exact, f32 sums)."""
    (ah, al), (bh, bl) = _split(a), _split(b)
    for x, y in ((al, bh), (ah, bl), (ah, bh)):
        acc += (x.astype(np.float64) @ y.astype(np.float64)).astype(np.float32)


def tc_chunk_products(smem, qs_o, ks_o, ldk, dk, n, gam, beta, a_o, qk_o, ldc):
    """chunk_products_tc: warp w's rows 16w.. of K K^T and Q K^T, then the masks."""
    kop, qop = Operand(smem, ks_o, ldk, 1), Operand(smem, qs_o, ldk, 1)
    for warp in range(WARPS):
        r0 = 16 * warp
        kk, qk = np.zeros((16, K_CHUNK), np.float32), np.zeros((16, K_CHUNK), np.float32)
        for k0 in range(0, dk, 16):
            for j in range(K_CHUNK // 8):
                b = kop.b_tile_t(k0, 8 * j)
                mma_split(kk[:, 8 * j:8 * j + 8], kop.a_tile(r0, k0), b)
                mma_split(qk[:, 8 * j:8 * j + 8], qop.a_tile(r0, k0), b)
        for rr in range(16):
            row = r0 + rr
            for col in range(K_CHUNK):
                a = q = 0.0
                if col <= row < n:
                    dec = np.exp(gam[row] - gam[col])
                    q = qk[rr, col] * dec
                    if col < row:
                        a = beta[row] * kk[rr, col] * dec
                smem[a_o + row * ldc + col], smem[qk_o + row * ldc + col] = a, q


def tc_state_products(smem, qs_o, ks_o, ldk, dk, s_o):
    """state_products_tc: K S and Q S [kChunk, kDvTile], warp w's rows 16w.."""
    kop, qop = Operand(smem, ks_o, ldk, 1), Operand(smem, qs_o, ldk, 1)
    st = Operand(smem, s_o, 1, K_DV_TILE)
    ks, qs = np.zeros((K_CHUNK, K_DV_TILE), np.float32), np.zeros((K_CHUNK, K_DV_TILE), np.float32)
    for warp in range(WARPS):
        r0 = 16 * warp
        for k0 in range(0, dk, 16):
            for j in range(K_DV_TILE // 8):
                b = st.b_tile_t(k0, 8 * j)
                mma_split(ks[r0:r0 + 16, 8 * j:8 * j + 8], kop.a_tile(r0, k0), b)
                mma_split(qs[r0:r0 + 16, 8 * j:8 * j + 8], qop.a_tile(r0, k0), b)
    return ks, qs


def tc_output_products(smem, qk_o, ldc, vn_o, ldv):
    """output_products_tc: QK V' [kChunk, kDvTile], warp w's rows 16w.. (the full 64-column
    product: QK is zero above the diagonal, V' past row n)."""
    qkop, vnt = Operand(smem, qk_o, ldc, 1), Operand(smem, vn_o, 1, ldv)
    acc = np.zeros((K_CHUNK, K_DV_TILE), np.float32)
    for warp in range(WARPS):
        r0 = 16 * warp
        for k0 in range(0, K_CHUNK, 16):
            for j in range(K_DV_TILE // 8):
                mma_split(acc[r0:r0 + 16, 8 * j:8 * j + 8], qkop.a_tile(r0, k0),
                          vnt.b_tile_t(k0, 8 * j))
    return acc


def tc_state_update(smem, ks_o, ldk, dk, kdec_o, vn_o, ldv, e_last, s_o):
    """state_update_tc: S = e_last S + (K kdec)^T V', warp w's key rows 16(w + 4i).."""
    kdt, vnt = Operand(smem, ks_o, 1, ldk, scale=kdec_o), Operand(smem, vn_o, 1, ldv)
    for warp in range(WARPS):
        for m0 in range(16 * warp, dk, 16 * WARPS):
            acc = np.zeros((16, K_DV_TILE), np.float32)
            for k0 in range(0, K_CHUNK, 16):
                for j in range(K_DV_TILE // 8):
                    mma_split(acc[:, 8 * j:8 * j + 8], kdt.a_tile(m0, k0), vnt.b_tile_t(k0, 8 * j))
            for rr in range(16):
                for c in range(K_DV_TILE):
                    at = s_o + (m0 + rr) * K_DV_TILE + c
                    smem[at] = e_last * smem[at] + acc[rr, c]


def _warp_scan(gam: np.ndarray) -> np.ndarray:
    """The chunk kernel's inclusive scan of 64 decays by one warp, in its f32 order: lane l
    sums entries 2l and 2l + 1, a Hillis-Steele scan across the 32 lanes (shfl_up by 1, 2,
    4, 8, 16), then entry 2l gets the lanes before plus its own first entry."""
    g = gam.astype(np.float32)
    pair = g[0::2] + g[1::2]
    incl = pair.copy()
    for off in (1, 2, 4, 8, 16):
        shifted = np.concatenate([np.zeros(off, np.float32), incl[:-off]])
        incl = np.where(np.arange(32) >= off, incl + shifted, incl).astype(np.float32)
    out = np.empty(64, np.float32)
    out[0::2] = (incl - pair) + g[0::2]
    out[1::2] = incl
    return out


def emulate_chunk(qkv, qkv_pitch, ba, ba_pitch, a_log, dt_bias, state, slots, cu_q, kv_lens,
                  out, num_seqs, d: Heads, tc: bool = False):
    """gated_delta_chunk_bf16 over its grid (dv / kDvTile, hv, num_seqs); with `tc`,
    gated_delta_chunk_tc_bf16 (steps 3, 4 and 7 on tensor cores)."""
    ldk, ldc, ldv = d.dk + 1, K_CHUNK + 1, K_DV_TILE + 1
    for bx in range(d.dv // K_DV_TILE):
        for h in range(d.hv):
            for b in range(num_seqs):
                smem = np.zeros(2 * K_CHUNK * ldk + 2 * K_CHUNK * ldc + d.dk * K_DV_TILE
                                + 2 * K_CHUNK * ldv + 4 * K_CHUNK, np.float32)
                qs_o = 0
                ks_o = qs_o + K_CHUNK * ldk
                a_o = ks_o + K_CHUNK * ldk
                qk_o = a_o + K_CHUNK * ldc
                s_o = qk_o + K_CHUNK * ldc
                vn_o = s_o + d.dk * K_DV_TILE
                ob_o = vn_o + K_CHUNK * ldv
                gam_o = ob_o + K_CHUNK * ldv
                beta_o, eg_o, kdec_o = gam_o + K_CHUNK, gam_o + 2 * K_CHUNK, gam_o + 3 * K_CHUNK
                col0 = bx * K_DV_TILE
                seq_start, q_len = cu_q[b], cu_q[b + 1] - cu_q[b]
                if q_len <= 0:
                    continue
                fresh = kv_lens[b] == q_len
                kh = h // (d.hv // d.hk)
                sg = (slots[b] * d.hv + h) * d.dk * d.dv + col0
                for idx in range(d.dk * K_DV_TILE):
                    i, c = divmod(idx, K_DV_TILE)
                    smem[s_o + idx] = 0 if fresh else state[sg + i * d.dv + c]
                for c0 in range(0, q_len, K_CHUNK):
                    n = min(K_CHUNK, q_len - c0)
                    vecs = d.dk // 8  # 16-byte loads: 8 bf16 of a q (k) row each
                    for idx in range(K_CHUNK * vecs):
                        r, i = divmod(idx, vecs)
                        q8 = k8 = np.zeros(8, np.float32)
                        if r < n:
                            base = (seq_start + c0 + r) * qkv_pitch + kh * d.dk + 8 * i
                            assert base % 8 == 0  # 16-byte aligned
                            q8 = qkv[base:base + 8]
                            k8 = qkv[base + d.hk * d.dk:base + d.hk * d.dk + 8]
                        smem[qs_o + r * ldk + 8 * i:][:8] = q8
                        smem[ks_o + r * ldk + 8 * i:][:8] = k8
                    for tid in range(K_CHUNK):
                        beta, g = (_gate(ba[(seq_start + c0 + tid) * ba_pitch:], h, d.hv,
                                         a_log[h], dt_bias[h]) if tid < n else (0.0, 0.0))
                        smem[beta_o + tid], smem[gam_o + tid] = beta, g
                    for r in range(n):  # warps over rows
                        qrow = smem[qs_o + r * ldk:qs_o + r * ldk + d.dk]
                        krow = smem[ks_o + r * ldk:ks_o + r * ldk + d.dk]
                        qsc = f32(1 / np.sqrt(f32(qrow @ qrow) + f32(1e-6))) / f32(np.sqrt(d.dk))
                        ksc = f32(1 / np.sqrt(f32(krow @ krow) + f32(1e-6)))
                        qrow *= qsc
                        krow *= ksc
                    smem[gam_o:gam_o + K_CHUNK] = _warp_scan(smem[gam_o:gam_o + K_CHUNK])
                    last = smem[gam_o + n - 1]
                    for tid in range(K_CHUNK):
                        smem[eg_o + tid] = np.exp(smem[gam_o + tid]) if tid < n else 0
                        smem[kdec_o + tid] = np.exp(last - smem[gam_o + tid]) if tid < n else 0
                    if tc:
                        tc_chunk_products(smem, qs_o, ks_o, ldk, d.dk, n, smem[gam_o:],
                                          smem[beta_o:], a_o, qk_o, ldc)
                    for idx in range(0 if tc else K_CHUNK * K_CHUNK):
                        i, j = divmod(idx, K_CHUNK)
                        a = qk = 0.0
                        if j <= i < n:
                            ki = smem[ks_o + i * ldk:ks_o + i * ldk + d.dk]
                            kj = smem[ks_o + j * ldk:ks_o + j * ldk + d.dk]
                            qi = smem[qs_o + i * ldk:qs_o + i * ldk + d.dk]
                            dec = np.exp(smem[gam_o + i] - smem[gam_o + j])
                            qk = (qi @ kj) * dec
                            if j < i:
                                a = smem[beta_o + i] * (ki @ kj) * dec
                        smem[a_o + i * ldc + j], smem[qk_o + i * ldc + j] = a, qk
                    S = smem[s_o:s_o + d.dk * K_DV_TILE].reshape(d.dk, K_DV_TILE)
                    if tc:
                        tc_ks, tc_qs = tc_state_products(smem, qs_o, ks_o, ldk, d.dk, s_o)
                    for idx in range(K_CHUNK * K_DV_TILE):
                        r, c = divmod(idx, K_DV_TILE)
                        rv = ov = 0.0
                        if r < n:
                            if tc:
                                ks_, qs_ = tc_ks[r, c], tc_qs[r, c]
                            else:
                                ks_ = smem[ks_o + r * ldk:ks_o + r * ldk + d.dk] @ S[:, c]
                                qs_ = smem[qs_o + r * ldk:qs_o + r * ldk + d.dk] @ S[:, c]
                            v = qkv[(seq_start + c0 + r) * qkv_pitch + 2 * d.hk * d.dk
                                    + h * d.dv + col0 + c]
                            rv = smem[beta_o + r] * (v - smem[eg_o + r] * ks_)
                            ov = smem[eg_o + r] * qs_
                        smem[vn_o + r * ldv + c], smem[ob_o + r * ldv + c] = rv, ov
                    for tid in range(THREADS):  # quads: 4 lanes per column, parts j % 4
                        c, part = tid >> 2, tid & 3
                        if part:
                            continue  # the quad's sums are formed by lane `part == 0` below
                        for i in range(1, n, 2):  # rows i and i + 1 a step
                            pair = i + 1 < n
                            i1 = i + 1 if pair else i
                            parts = np.zeros((2, 4), np.float32)
                            for p in range(4):
                                for j in range(p, i, 4):
                                    v = smem[vn_o + j * ldv + c]
                                    parts[0, p] += smem[a_o + i * ldc + j] * v
                                    parts[1, p] += smem[a_o + i1 * ldc + j] * v
                            # shfl_xor 1 then 2: (p0 + p1) + (p2 + p3)
                            acc0, acc1 = ((parts[:, 0] + parts[:, 1])
                                          + (parts[:, 2] + parts[:, 3]))
                            vi = smem[vn_o + i * ldv + c] - acc0
                            smem[vn_o + i * ldv + c] = vi
                            if pair:
                                smem[vn_o + i1 * ldv + c] -= acc1 + smem[a_o + i1 * ldc + i] * vi
                    if tc:
                        tc_o = tc_output_products(smem, qk_o, ldc, vn_o, ldv)
                    for idx in range(n * K_DV_TILE):
                        r, c = divmod(idx, K_DV_TILE)
                        o = smem[ob_o + r * ldv + c]
                        if tc:
                            o = o + tc_o[r, c]
                        else:
                            for j in range(r + 1):
                                o += smem[qk_o + r * ldc + j] * smem[vn_o + j * ldv + c]
                        out[(seq_start + c0 + r) * d.hv * d.dv + h * d.dv + col0 + c] = o
                    e_last = smem[eg_o + n - 1]
                    if tc:
                        tc_state_update(smem, ks_o, ldk, d.dk, kdec_o, vn_o, ldv, e_last, s_o)
                    for idx in range(0 if tc else d.dk * K_DV_TILE):
                        e, c = divmod(idx, K_DV_TILE)
                        acc = f32(0)
                        for r in range(n):
                            acc += (smem[ks_o + r * ldk + e] * smem[kdec_o + r]
                                    * smem[vn_o + r * ldv + c])
                        smem[s_o + idx] = e_last * smem[s_o + idx] + acc
                for idx in range(d.dk * K_DV_TILE):
                    i, c = divmod(idx, K_DV_TILE)
                    state[sg + i * d.dv + c] = smem[s_o + idx]


def emulate_step(qkv, qkv_pitch, ba, ba_pitch, a_log, dt_bias, state, slots, cu_q, kv_lens,
                 out, num_seqs, d: Heads):
    """gated_delta_step_bf16 over its grid; warps take key rows w, w + 4, ..."""
    for bx in range(d.dv // K_DV_TILE):
        for h in range(d.hv):
            for b in range(num_seqs):
                t = cu_q[b]
                fresh = kv_lens[b] == cu_q[b + 1] - t
                kh = h // (d.hv // d.hk)
                qrow = qkv[t * qkv_pitch + kh * d.dk:][:d.dk].astype(np.float32)
                krow = qkv[t * qkv_pitch + kh * d.dk + d.hk * d.dk:][:d.dk].astype(np.float32)
                q_scale = f32(1 / np.sqrt(f32(qrow @ qrow) + f32(1e-6))) / f32(np.sqrt(d.dk))
                k_scale = f32(1 / np.sqrt(f32(krow @ krow) + f32(1e-6)))
                beta, g = _gate(ba[t * ba_pitch:], h, d.hv, a_log[h], dt_bias[h])
                decay = f32(np.exp(g))
                for lane in range(32):
                    col = bx * K_DV_TILE + lane
                    s = (slots[b] * d.hv + h) * d.dk * d.dv + col
                    red = [sum((state[s + i * d.dv] * krow[i] for i in range(w, d.dk, WARPS)),
                               f32(0)) if not fresh else f32(0) for w in range(WARPS)]
                    kv_mem = f32(sum(red)) * decay * k_scale
                    v = qkv[t * qkv_pitch + 2 * d.hk * d.dk + h * d.dv + col]
                    delta = beta * (v - kv_mem)
                    o = f32(0)
                    for w in range(WARPS):
                        for i in range(w, d.dk, WARPS):
                            old = 0 if fresh else state[s + i * d.dv]
                            nv = krow[i] * k_scale * delta + decay * old
                            state[s + i * d.dv] = nv
                            o += nv * qrow[i]
                    out[t * d.hv * d.dv + h * d.dv + col] = o * q_scale


def _inputs(rng, d: Heads, lens, starts):
    n, total = len(lens), sum(lens)
    pitch, ba_pitch = 2 * d.hk * d.dk + d.hv * d.dv + 8, 2 * d.hv + 2
    bf = lambda a: round_bf16(a.astype(np.float32))  # noqa: E731
    return dict(qkv=bf(rng.standard_normal(total * pitch)), qkv_pitch=pitch,
                ba=bf(rng.standard_normal(total * ba_pitch)), ba_pitch=ba_pitch,
                a_log=bf(np.log(rng.uniform(0.02, 0.5, d.hv))),
                dt_bias=bf(1 + 0.1 * rng.standard_normal(d.hv)),
                state=(0.3 * rng.standard_normal((n + 1) * d.hv * d.dk * d.dv)).astype(np.float32),
                slots=np.array(rng.permutation(n + 1)[:n], np.int32),
                cu_q=np.concatenate([[0], np.cumsum(lens)]).astype(np.int32),
                kv_lens=(np.asarray(starts) + np.asarray(lens)).astype(np.int32),
                num_seqs=n, total=total)


def _reference(inp, d: Heads, chunked: bool):
    """The host reference kernel on the same inputs: (out float32, state)."""
    be = HostBackend()
    up = lambda a: be.upload(np.ascontiguousarray(a))  # noqa: E731
    ptr = {k: up(f32_to_bf16_bits(inp[k])) for k in ("qkv", "ba", "a_log", "dt_bias")}
    ptr.update({k: up(inp[k]) for k in ("state", "slots", "cu_q", "kv_lens")})
    out = be.alloc(2 * inp["total"] * d.hv * d.dv)
    linear_attention.gated_delta_rule(
        KernelCache(be), 0, ptr["qkv"], inp["qkv_pitch"], ptr["ba"], inp["ba_pitch"],
        ptr["a_log"], ptr["dt_bias"], ptr["state"], ptr["slots"], ptr["cu_q"], ptr["kv_lens"],
        out, inp["num_seqs"], d.hk, d.hv, d.dk, d.dv, recurrent=not chunked)
    return (bf16_bits_to_f32(be.download(out, np.uint16, inp["total"] * d.hv * d.dv)),
            be.download(ptr["state"], np.float32, inp["state"].size))


def _emulated(inp, d: Heads, emulate):
    out = np.full(inp["total"] * d.hv * d.dv, np.nan, np.float32)
    state = inp["state"].copy()
    emulate(inp["qkv"], inp["qkv_pitch"], inp["ba"], inp["ba_pitch"], inp["a_log"],
            inp["dt_bias"], state, inp["slots"], inp["cu_q"], inp["kv_lens"], out,
            inp["num_seqs"], d)
    return out, state


@pytest.mark.parametrize("tc", [False, True], ids=["cuda_cores", "tensor_cores"])
def test_chunk_kernel_transliteration_matches_the_reference(tc):
    d = Heads(hk=1, hv=2, dk=32 if tc else 16, dv=64)
    inp = _inputs(np.random.default_rng(3), d, [70, 2], [0, 9])
    out, state = _emulated(inp, d, functools.partial(emulate_chunk, tc=tc))
    want_out, want_state = _reference(inp, d, chunked=True)
    np.testing.assert_allclose(out, want_out, rtol=2e-2, atol=1e-2)
    np.testing.assert_allclose(state, want_state, rtol=1e-4, atol=1e-5)


def test_step_kernel_transliteration_matches_the_reference():
    d = Heads(hk=2, hv=4, dk=8, dv=32)
    inp = _inputs(np.random.default_rng(4), d, [1, 1, 1], [0, 4, 20])
    out, state = _emulated(inp, d, emulate_step)
    want_out, want_state = _reference(inp, d, chunked=False)
    np.testing.assert_allclose(out, want_out, rtol=2e-2, atol=1e-2)
    np.testing.assert_allclose(state, want_state, rtol=1e-4, atol=1e-5)


K_MAX_KERNEL, K_TOKEN_TILE, CONV_THREADS = 8, 64, 128


def emulate_conv(x, x_pitch, w, conv_state, slots, cu_q, kv_lens, out, num_seqs, channels,
                 kernel, max_q_len):
    """causal_conv1d_silu_bf16 over its grid (channel blocks, token tiles, sequences); the
    state is updated tile 0 last, as the thread that owns it writes after its reads."""
    hist, pad, win_n = kernel - 1, K_MAX_KERNEL - kernel, K_MAX_KERNEL - 1
    tiles = -(-max_q_len // K_TOKEN_TILE)
    for b in range(num_seqs):
        for by in reversed(range(tiles)):  # tile 0 (the state's owner) after the others
            for c in range(channels):
                wk = [w[c * kernel + j - pad] if j >= pad else 0.0 for j in range(K_MAX_KERNEL)]
                seq_start, q_len = cu_q[b], cu_q[b + 1] - cu_q[b]
                t0 = by * K_TOKEN_TILE
                if t0 >= q_len:
                    continue
                start = kv_lens[b] - q_len
                st = slots[b] * kernel * channels + c
                win = []
                for j in range(win_n):
                    p = t0 - win_n + j
                    v = 0.0
                    if p >= t0 - hist:
                        if p >= 0:
                            v = x[(seq_start + p) * x_pitch + c]
                        elif start + p >= 0:
                            v = conv_state[st + ((start + p) % kernel) * channels]
                    win.append(v)
                for t in range(t0, min(t0 + K_TOKEN_TILE, q_len)):
                    xt = x[(seq_start + t) * x_pitch + c]
                    acc = f32(0)
                    for j in range(win_n):
                        acc += f32(wk[j]) * f32(win[j])
                    acc += f32(wk[win_n]) * f32(xt)
                    y = round_bf16(np.array([acc], np.float32))[0]
                    out[(seq_start + t) * channels + c] = y / (1 + np.exp(-y))
                    win = win[1:] + [xt]
                if by != 0:
                    continue
                for p in range(max(q_len - hist, 0), q_len):
                    conv_state[st + ((start + p) % kernel) * channels] = \
                        x[(seq_start + p) * x_pitch + c]


def test_conv_kernel_transliteration_matches_the_reference():
    rng = np.random.default_rng(5)
    lens, starts, channels, kernel = [1, 2, 70, 3, 1], [5, 0, 0, 9, 1], 24, 4
    n, total, pitch = len(lens), sum(lens), 40
    bf = lambda a: round_bf16(a.astype(np.float32))  # noqa: E731
    x, w = bf(rng.standard_normal(total * pitch)), bf(0.5 * rng.standard_normal(channels * kernel))
    state = bf(rng.standard_normal((n + 1) * kernel * channels))
    slots = np.array(rng.permutation(n + 1)[:n], np.int32)
    cu_q = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    kv_lens = (np.asarray(starts) + np.asarray(lens)).astype(np.int32)
    out, got_state = np.full(total * channels, np.nan, np.float32), state.copy()
    emulate_conv(x, pitch, w, got_state, slots, cu_q, kv_lens, out, n, channels, kernel,
                 max(lens))

    be = HostBackend()
    p = {k: be.upload(v) for k, v in (("x", f32_to_bf16_bits(x)), ("w", f32_to_bf16_bits(w)),
                                      ("state", f32_to_bf16_bits(state)), ("slots", slots),
                                      ("cu_q", cu_q), ("kv_lens", kv_lens))}
    ref_out = be.alloc(2 * total * channels)
    linear_attention.conv1d_silu(KernelCache(be), 0, p["x"], pitch, p["w"], p["state"],
                                 p["slots"], p["cu_q"], p["kv_lens"], ref_out, n, channels,
                                 kernel, max(lens))
    want = bf16_bits_to_f32(be.download(ref_out, np.uint16, total * channels))
    np.testing.assert_allclose(round_bf16(out.astype(np.float32)), want, rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal(
        got_state, bf16_bits_to_f32(be.download(p["state"], np.uint16, state.size)))
