"""A thread-level numpy transliteration of gdn_decode.cu (the fused Gated-DeltaNet decode
step), checked against the host reference kernel: the index math of the CUDA source (the
cluster of SPLIT blocks per head and their column slices, block channel -> projection
column map, ring history staged by position, which block writes the shared key channels,
the (row group, column group) ownership of the state, the padding threads of the last warp,
the norm's sum of squares gathered over the cluster in rank order, and a verification run's
tokens: history shifted in registers, state and whole ring written to each row's out slot,
continuation rows returning) without a GPU. Each
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


MAX_HIST = linear_attention.CONV_MAX_KERNEL - 1   # gdn_decode.cu kMaxHist


class _Block:
    """Block `rank` of head h's cluster for the run starting at row b: the prologue (taps,
    state tile and ring history into "registers"), then `token(step)` per token of the run
    up to the cluster barrier: it writes its state columns and ring channels into the row's
    out slot and returns (its sum of squares, a closure that finishes its outputs given the
    cluster's total)."""

    def __init__(self, a, hk, hv, dk, dv, kernel, b, h, rank):
        self.a, self.dims, self.b, self.h, self.rank = a, (hk, hv, dk, dv, kernel), b, h, rank
        w, ring_pool, state = a["conv_w"], a["conv_state"], a["state"]
        dvt = dv // SPLIT
        self.ch, self.C, self.R, self.col0 = 2 * dk + dvt, dvt // K_COLS, dk // K_ROWS, rank * dvt
        threads = linear_attention.gdn_decode_threads(dk, dv)
        self.conv_dim = 2 * hk * dk + hv * dv
        kh = h // (hv // hk)
        self.chan = [_conv_channel(c, kh, h, self.col0, hk, dk, dv) for c in range(self.ch)]
        # before the wait: taps, step inputs, state tile, ring history (positions below 0:
        # zero), newest last in MAX_HIST entries of which the last kernel - 1 are taps'
        self.wsm = np.array([w[self.chan[i // kernel] * kernel + i % kernel]
                             for i in range(self.ch * kernel)], f32)
        self.pos0, slot = a["kv_lens"][b] - 1, a["slots"][b]
        self.in_place = a["outs"][b] == slot
        fresh = self.pos0 == 0
        self.first = MAX_HIST - (kernel - 1)
        sg = (slot * hv + h) * dk * dv + self.col0
        self.regs = {}
        for tid in range(threads):
            cg, rg = tid % self.C, tid // self.C
            if rg < self.R:
                self.regs[tid] = [np.zeros(4, f32) if fresh else
                                  state[sg + (rg + self.R * j) * dv + cg * 4:][:4].copy()
                                  for j in range(K_ROWS)]
        ring = slot * kernel * self.conv_dim
        self.hist = np.zeros((MAX_HIST, self.ch), f32)
        for i in range(self.first, MAX_HIST):
            p = self.pos0 - MAX_HIST + i
            if p >= 0:
                self.hist[i] = [ring_pool[ring + (p % kernel) * self.conv_dim + self.chan[c]]
                                for c in range(self.ch)]

    def token(self, step):
        a, (hk, hv, dk, dv, kernel), h, rank = self.a, self.dims, self.h, self.rank
        proj, pitch, ring_pool, state, out = (a["proj"], a["pitch"], a["conv_state"],
                                              a["state"], a["out"])
        ch, C, R, col0, conv_dim, chan, wsm = (self.ch, self.C, self.R, self.col0,
                                               self.conv_dim, self.chan, self.wsm)
        t, oslot, pos = a["cu_q"][self.b + step], a["outs"][self.b + step], self.pos0 + step
        # after the wait: thread tid < ch / 4 convolves channels 4 tid..4 tid + 3 (one 8-byte
        # access of the row, the history and the ring each: the 4 share q, k or v)
        row = proj[t * pitch:]
        xs = np.zeros(ch, f32)
        writes_key = rank == 0 and h % (hv // hk) == 0
        ring = oslot * kernel * conv_dim
        sums = {"q": f32(0), "k": f32(0)}
        for tid in range(ch // 4):
            c0 = 4 * tid
            assert chan[c0 + 3] == chan[c0] + 3
            ss = f32(0)
            for c in range(c0, c0 + 4):
                acc = f32(0)
                for i in range(self.first, MAX_HIST):   # tap i - first
                    if pos - MAX_HIST + i >= 0:
                        acc = f32(acc + wsm[c * kernel + i - self.first] * self.hist[i, c])
                acc = f32(acc + wsm[c * kernel + kernel - 1] * row[chan[c]])
                y = _rb(acc)
                xs[c] = _rb(y / (1 + np.exp(-y)))
                ss = f32(ss + xs[c] * xs[c])
                if c0 >= 2 * dk or writes_key:
                    ring_pool[ring + (pos % kernel) * conv_dim + chan[c]] = row[chan[c]]
                    for i in range(self.first, MAX_HIST):   # out of place: the whole ring
                        p = pos - MAX_HIST + i
                        if not self.in_place and p >= 0:
                            ring_pool[ring + (p % kernel) * conv_dim + chan[c]] = self.hist[i, c]
            if c0 < 2 * dk:
                sums["q" if c0 < dk else "k"] += ss
        self.hist = np.concatenate([self.hist[1:], [[row[chan[c]] for c in range(ch)]]])
        qn, kn = xs[:dk], xs[dk:2 * dk]
        q_scale = f32(1 / np.sqrt(sums["q"] + f32(EPS))) / f32(np.sqrt(dk))
        k_scale = f32(1 / np.sqrt(sums["k"] + f32(EPS)))
        bval, aval = row[conv_dim + hv * dv + h], row[conv_dim + hv * dv + hv + h]
        x = f32(aval + a["dt_bias"][h])
        softplus = x if x > 20 else f32(np.log1p(np.exp(x)))
        beta, g = _rb(1 / (1 + np.exp(-bval))), f32(-np.exp(a["a_log"][h]) * softplus)
        decay = f32(np.exp(g))
        red_k = np.zeros((R, C, 4), f32)
        for tid, s in self.regs.items():
            cg, rg = tid % C, tid // C
            red_k[rg, cg] = sum((kn[rg + R * j] * s[j] for j in range(K_ROWS)), np.zeros(4, f32))
        red_o = np.zeros((R, C, 4), f32)
        so = (oslot * hv + h) * dk * dv + col0
        for tid, s in self.regs.items():
            cg, rg = tid % C, tid // C
            kv_mem = red_k[:, cg].sum(0) * decay * k_scale
            delta = beta * (xs[2 * dk + cg * 4:][:4] - kv_mem)
            o = np.zeros(4, f32)
            for j in range(K_ROWS):
                s[j] = (kn[rg + R * j] * k_scale) * delta + decay * s[j]
                state[so + (rg + R * j) * dv + cg * 4:][:4] = s[j]
                o += qn[rg + R * j] * s[j]
            red_o[rg, cg] = o
        ob = np.array([_rb(v) for v in red_o.sum(0).reshape(-1) * q_scale], f32)  # row group 0

        def finish(sum_sq: f32) -> None:
            inv_rms = f32(1 / np.sqrt(sum_sq / f32(dv) + f32(EPS)))
            z = row[conv_dim + h * dv + col0:][:self.ch - 2 * dk]
            for c in range(self.ch - 2 * dk):  # threads of row group 0, four columns each
                normed = _rb(a["norm_w"][col0 + c] * _rb(ob[c] * inv_rms))
                out[t * hv * dv + h * dv + col0 + c] = normed * (z[c] / (1 + np.exp(-z[c])))

        return f32(ob @ ob), finish


def emulate(a: dict, hk, hv, dk, dv, kernel, num_seqs):
    """gated_deltanet_decode_bf16 over its grid (SPLIT, hv, num_seqs): a row continuing the
    run of the row before (same slot, next position) returns; a run's clusters go token by
    token. The clusters of a step write disjoint state, and ring rows no other block reads,
    so their order is immaterial."""
    slots, lens = a["slots"], a["kv_lens"]
    for b in range(num_seqs):
        if b and slots[b - 1] == slots[b] and lens[b - 1] == lens[b] - 1:
            continue
        run = 1
        while b + run < num_seqs and slots[b + run] == slots[b] and lens[b + run] == lens[b] + run:
            run += 1
        for h in range(hv):
            blocks = [_Block(a, hk, hv, dk, dv, kernel, b, h, rank) for rank in range(SPLIT)]
            for step in range(run):
                parts = [blk.token(step) for blk in blocks]
                total = f32(sum(p[0] for p in parts))  # rank order, as every block sums them
                for _, finish in parts:
                    finish(total)


def _inputs(rng, hk, hv, dk, dv, kernel, starts, slots=None, outs=None):
    """Rows at positions `starts`; each row's state slot (default: distinct, a permutation)
    and out slot (default: its own, in place)."""
    n = len(starts)
    num_slots = n + 1 if slots is None else max(max(slots), max(outs)) + 1
    slots = np.array(rng.permutation(n + 1)[:n] if slots is None else slots, np.int32)
    conv_dim = 2 * hk * dk + hv * dv
    pitch = -(-(conv_dim + hv * dv + 2 * hv) // 4) * 4 + 8  # rows 8-byte aligned, padded
    bf = lambda x: round_bf16(np.asarray(x, np.float32))  # noqa: E731
    return dict(proj=bf(rng.standard_normal(n * pitch)), pitch=pitch,
                conv_w=bf(0.5 * rng.standard_normal(conv_dim * kernel)),
                conv_state=bf(rng.standard_normal(num_slots * kernel * conv_dim)),
                a_log=bf(np.log(rng.uniform(0.02, 0.5, hv))),
                dt_bias=bf(1 + 0.1 * rng.standard_normal(hv)),
                norm_w=bf(rng.uniform(0.5, 1.5, dv)),
                state=(0.3 * rng.standard_normal(num_slots * hv * dk * dv)).astype(np.float32),
                slots=slots, outs=slots.copy() if outs is None else np.array(outs, np.int32),
                cu_q=np.arange(n + 1, dtype=np.int32),
                kv_lens=(np.asarray(starts) + 1).astype(np.int32))


def _check_against_reference(a, hk, hv, dk, dv, kernel):
    n = len(a["kv_lens"])
    emu = dict(a, conv_state=a["conv_state"].copy(), state=a["state"].copy(),
               out=np.full(n * hv * dv, np.nan, np.float32))
    emulate(emu, hk, hv, dk, dv, kernel, n)

    be = HostBackend()
    up = lambda x: be.upload(np.ascontiguousarray(x))  # noqa: E731
    p = {k: up(f32_to_bf16_bits(a[k])) for k in ("proj", "conv_w", "conv_state", "a_log",
                                                  "dt_bias", "norm_w")}
    p.update({k: up(a[k]) for k in ("state", "slots", "outs", "cu_q", "kv_lens")})
    out = be.alloc(2 * n * hv * dv)
    linear_attention.gdn_decode(KernelCache(be), 0, p["proj"], a["pitch"], p["conv_w"],
                                p["conv_state"], p["a_log"], p["dt_bias"], p["norm_w"],
                                p["state"], p["slots"], p["outs"], p["cu_q"], p["kv_lens"], out,
                                n, hk, hv, dk, dv, kernel, EPS)
    want_out = bf16_bits_to_f32(be.download(out, np.uint16, n * hv * dv))
    np.testing.assert_allclose(round_bf16(emu["out"]), want_out, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(emu["state"], be.download(p["state"], np.float32, a["state"].size),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(
        emu["conv_state"], bf16_bits_to_f32(be.download(p["conv_state"], np.uint16,
                                                        a["conv_state"].size)))


@pytest.mark.parametrize("hk,hv,dk,dv,kernel", [(2, 4, 32, 32, 4),    # 8 owners + 24 idle
                                                (1, 3, 32, 64, 3)])   # a group of three
def test_fused_decode_transliteration_matches_the_reference(hk, hv, dk, dv, kernel):
    a = _inputs(np.random.default_rng(11), hk, hv, dk, dv, kernel, [0, 1, 2, 9])
    _check_against_reference(a, hk, hv, dk, dv, kernel)


@pytest.mark.parametrize("hk,hv,dk,dv,kernel", [(2, 4, 32, 32, 4), (1, 3, 32, 64, 3)])
def test_verification_runs_transliteration_matches_the_reference(hk, hv, dk, dv, kernel):
    """Rows 0-3: one sequence's run of 4 tokens from position 5 (slot 1, out slots 4..7);
    row 4: a plain decode row in place (slot 2); rows 5-6: a run from position 0 (slot 3, out
    slots 8, 9). The history in registers, the out-of-place rings and states, the
    continuation rows' early return, the per-token cluster sums."""
    a = _inputs(np.random.default_rng(5), hk, hv, dk, dv, kernel, [5, 6, 7, 8, 40, 0, 1],
                slots=[1, 1, 1, 1, 2, 3, 3], outs=[4, 5, 6, 7, 2, 8, 9])
    _check_against_reference(a, hk, hv, dk, dv, kernel)
