"""A thread-level numpy transliteration of gdn_decode.cu (the fused Gated-DeltaNet decode
step), checked against the host reference kernel: the index math of the CUDA source (the
cluster of SPLIT blocks per head and their column slices, block channel -> projection
column map, ring history staged by position, which block writes the shared key channels,
the (row group, column group) ownership of the state, the padding threads of the last warp,
and the norm's sum of squares gathered over the cluster in rank order) without a GPU. Each
phase follows the kernel; loops over `rank` and `tid` stand for the cluster's blocks and a
block's threads (no phase reads what the same phase writes), float32 throughout as on the
device."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from atlas.runtime.host import HostBackend
from atlas.runtime.ops import KernelCache, linear_attention

SPLIT = linear_attention.GDN_DECODE_SPLIT
K_ROWS, K_COLS, EPS = linear_attention.GDN_DECODE_ROWS, 4, 1e-6
f32 = np.float32


def _rb(x) -> f32:
    return f32(round_bf16(np.array([x], np.float32))[0])


def _conv_channel(c, kh, h, col0, hk, dk, dv):
    if c < dk:
        return kh * dk + c
    if c < 2 * dk:
        return hk * dk + kh * dk + (c - dk)
    return 2 * hk * dk + h * dv + col0 + (c - 2 * dk)


def _block(a, hk, hv, dk, dv, kernel, b, h, rank):
    """Block `rank` of head h's cluster for sequence b, up to the cluster barrier: writes
    its state columns, its ring channels, and returns (its sum of squares, a closure that
    finishes its outputs given the cluster's total)."""
    proj, pitch, w = a["proj"], a["pitch"], a["conv_w"]
    ring_pool, state, out = a["conv_state"], a["state"], a["out"]
    dvt = dv // SPLIT
    ch, C, R, col0 = 2 * dk + dvt, dvt // K_COLS, dk // K_ROWS, rank * dvt
    threads = linear_attention.gdn_decode_threads(dk, dv)
    conv_dim = 2 * hk * dk + hv * dv
    kh = h // (hv // hk)
    chan = [_conv_channel(c, kh, h, col0, hk, dk, dv) for c in range(ch)]
    # before the wait: taps, step inputs, state tile, ring history (positions below 0: zero)
    wsm = np.array([w[chan[i // kernel] * kernel + i % kernel] for i in range(ch * kernel)], f32)
    t, pos, slot = a["cu_q"][b], a["kv_lens"][b] - 1, a["slots"][b]
    fresh = pos == 0
    sg = (slot * hv + h) * dk * dv + col0
    regs = {}
    for tid in range(threads):
        cg, rg = tid % C, tid // C
        if rg < R:
            regs[tid] = [np.zeros(4, f32) if fresh else
                         state[sg + (rg + R * j) * dv + cg * 4:][:4].copy()
                         for j in range(K_ROWS)]
    ring = slot * kernel * conv_dim
    hist = np.zeros((kernel - 1, ch), f32)
    for j in range(kernel - 1):
        p = pos - (kernel - 1) + j
        if p >= 0:
            hist[j] = [ring_pool[ring + (p % kernel) * conv_dim + chan[c]] for c in range(ch)]
    # after the wait: thread tid < ch / 4 convolves channels 4 tid..4 tid + 3 (one 8-byte
    # access of the row, the history and the ring each: the 4 share q, k or v)
    row = proj[t * pitch:]
    xs = np.zeros(ch, f32)
    writes_key = rank == 0 and h % (hv // hk) == 0
    sums = {"q": f32(0), "k": f32(0)}
    for tid in range(ch // 4):
        c0 = 4 * tid
        assert chan[c0 + 3] == chan[c0] + 3 and tid < threads
        ss = f32(0)
        for c in range(c0, c0 + 4):
            acc = f32(0)
            for j in range(kernel - 1):
                if pos - (kernel - 1) + j >= 0:
                    acc = f32(acc + wsm[c * kernel + j] * hist[j, c])
            acc = f32(acc + wsm[c * kernel + kernel - 1] * row[chan[c]])
            y = _rb(acc)
            xs[c] = _rb(y / (1 + np.exp(-y)))
            ss = f32(ss + xs[c] * xs[c])
            if c0 >= 2 * dk or writes_key:
                ring_pool[ring + (pos % kernel) * conv_dim + chan[c]] = row[chan[c]]
        if c0 < 2 * dk:
            sums["q" if c0 < dk else "k"] += ss
    qn, kn = xs[:dk], xs[dk:2 * dk]
    q_scale = f32(1 / np.sqrt(sums["q"] + f32(EPS))) / f32(np.sqrt(dk))
    k_scale = f32(1 / np.sqrt(sums["k"] + f32(EPS)))
    bval, aval = row[conv_dim + hv * dv + h], row[conv_dim + hv * dv + hv + h]
    x = f32(aval + a["dt_bias"][h])
    softplus = x if x > 20 else f32(np.log1p(np.exp(x)))
    beta, g = _rb(1 / (1 + np.exp(-bval))), f32(-np.exp(a["a_log"][h]) * softplus)
    decay = f32(np.exp(g))
    red_k = np.zeros((R, C, 4), f32)
    for tid, s in regs.items():
        cg, rg = tid % C, tid // C
        red_k[rg, cg] = sum((kn[rg + R * j] * s[j] for j in range(K_ROWS)), np.zeros(4, f32))
    red_o = np.zeros((R, C, 4), f32)
    for tid, s in regs.items():
        cg, rg = tid % C, tid // C
        kv_mem = red_k[:, cg].sum(0) * decay * k_scale
        delta = beta * (xs[2 * dk + cg * 4:][:4] - kv_mem)
        o = np.zeros(4, f32)
        for j in range(K_ROWS):
            nv = (kn[rg + R * j] * k_scale) * delta + decay * s[j]
            state[sg + (rg + R * j) * dv + cg * 4:][:4] = nv
            o += qn[rg + R * j] * nv
        red_o[rg, cg] = o
    ob = np.array([_rb(v) for v in red_o.sum(0).reshape(-1) * q_scale], f32)  # row group 0

    def finish(sum_sq: f32) -> None:
        inv_rms = f32(1 / np.sqrt(sum_sq / f32(dv) + f32(EPS)))
        z = row[conv_dim + h * dv + col0:][:dvt]
        for c in range(dvt):  # threads of row group 0, four columns each
            normed = _rb(a["norm_w"][col0 + c] * _rb(ob[c] * inv_rms))
            out[t * hv * dv + h * dv + col0 + c] = normed * (z[c] / (1 + np.exp(-z[c])))

    return f32(ob @ ob), finish


def emulate(a: dict, hk, hv, dk, dv, kernel, num_seqs):
    """gated_deltanet_decode_bf16 over its grid (SPLIT, hv, num_seqs); the clusters of a step
    write disjoint state, and ring rows no other block reads, so their order is immaterial."""
    for b in range(num_seqs):
        for h in range(hv):
            parts = [_block(a, hk, hv, dk, dv, kernel, b, h, rank) for rank in range(SPLIT)]
            total = f32(sum(p[0] for p in parts))  # rank order, as every block sums them
            for _, finish in parts:
                finish(total)


def _inputs(rng, hk, hv, dk, dv, kernel, starts):
    n = len(starts)
    conv_dim = 2 * hk * dk + hv * dv
    pitch = -(-(conv_dim + hv * dv + 2 * hv) // 4) * 4 + 8  # rows 8-byte aligned, padded
    bf = lambda x: round_bf16(np.asarray(x, np.float32))  # noqa: E731
    return dict(proj=bf(rng.standard_normal(n * pitch)), pitch=pitch,
                conv_w=bf(0.5 * rng.standard_normal(conv_dim * kernel)),
                conv_state=bf(rng.standard_normal((n + 1) * kernel * conv_dim)),
                a_log=bf(np.log(rng.uniform(0.02, 0.5, hv))),
                dt_bias=bf(1 + 0.1 * rng.standard_normal(hv)),
                norm_w=bf(rng.uniform(0.5, 1.5, dv)),
                state=(0.3 * rng.standard_normal((n + 1) * hv * dk * dv)).astype(np.float32),
                slots=np.array(rng.permutation(n + 1)[:n], np.int32),
                cu_q=np.arange(n + 1, dtype=np.int32),
                kv_lens=(np.asarray(starts) + 1).astype(np.int32))


@pytest.mark.parametrize("hk,hv,dk,dv,kernel", [(2, 4, 32, 32, 4),    # 8 owners + 24 idle
                                                (1, 3, 32, 64, 3)])   # a group of three
def test_fused_decode_transliteration_matches_the_reference(hk, hv, dk, dv, kernel):
    starts = [0, 1, 2, 9]
    a = _inputs(np.random.default_rng(11), hk, hv, dk, dv, kernel, starts)
    n = len(starts)
    emu = dict(a, conv_state=a["conv_state"].copy(), state=a["state"].copy(),
               out=np.full(n * hv * dv, np.nan, np.float32))
    emulate(emu, hk, hv, dk, dv, kernel, n)

    be = HostBackend()
    up = lambda x: be.upload(np.ascontiguousarray(x))  # noqa: E731
    p = {k: up(f32_to_bf16_bits(a[k])) for k in ("proj", "conv_w", "conv_state", "a_log",
                                                  "dt_bias", "norm_w")}
    p.update({k: up(a[k]) for k in ("state", "slots", "cu_q", "kv_lens")})
    out = be.alloc(2 * n * hv * dv)
    linear_attention.gdn_decode(KernelCache(be), 0, p["proj"], a["pitch"], p["conv_w"],
                                p["conv_state"], p["a_log"], p["dt_bias"], p["norm_w"],
                                p["state"], p["slots"], p["slots"], p["cu_q"], p["kv_lens"], out,
                                n, hk, hv, dk, dv, kernel, EPS)
    want_out = bf16_bits_to_f32(be.download(out, np.uint16, n * hv * dv))
    np.testing.assert_allclose(round_bf16(emu["out"]), want_out, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(emu["state"], be.download(p["state"], np.float32, a["state"].size),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(
        emu["conv_state"], bf16_bits_to_f32(be.download(p["conv_state"], np.uint16,
                                                        a["conv_state"].size)))
