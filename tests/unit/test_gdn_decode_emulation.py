"""A thread-level numpy transliteration of gdn_decode.cu (the fused Gated-DeltaNet decode
step), checked against the host reference kernel: the index math of the CUDA source (block
channel -> projection column map, ring rows by position, which block writes the shared key
channels, the shared-memory carve-up, the (row group, column group) ownership of the state
and the padding threads of the last warp) without a GPU. Each phase follows the kernel; a
loop over `tid` stands for the block's threads (no phase reads what the same phase writes),
float32 throughout as on the device."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from atlas.runtime.host import HostBackend
from atlas.runtime.ops import KernelCache, linear_attention

K_ROWS, K_COLS, EPS = 16, 4, 1e-6
f32 = np.float32


def _rb(x) -> f32:
    return f32(round_bf16(np.array([x], np.float32))[0])


def _conv_channel(c, kh, h, hk, dk, dv):
    if c < dk:
        return kh * dk + c
    if c < 2 * dk:
        return hk * dk + kh * dk + (c - dk)
    return 2 * hk * dk + h * dv + (c - 2 * dk)


def emulate(a: dict, hk, hv, dk, dv, kernel, num_seqs):
    """gated_deltanet_decode_bf16 over its grid (hv, num_seqs); the blocks of a step write
    disjoint state, and ring rows no other block reads, so their order is immaterial."""
    proj, pitch, w = a["proj"], a["pitch"], a["conv_w"]
    ring_pool, state, out = a["conv_state"], a["state"], a["out"]
    ch, C, R = 2 * dk + dv, dv // K_COLS, dk // K_ROWS
    threads = -(-R * C // 32) * 32
    conv_dim = 2 * hk * dk + hv * dv
    for b in range(num_seqs):
        for h in range(hv):
            kh = h // (hv // hk)
            wsm = np.zeros(ch * kernel, f32)
            for i in range(ch * kernel):  # strided by the block's threads
                wsm[i] = w[_conv_channel(i // kernel, kh, h, hk, dk, dv) * kernel + i % kernel]
            t, pos, slot = a["cu_q"][b], a["kv_lens"][b] - 1, a["slots"][b]
            fresh = pos == 0
            sg = (slot * hv + h) * dk * dv
            regs = {}
            for tid in range(threads):
                cg, rg = tid % C, tid // C
                if rg < R:
                    regs[tid] = [np.zeros(4, f32) if fresh else
                                 state[sg + (rg + R * j) * dv + cg * 4:][:4].copy()
                                 for j in range(K_ROWS)]
            row = proj[t * pitch:]
            ring = slot * kernel * conv_dim
            xs = np.zeros(ch, f32)
            writes_key = h % (hv // hk) == 0
            for c in range(ch):
                gc = _conv_channel(c, kh, h, hk, dk, dv)
                acc = f32(0)
                for j in range(kernel - 1):
                    p = pos - (kernel - 1) + j
                    if p >= 0:
                        hist = ring_pool[ring + (p % kernel) * conv_dim + gc]
                        acc = f32(acc + wsm[c * kernel + j] * hist)
                acc = f32(acc + wsm[c * kernel + kernel - 1] * row[gc])
                y = _rb(acc)
                xs[c] = _rb(y / (1 + np.exp(-y)))
                if c >= 2 * dk or writes_key:
                    ring_pool[ring + (pos % kernel) * conv_dim + gc] = row[gc]
            qn, kn = xs[:dk], xs[dk:2 * dk]
            q_scale = f32(1 / np.sqrt(f32(qn @ qn) + f32(EPS))) / f32(np.sqrt(dk))
            k_scale = f32(1 / np.sqrt(f32(kn @ kn) + f32(EPS)))
            bval, aval = row[conv_dim + hv * dv + h], row[conv_dim + hv * dv + hv + h]
            x = f32(aval + a["dt_bias"][h])
            softplus = x if x > 20 else f32(np.log1p(np.exp(x)))
            beta, g = _rb(1 / (1 + np.exp(-bval))), f32(-np.exp(a["a_log"][h]) * softplus)
            decay = f32(np.exp(g))
            red = np.zeros((R, C, 4), f32)
            for tid, s in regs.items():
                cg, rg = tid % C, tid // C
                red[rg, cg] = sum((kn[rg + R * j] * s[j] for j in range(K_ROWS)), np.zeros(4, f32))
            red_o = np.zeros((R, C, 4), f32)
            for tid, s in regs.items():
                cg, rg = tid % C, tid // C
                kv_mem = red[:, cg].sum(0) * decay * k_scale
                delta = beta * (xs[2 * dk + cg * 4:][:4] - kv_mem)
                o = np.zeros(4, f32)
                for j in range(K_ROWS):
                    nv = (kn[rg + R * j] * k_scale) * delta + decay * s[j]
                    state[sg + (rg + R * j) * dv + cg * 4:][:4] = nv
                    o += qn[rg + R * j] * nv
                red_o[rg, cg] = o
            ob = np.array([_rb(v) for v in red_o.sum(0).reshape(-1) * q_scale], f32)
            inv_rms = f32(1 / np.sqrt(f32(ob @ ob) / f32(dv) + f32(EPS)))
            z = row[conv_dim + h * dv:][:dv]
            for c in range(dv):  # threads of row group 0, four columns each
                normed = _rb(a["norm_w"][c] * _rb(ob[c] * inv_rms))
                out[t * hv * dv + h * dv + c] = normed * (z[c] / (1 + np.exp(-z[c])))


def _inputs(rng, hk, hv, dk, dv, kernel, starts):
    n = len(starts)
    conv_dim = 2 * hk * dk + hv * dv
    pitch = conv_dim + hv * dv + 2 * hv + 6
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


@pytest.mark.parametrize("hk,hv,dk,dv,kernel", [(2, 4, 32, 32, 4),    # 16 owners + 16 idle
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
                                p["state"], p["slots"], p["cu_q"], p["kv_lens"], out, n, hk, hv,
                                dk, dv, kernel, EPS)
    want_out = bf16_bits_to_f32(be.download(out, np.uint16, n * hv * dv))
    np.testing.assert_allclose(round_bf16(emu["out"]), want_out, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(emu["state"], be.download(p["state"], np.float32, a["state"].size),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(
        emu["conv_state"], bf16_bits_to_f32(be.download(p["conv_state"], np.uint16,
                                                        a["conv_state"].size)))
