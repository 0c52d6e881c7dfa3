"""A block- and warp-level numpy transliteration of decode_persistent.cu, checked against the
host reference kernel: the index math of the CUDA source without a GPU (each block's rows of
a weight phase and the shared-memory copy of its slice, gate/up row pairs, the k split of
few-row blocks, the attention items' key splits, which keys each warp takes and the step's
own key, the group's first head appending K/V, the partials and their merge, and the K/V
rows prefetch_kv asks L2 for). Loops over `blk` and `warp` stand for the grid's blocks and
a block's warps (no phase reads what the same phase writes); float32 as on the device."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, round_bf16
from atlas.runtime.cases.attention import Geometry
from atlas.runtime.cases.decode_persistent import persistent_case
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import execute
from atlas.runtime.ops import decode_persistent

WARPS = decode_persistent.PERSISTENT_WARPS
f32 = np.float32


def rb(x: np.ndarray) -> np.ndarray:
    return round_bf16(np.asarray(x, dtype=f32))


def block_rows(n: int, grid: int, blk: int) -> tuple[int, int]:
    per = -(-n // grid)
    r0 = min(n, blk * per)
    return r0, min(n, r0 + per)


def gemv_phase(w: np.ndarray, x: np.ndarray, n: int, pair: int, grid: int, cap: int
               ) -> np.ndarray:
    """y [n, 2] (column 1: the row `pair` further, gate/up) as the blocks compute it: a
    staged block reads its slice from the copy (its gate rows, then its up rows), a
    streaming one from w; few rows split k over warps (part p of ks takes the 32-chunk runs
    p, p + ks, ...), their partials summed in warp order. Every row exactly once."""
    k = w.shape[1]
    chunks = k // 8
    y = np.full((n, 2), np.nan, f32)
    for blk in range(grid):
        r0, r1 = block_rows(n, grid, blk)
        nr = r1 - r0
        if nr <= 0:
            continue
        halves = 2 if pair else 1
        if nr * k * 2 * halves <= cap:  # the bulk copy's layout
            rows, off = np.concatenate([w[r0 + h * pair:r1 + h * pair] for h in range(halves)]), nr
        else:
            rows, off = w[r0:], pair
        ks = 1 if nr >= WARPS else WARPS // nr
        for i in range(nr):
            assert np.isnan(y[r0 + i, 0])
            for half in range(halves):
                row, total = rows[i + half * off], f32(0)
                for p in range(ks):
                    sel = np.array([e for c in range(chunks) if (c // 32) % ks == p
                                    for e in range(8 * c, 8 * c + 8)], dtype=int)
                    total = f32(total + np.dot(row[sel], x[sel]).astype(f32))
                y[r0 + i, half] = total
    assert not np.isnan(y[:, 0]).any()
    return y


def attention_phase(qkv: np.ndarray, kc: np.ndarray, vc: np.ndarray, table: np.ndarray,
                    kv_len: int, slot: int, pos: int, cos_sin: np.ndarray, qn, kn,
                    g: Geometry, splits: int, grid: int, eps: float) -> np.ndarray:
    d, hq, hkv, bs = g.head_dim, g.hq, g.hkv, g.block_size
    group = hq // hkv
    e_dims = d // 32
    in_flight = 1 if e_dims == 8 else 16 // e_dims
    chunk = max(-(-kv_len // splits), 32)
    active = -(-kv_len // chunk)
    newkey = kv_len - 1
    half = d // 2
    cos, sin = rb(cos_sin[pos, :half]), rb(cos_sin[pos, half:])

    def norm_rope(x: np.ndarray, w) -> np.ndarray:
        if w is not None:
            inv = f32(1) / np.sqrt(np.mean(x * x, dtype=f32) + f32(eps))
            x = rb(w * rb(x * inv))
        x1, x2 = x[:half], x[half:]
        return rb(np.concatenate([rb(x1 * cos) - rb(x2 * sin), rb(x2 * cos) + rb(x1 * sin)]))

    attn = np.full((hq, d), np.nan, f32)
    part = {}
    prefetched = set()
    for blk in range(grid):  # prefetch_kv's cache blocks of this block's items
        for it in range(blk, hq * splits, grid):
            h, s = divmod(it, splits)
            if s >= active:
                continue
            b0, b1 = s * chunk // bs, int((min(kv_len - 1, (s + 1) * chunk) - 1) / bs)
            prefetched |= {(h // group, int(table[b])) for b in range(b0, b1 + 1)}
    for blk in range(grid):
        for it in range(blk, hq * splits, grid):
            h, s = divmod(it, splits)
            if s >= active:
                continue
            k0, k1 = s * chunk, min(kv_len, s * chunk + chunk)
            kvh = h // group
            q = norm_rope(qkv[h * d:(h + 1) * d], qn)
            if k1 == kv_len:
                knew = norm_rope(qkv[(hq + kvh) * d:(hq + kvh + 1) * d], kn)
                vnew = qkv[(hq + hkv + kvh) * d:(hq + hkv + kvh + 1) * d]
                if h % group == 0:
                    kc[slot // bs, kvh, slot % bs], vc[slot // bs, kvh, slot % bs] = knew, vnew
            m_w, l_w, acc_w = [], [], []
            seen = []
            for warp in range(WARPS):
                m, l, acc = f32(-np.inf), f32(0), np.zeros(d, f32)
                for base in range(k0 + warp, k1, WARPS * in_flight):
                    for u in range(in_flight):
                        key = base + u * WARPS
                        if key >= k1:
                            break
                        seen.append(key)
                        if key == newkey:
                            kr, vr = knew, vnew
                        else:
                            blk_id = int(table[key // bs])
                            assert (kvh, blk_id) in prefetched
                            kr, vr = kc[blk_id, kvh, key % bs], vc[blk_id, kvh, key % bs]
                        sc = f32(np.dot(q, kr).astype(f32) * f32(g.scale))
                        mnew = max(m, sc)
                        corr, p = np.exp(f32(m - mnew)), np.exp(f32(sc - mnew))
                        l = f32(l * corr + p)
                        acc = (acc * corr + p * vr).astype(f32)
                        m = mnew
                m_w.append(m), l_w.append(l), acc_w.append(acc)
            assert sorted(seen) == list(range(k0, k1))  # every key of the split once
            mx = max(m_w)
            wts = np.array([np.exp(f32(m - mx)) for m in m_w], f32)
            o = (np.array(acc_w) * wts[:, None]).sum(0) / f32((np.array(l_w) * wts).sum())
            if active == 1:
                attn[h] = rb(o)
            else:
                part[h, s] = (o, mx, f32((np.array(l_w) * wts).sum()))
    for h in range(hq):
        if active > 1:
            ms = np.array([part[h, i][1] for i in range(active)])
            w = np.array([part[h, i][2] for i in range(active)]) * np.exp(ms - ms.max())
            attn[h] = rb((w[:, None] * np.array([part[h, i][0] for i in range(active)])).sum(0)
                         / w.sum())
    return attn.reshape(-1)


@pytest.mark.parametrize("grid,staged", [(132, True), (7, True), (7, False)])
@pytest.mark.parametrize("geom,hidden,inter,kv_len,normed", [
    (Geometry(4, 2, 64, 16), 128, 96, 70, True),     # 2 splits of a few keys, blocks idle
    (Geometry(6, 2, 128, 7), 64, 48, 1, False),      # the first token: one key
    (Geometry(4, 1, 256, 16), 64, 40, 100, True),    # D 256, a group of 4
])
def test_transliteration_matches_the_reference(grid, staged, geom, hidden, inter, kv_len,
                                               normed):
    rng = np.random.default_rng(3)
    case = persistent_case(rng, "emulated", hidden, geom, inter, 2, kv_len, normed)
    x = case.inputs
    got = execute(HostBackend(), case)  # the reference kernel (the per-op references)
    d, hq, hkv = geom.head_dim, geom.hq, geom.hkv
    qkv_n, q_width = (hq + 2 * hkv) * d, hq * d
    splits = decode_persistent.persistent_splits(grid, hq, 33)
    limit = 227 * 1024 - decode_persistent.STATIC_SHARED_RESERVE
    caps = decode_persistent.stage_plan(
        grid, limit - decode_persistent.base_shared_bytes(hidden, hq, d, inter), hidden, hq,
        hkv, d, inter) if staged else (0, 0)
    table = x["block_tables"][0]
    slot, pos = int(x["slots"][0]), int(x["positions"][0])
    r = bf16_bits_to_f32(x["resid_in"])

    def w(name: str) -> np.ndarray:
        return bf16_bits_to_f32(x[name])

    def norm(v: np.ndarray, wt: np.ndarray) -> np.ndarray:
        inv = f32(1) / np.sqrt(f32(np.sum(v * v, dtype=f32) / f32(hidden)) + f32(1e-6))
        return rb(wt * rb(v * inv))

    for i in range(2):
        kc, vc = w(f"k_cache{i}"), w(f"v_cache{i}")
        qkv = rb(gemv_phase(w(f"qkv_w{i}"), norm(r, w(f"in_norm{i}")), qkv_n, 0, grid,
                            caps[0])[:, 0])
        attn = attention_phase(qkv, kc, vc, table, kv_len, slot, pos, x["cos_sin"],
                               w(f"q_norm{i}") if normed else None,
                               w(f"k_norm{i}") if normed else None, geom, splits, grid, 1e-6)
        assert not np.isnan(attn).any()
        r = rb(r + rb(gemv_phase(w(f"o_w{i}"), attn, hidden, 0, grid, caps[1])[:, 0]))
        gu = rb(gemv_phase(w(f"gate_up_w{i}"), norm(r, w(f"post_norm{i}")), inter, inter, grid,
                           caps[0]))
        act = rb(rb(gu[:, 0] / (f32(1) + np.exp(-gu[:, 0]))) * gu[:, 1])
        r = rb(r + rb(gemv_phase(w(f"down_w{i}"), act, hidden, 0, grid, caps[1])[:, 0]))
        np.testing.assert_allclose(kc, bf16_bits_to_f32(got[f"k_cache{i}"]), atol=2e-2, rtol=0)
        np.testing.assert_array_equal(vc, bf16_bits_to_f32(got[f"v_cache{i}"]))
    np.testing.assert_allclose(r, bf16_bits_to_f32(got["resid"]), atol=3e-2, rtol=3e-2)
