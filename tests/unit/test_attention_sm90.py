"""The Hopper wgmma prefill attention (attention_sm90): its reference and check cases, the
route and launch, a numpy model of the kernel's schedule (128-query blocks of two 64-row
warpgroups, 16 KiB key tiles, unmasked tiles below the diagonal, f32 online softmax, P
rounded to bf16) held to the cases' tolerances, and a numpy model of its index math: the
copies into the swizzled d-slabs, what the K-major (Q, K) and N-major (V) descriptors read
per the PTX ISA's canonical layouts, and the S accumulator -> P A-fragment -> O accumulator
bookkeeping, checked against float64 products. There is no GPU in CI; the device check of
the kernel is tools/gpu/check_kernels.py over the same cases."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.bench import kernel_shapes
from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from atlas.runtime.cases import attention_sm90 as case_defs
from atlas.runtime.cases.attention import Geometry, prefill_case
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check, compare
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, attention, attention_sm90
from atlas.runtime.ops.routes import KernelRoutes
# the elementwise kernels' check that a .cu file declares exactly its module's ABI entries
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

CASES = case_defs.sm90_prefill_cases(np.random.default_rng(90))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_cases_cover_tiles_and_groups() -> None:
    shapes = case_defs.SM90_PREFILL_SHAPES
    assert {c.module for c in CASES} == {"attention_sm90"}
    assert {g.head_dim for _, g, _, _ in shapes} == set(attention_sm90.PREFILL_SM90_HEAD_DIMS)
    assert {g.hq // g.hkv for _, g, _, _ in shapes} >= {1, 2, 4, 6, 8}
    assert {g.block_size for _, g, _, _ in shapes} >= {7, 16}
    q_lens = [n for _, _, lens, _ in shapes for n in lens]
    assert 1 in q_lens and any(n > 256 for n in q_lens) and any(n % 64 for n in q_lens)
    assert any(64 < n % 128 for n in q_lens)  # a chunk ending in a block's second warpgroup
    offsets = [kv - q for _, _, qs, kvs in shapes for q, kv in zip(qs, kvs)]
    assert any(o % 64 for o in offsets) and any(o > 0 and o % 32 == 0 for o in offsets)
    assert any(kv >= 16 * 64 - 24 for _, _, _, kvs in shapes for kv in kvs)  # many key tiles
    d256 = [(qs, kvs) for _, g, qs, kvs in shapes if g.head_dim == 256]
    assert any(kv > q for qs, kvs in d256 for q, kv in zip(qs, kvs))  # chunked at D 256


# ---- a numpy model of the kernel's schedule ------------------------------------------------

def _case_window(case) -> int:
    """The sliding window a case was built with (0: none)."""
    for name, *_, window in case_defs.SM90_WINDOW_SHAPES:
        if case.name in {name, *(f"{name} {v}" for v in case_defs.SM90_VARIANTS)}:
            return window
    return 0


def _kernel_model(case) -> np.ndarray:
    """What attention_sm90.cu computes, block by block: per 128-query block (tiles from the
    end), per warpgroup of 64 rows, every 8192 / D-key tile (16384 / D: the wide entry) from
    the first one the block's first row sees (with a sliding window; that tile's keys before
    it zero-filled) up to the block's last visible key, masked on both sides below the
    block's lo_tiles (a row's window starts inside), else only from the warpgroup's first
    diagonal tile on, f32 scores in log2 units, running max / sum, P rounded to bf16 for PV,
    O rescaled per tile, out = bf16(O / l). The cache slots of keys no row of the sequence
    sees are poisoned with NaN (a windowed cache need not hold them): a read would show. A
    padded head (out rows shorter than D) keeps its first elements, its scale theirs."""
    x = case.inputs
    hkv, block_size, d = x["k_cache"].shape[1:]
    total, hq, _ = x["q"].shape
    proj = case.outputs["out"].shape[-1]
    window = _case_window(case)
    q = bf16_bits_to_f32(x["q"])
    scale_log2 = np.float32(proj ** -0.5 * 1.4426950408889634)
    bkv = (16384 if case.name.endswith(" wide") else 8192) // d
    out = np.zeros((total, hq, d), np.float32)
    cu, lens = x["cu_q"], x["kv_lens"]
    for b in range(len(lens)):
        q_len, kv_len = int(cu[b + 1] - cu[b]), int(lens[b])
        first = kv_len - q_len
        slots = np.arange(kv_len)
        blk = x["block_tables"][b, slots // block_size]
        kf, vf = bf16_bits_to_f32(x["k_cache"]), bf16_bits_to_f32(x["v_cache"])
        if window:
            unseen = slots[slots < first - window + 1]
            kf[blk[unseen], :, unseen % block_size] = np.nan
            vf[blk[unseen], :, unseen % block_size] = np.nan
        for q0 in range(0, q_len, 128):
            n_keys = first + min(q0 + 128, q_len)
            lo_key = max(first + q0 - window + 1, 0) if window else 0
            t0 = lo_key // bkv
            n_tiles = -(-n_keys // bkv)
            lo_tiles = -(-max(n_keys - window, 0) // bkv) if window else 0
            for wg in range(2):
                q0w = q0 + 64 * wg
                rows = q0w + np.arange(64)
                live = rows < q_len
                limit = np.where(live, first + rows, kv_len - 1)
                full_tiles = (first + q0w + 1) // bkv
                qw = np.zeros((hq, 64, d), np.float32)  # every head at once
                qw[:, live] = q[cu[b] + rows[live]].transpose(1, 0, 2)
                m = np.full((hq, 64), -np.inf, np.float32)
                l = np.zeros((hq, 64), np.float32)
                o = np.zeros((hq, 64, d), np.float32)
                for t in range(t0, n_tiles):
                    keys = t * bkv + np.arange(bkv)
                    ok = (keys < n_keys) & ((keys >= lo_key) | (t > t0))
                    kt = np.zeros((hkv, bkv, d), np.float32)
                    vt = np.zeros((hkv, bkv, d), np.float32)
                    kt[:, ok] = kf[blk[keys[ok]], :, keys[ok] % block_size].transpose(1, 0, 2)
                    vt[:, ok] = vf[blk[keys[ok]], :, keys[ok] % block_size].transpose(1, 0, 2)
                    group = hq // hkv
                    kt, vt = np.repeat(kt, group, axis=0), np.repeat(vt, group, axis=0)
                    s = (qw @ kt.transpose(0, 2, 1)) * scale_log2
                    seen = keys[None, None, :] <= limit[None, :, None]
                    if t < lo_tiles:
                        seen &= keys[None, None, :] > limit[None, :, None] - window
                        s = np.where(seen, s, -np.inf)
                    elif t >= full_tiles:
                        s = np.where(seen, s, -np.inf)
                    m_new = np.maximum(m, s.max(axis=2))
                    base = np.where(m_new == -np.inf, 0, m_new).astype(np.float32)
                    corr = np.exp2(m - base)
                    p = np.exp2(s - base[..., None])
                    l = l * corr + p.sum(axis=2)
                    m = m_new
                    o = o * corr[..., None] + round_bf16(p) @ vt
                out[cu[b] + rows[live]] = (o / l[..., None])[:, live].transpose(1, 0, 2)
    return f32_to_bf16_bits(out[..., :proj])


#: the cases of the plain entries' schedule (the split entry's partition is its host
#: reference's, reference/attention_split.py, held to the oracle above)
PLAIN = [c for c in CASES if " split " not in c.name]


@pytest.mark.parametrize("case", PLAIN, ids=[c.name for c in PLAIN])
def test_kernel_model_meets_the_case_tolerances(case) -> None:
    """The schedule (its masks, tiles and bf16 P) against the float64 oracle with the
    case's tolerance: the widened bound covers the P rounding (the host reference's bound
    is widened by the same amount)."""
    result = compare(case, {"out": _kernel_model(case)}, case.oracle(case.inputs))
    assert result.passed, result.detail


def test_cuda_entry_points_declare_exactly_the_abi() -> None:
    _declares_abi("attention_sm90")


# ---- route and launch ----------------------------------------------------------------------

class _Sm90Mock(MockGpuBackend):
    """A mock device whose loaded PTX set has attention and attention_sm90."""

    @property
    def module_names(self) -> list[str]:
        return ["attention", "attention_sm90"]


def _launch(dev: MockGpuBackend, head_dim: int = 128, env: dict[str, str] | None = None,
            sm90: bool | None = None):
    kc = KernelCache(dev, KernelRoutes.from_env(env or {}))
    ptrs = [dev.alloc(1 << 12) for _ in range(7)]
    attention.prefill_attention(kc, 0, *ptrs, 2, 32, 8, head_dim, 16, 64, head_dim ** -0.5,
                                300, sm90=sm90)
    (record,) = dev.drain_launches()
    return record


def test_route_is_on_by_default_and_off_by_switch() -> None:
    assert _launch(_Sm90Mock(), env={"ATLAS_PREFILL_ATTN_SM90": "0"}).func == "prefill_attn_bf16"
    on: dict[str, str] = {}
    wide = _launch(_Sm90Mock(), env=on)  # head_dim 128: the 128-key tiles by default
    assert (wide.module, wide.func) == ("attention_sm90", "prefill_attn_sm90_wide_bf16")
    assert wide.grid == (32, 3, 2) and wide.block == (256, 1, 1)  # 300 queries: 3 x 128
    assert wide.shared == attention_sm90.prefill_sm90_smem(128, "wide") == 230400
    record = _launch(_Sm90Mock(), env={"ATLAS_PREFILL_ATTN_WIDE": "0"})
    assert record.func == "prefill_attn_sm90_bf16" and record.grid == (32, 3, 2)
    assert record.shared == attention_sm90.prefill_sm90_smem(128) == 164864
    d256 = _launch(_Sm90Mock(), head_dim=256, env=on)
    assert d256.func == "prefill_attn_sm90_bf16" and d256.shared == 197632
    assert _launch(_Sm90Mock(), head_dim=64, env=on).func == "prefill_attn_bf16"
    assert _launch(MockGpuBackend(), env=on).func == "prefill_attn_bf16"
    assert _launch(_Sm90Mock(), sm90=True).func == "prefill_attn_sm90_wide_bf16"
    with pytest.raises(ValueError, match="head_dim=64"):
        _launch(_Sm90Mock(), head_dim=64, sm90=True)


# ---- the split entry (short chunks past long histories) ------------------------------------

def test_split_plan_packs_short_chunks_and_fills_one_wave() -> None:
    plan = attention_sm90.split_plan
    # the warm prefix-cache request on Qwen3-8B heads: 8 packed blocks, splits up to the
    # wave (132 // 8), bounded by the key tiles a split must take
    assert plan(32, 8, 128, 24, 2064, 1, 132, 4096, 1) == attention_sm90.SplitPlan(16, True)
    assert plan(32, 8, 128, 24, 2064, 1, 132, 4096, 2) == attention_sm90.SplitPlan(8, True)
    assert plan(32, 8, 128, 24, 2064, 1, 132, 4096, 2).grid(32, 8, 24, 1) == (8, 1, 8)
    # a long prompt fills the device on the plain grid: no split, no packing
    assert plan(32, 8, 128, 2048, 2048, 1, 132, 1 << 20, 1) is None
    # MHA: nothing to pack; split only where the history has the tiles
    assert plan(4, 4, 128, 3, 900, 1, 132, 4096, 2) == attention_sm90.SplitPlan(4, False)
    assert plan(4, 4, 128, 3, 200, 1, 132, 4096, 2) is None
    # a history too short to split: packing alone would leave fewer blocks each walking
    # every key (gpu205: slower), so the plain entry
    assert plan(32, 8, 128, 24, 30, 1, 132, 4096, 2) is None
    # the partial buffers bound the splits: 24 tokens x 3 splits fit 80 slots
    assert plan(32, 8, 128, 24, 2064, 1, 132, 80, 1) == attention_sm90.SplitPlan(3, True)
    # D 256 splits 32-key tiles
    assert attention_sm90.split_key_tile(256) == 32 and attention_sm90.split_key_tile(128) == 128


@pytest.mark.parametrize("n_tiles, t0, splits", [(17, 0, 8), (9, 0, 8), (3, 0, 8), (20, 7, 5),
                                                   (1, 0, 16)])
def test_split_tiles_cover_every_tile_once_in_order(n_tiles: int, t0: int, splits: int) -> None:
    runs = [attention_sm90.split_tiles(n_tiles, t0, splits, s) for s in range(splits)]
    covered = [t for ts, te in runs for t in range(ts, te)]
    assert covered == list(range(t0, n_tiles))
    assert all(te >= ts for ts, te in runs)


def test_split_route_launches_the_split_entry_and_its_merge() -> None:
    dev = _Sm90Mock()
    kc = KernelCache(dev, KernelRoutes.from_env({}))
    ptrs = [dev.alloc(1 << 12) for _ in range(9)]
    partials = attention_sm90.PrefillPartials(ptrs[7], ptrs[8], 4096)
    attention.prefill_attention(kc, 0, *ptrs[:7], 1, 32, 8, 128, 16, 200, 128 ** -0.5, 24,
                                max_kv_len=2064, partials=partials)
    split, merge = dev.drain_launches()
    assert split.func == "prefill_attn_sm90_split_bf16" and split.grid == (8, 1, 8)
    assert split.shared == attention_sm90.prefill_sm90_smem(128, "wide")
    assert merge.func == "prefill_attn_sm90_merge_bf16" and merge.grid == (8, 24, 1)
    # switched off, or without the history's length: the plain entry
    for env, kv in (({"ATLAS_PREFILL_ATTN_SPLIT": "0"}, 2064), ({}, 0)):
        kc = KernelCache(dev, KernelRoutes.from_env(env))
        attention.prefill_attention(kc, 0, *ptrs[:7], 1, 32, 8, 128, 16, 200, 128 ** -0.5, 24,
                                    max_kv_len=kv, partials=partials if kv else None)
        (record,) = dev.drain_launches()
        assert record.func == "prefill_attn_sm90_wide_bf16"


def test_split_cases_take_packing_and_splits_and_empty_splits() -> None:
    shapes = case_defs.SM90_SPLIT_SHAPES
    plans = [attention_sm90.split_plan(g.hq, g.hkv, g.head_dim, max(q), max(kv), len(q), 132,
                                       len(q) * max(q) * case_defs.SPLIT_CASE_MAX_SPLITS, mt)
             for _, g, q, kv, _, mt in shapes]
    assert all(p is not None and p.splits > 1 for p in plans)
    assert {p.pack for p in plans if p is not None} == {True, False}
    assert {g.head_dim for _, g, *_ in shapes} == set(attention_sm90.PREFILL_SM90_HEAD_DIMS)
    assert any(w for *_, w, _ in shapes) and any(g.proj_dim for _, g, *_ in shapes)


def test_the_mma_sync_cases_stay_on_their_kernel_where_wgmma_is_loaded() -> None:
    """cases/attention.py's prefill cases check prefill_attn_bf16 (module attention) even on
    an sm_90a set, where the default route would take the wgmma kernel (H200, 2026-12-01:
    they ran it there and held its bf16 P to prefill_attn_bf16's tolerance)."""
    case = prefill_case(np.random.default_rng(0), "mock", Geometry(8, 2, 128, 16), [5], [5])
    dev = _Sm90Mock()
    case.run(dev, 0, {name: dev.alloc(1 << 12) for name in (*case.inputs, "out")})
    (record,) = dev.drain_launches()
    assert record.func == "prefill_attn_bf16"


@pytest.mark.parametrize("variant, switch, shared", [
    ("qreg", "ATLAS_PREFILL_ATTN_QREG", 164864), ("wide", "ATLAS_PREFILL_ATTN_WIDE", 230400)])
def test_head_dim_128_entry_points_follow_their_switches(variant, switch, shared) -> None:
    env = {switch: "1"}
    record = _launch(_Sm90Mock(), env=env)
    assert record.func == f"prefill_attn_sm90_{variant}_bf16" and record.shared == shared
    assert _launch(_Sm90Mock(), head_dim=256, env=env).func == "prefill_attn_sm90_bf16"
    assert _launch(_Sm90Mock(), env={**env, "ATLAS_PREFILL_ATTN_SM90": "0"}).func == \
        "prefill_attn_bf16"
    windowed = [name for name, g, *_ in case_defs.SM90_WINDOW_SHAPES if g.head_dim == 128]
    assert {c.name for c in CASES if c.name.endswith(f" {variant}")} == {
        f"{name} {variant}" for name in [s[0] for s in case_defs.SM90_VARIANT_SHAPES] + windowed}
    assert all(g.head_dim == 128 for _, g, _, _ in case_defs.SM90_VARIANT_SHAPES)


def test_the_q_in_registers_opt_in_wins_over_the_wide_tiles() -> None:
    env = {"ATLAS_PREFILL_ATTN_QREG": "1", "ATLAS_PREFILL_ATTN_WIDE": "1"}
    assert _launch(_Sm90Mock(), env=env).func == "prefill_attn_sm90_qreg_bf16"


def test_kernel_table_restates_the_head_dims() -> None:
    assert kernel_shapes.SM90_PREFILL_HEAD_DIMS == attention_sm90.PREFILL_SM90_HEAD_DIMS
    assert kernel_shapes.SM90_VARIANT_HEAD_DIM == attention_sm90.PREFILL_SM90_VARIANT_HEAD_DIM
    assert set(kernel_shapes.SM90_VARIANTS) == set(attention_sm90.PREFILL_SM90_ENTRIES) - {""}
    assert case_defs.SM90_VARIANTS == kernel_shapes.SM90_VARIANTS
    labels = {s.label for s in kernel_shapes.table_shapes()
              if isinstance(s, kernel_shapes.PrefillAttention) and s.sm90}
    assert {"qwen3-8b T32768 sm90", "qwen3.5-35b-a3b T1024 sm90",
            "qwen3-8b T32768 sm90 qreg", "qwen3-8b T32768 sm90 wide"} <= labels


def test_shared_memory_fits_one_block_per_sm() -> None:
    """Q [128][D] + 4 stages of a 16 KiB K and V tile (3 of 32 KiB: "wide") + 1 KiB
    alignment <= 227 KiB."""
    for d in attention_sm90.PREFILL_SM90_HEAD_DIMS:
        assert attention_sm90.prefill_sm90_smem(d) <= 227 * 1024
        assert (8192 // d) * d * 2 == attention_sm90.PREFILL_SM90_TILE_BYTES
    assert attention_sm90.prefill_sm90_smem(128, "wide") <= 227 * 1024
    assert 128 * 128 * 2 == attention_sm90.PREFILL_SM90_WIDE_TILE_BYTES


#: (head_dim, keys of a K/V tile): Sm90Geometry's kBKV, and its kWide tile at head_dim 128
KEY_TILES = [(128, 64), (256, 32), (128, 128)]


# ---- index math --------------------------------------------------------------------------
# A tile of `rows` rows x D columns is D / 64 d-slabs of [rows][64] (128-byte rows,
# swizzled): chunk ch of row r at slab ch // 8, swizzle128(r, ch % 8).

def _swizzle128(row, chunk):
    return row * 128 + ((chunk ^ (row & 7)) << 4)


def _tile_chunk(r, ch, rows):
    """attention_sm90.cu's copy destination: d-slab ch / 8, swizzled chunk ch % 8 of row r."""
    return (ch >> 3) * rows * 128 + _swizzle128(r, ch & 7)


def _swizzled(linear):
    return linear ^ (((linear >> 7) & 7) << 4)


def _written_tile(values: np.ndarray) -> np.ndarray:
    """Shared memory (one entry per bf16) of a [rows][D] tile as the copies leave it."""
    rows, d = values.shape
    smem = np.full(rows * d, np.nan)
    for r in range(rows):
        for ch in range(d // 8):
            base = _tile_chunk(r, ch, rows) // 2
            smem[base:base + 8] = values[r, 8 * ch:8 * ch + 8]
    return smem


def _thread_copies(d: int, rows: int) -> np.ndarray:
    """Byte offsets the 256 threads copy to: chunk tid % (D / 8) of rows tid // (D / 8) +
    j * (256 / (D / 8))."""
    chunks = d // 8
    step = 256 // chunks
    tid = np.arange(256)
    r = tid[:, None] // chunks + step * np.arange(rows // step)[None, :]
    return _tile_chunk(r, (tid % chunks)[:, None], rows).ravel()


@pytest.mark.parametrize("d, keys", KEY_TILES)
def test_copies_cover_the_tiles_once(d: int, keys: int) -> None:
    for rows in (128, keys):  # the Q tile, a K or V tile
        assert sorted(_thread_copies(d, rows)) == list(range(0, rows * d * 2, 16))


@pytest.mark.parametrize("d, keys", KEY_TILES)
def test_k_major_descriptors_read_q_and_k_slices(d: int, keys: int) -> None:
    """k16 slice kk of a [rows][D] tile: slab kk / 4, start + 32 (kk % 4) bytes (+ 64
    rows for the second warpgroup's Q rows); row r, element e of the slice at (r // 8) *
    1024 + (r % 8) * 128 + 2 e, swizzled."""
    for rows, row0, n in ((128, 0, 64), (128, 64, 64), (keys, 0, keys)):
        # a warpgroup's Q rows, or every key of the tile
        vals = np.arange(rows * d, dtype=float).reshape(rows, d)
        smem = _written_tile(vals)
        r, e = np.meshgrid(np.arange(n), np.arange(16), indexing="ij")
        for kk in range(d // 16):
            start = (kk >> 2) * rows * 128 + row0 * 128 + 32 * (kk & 3)
            got = smem[_swizzled(start + (r // 8) * 1024 + (r % 8) * 128 + 2 * e) // 2]
            np.testing.assert_array_equal(got, vals[row0 + r, 16 * kk + e])


@pytest.mark.parametrize("d, keys", KEY_TILES)
def test_n_major_descriptor_reads_v_slices(d: int, keys: int) -> None:
    """B N-major, 128-byte swizzle (PTX ISA canonical layout ((8, 8, m), (8, k)) :
    ((1, 8, LBO), (64, SBO)) elements): element (k, n) of key slice kt in d-slab dh at
    start + (k // 8) * 1024 + (k % 8) * 128 + 2 n, swizzled, start = dh * slab + 2048 kt.
    It must be V[key 16 kt + k][d 64 dh + n]."""
    vals = np.arange(keys * d, dtype=float).reshape(keys, d)
    smem = _written_tile(vals)
    k, n = np.meshgrid(np.arange(16), np.arange(64), indexing="ij")
    for dh in range(d // 64):
        for kt in range(keys // 16):
            start = dh * keys * 128 + 2048 * kt
            got = smem[_swizzled(start + (k // 8) * 1024 + (k % 8) * 128 + 2 * n) // 2]
            np.testing.assert_array_equal(got, vals[16 * kt + k, 64 * dh + n])


def _acc_coords(n: int):
    """(row, col) of d[j] of each warpgroup thread for an m64nN f32 accumulator."""
    t = np.arange(128)[:, None]
    j = np.arange(n // 2)[None, :]
    lane, q = t % 32, t // 32
    return (16 * q + lane // 4 + 8 * ((j // 2) % 2), 8 * (j // 4) + 2 * (lane % 4) + j % 2)


@pytest.mark.parametrize("d, keys", KEY_TILES)
def test_s_accumulators_become_p_fragments_and_o_accumulators(d: int, keys: int) -> None:
    """S (m64n{keys} accumulators, keys = 8192 / D) -> P A fragments (pairs s[8kt + 2i],
    s[8kt + 2i + 1] as mma.m16n8k16 A registers a_i of the thread's warp) -> O += P V per
    d-slab (m64n64) -> the stored element (row g + 8 (j / 2 % 2), col 64 dh + 8 (j / 4) +
    2c + j % 2)."""
    rng = np.random.default_rng(3)
    p, v = rng.standard_normal((64, keys)), rng.standard_normal((keys, d))
    rows, cols = _acc_coords(keys)
    s_frag = p[rows, cols]  # [thread, keys / 2]: what the QK^T accumulators hold (P here)
    a_rows = {0: (0, 0), 1: (8, 0), 2: (0, 8), 3: (8, 8)}  # a_i: (row, col) offsets
    rebuilt = np.full((64, keys), np.nan)
    for t in range(128):
        lane, warp = t % 32, t // 32
        g, c = lane // 4, lane % 4
        for kt in range(keys // 16):
            for i in range(4):
                dr, dc = a_rows[i]
                for e in range(2):
                    rebuilt[16 * warp + g + dr, 16 * kt + 2 * c + dc + e] = \
                        s_frag[t, 8 * kt + 2 * i + e]
    np.testing.assert_array_equal(rebuilt, p)  # every P element, each from its own register
    o = p @ v
    stored = np.full((64, d), np.nan)
    o_rows, o_cols = _acc_coords(64)
    for dh in range(d // 64):
        stored[o_rows, 64 * dh + o_cols] = o[o_rows, 64 * dh + o_cols]
    np.testing.assert_allclose(stored, o, rtol=0, atol=0)
