"""The Hopper wgmma prefill attention (attention_sm90): its reference and check cases, the
route (off by default) and launch, and a numpy model of the kernel's index math: the copies
into the swizzled d-half tiles, what the K-major (Q, K) and N-major (V) descriptors read per
the PTX ISA's canonical layouts, and the S accumulator -> P A-fragment -> O accumulator
bookkeeping, checked against float64 products. There is no GPU in CI; the device check of
the kernel is tools/gpu/check_kernels.py over the same cases (all passed on the H200,
2026-12-01)."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.runtime.cases import attention_sm90 as case_defs
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
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
    assert {g.head_dim for _, g, _, _ in shapes} == {128}
    assert {g.hq // g.hkv for _, g, _, _ in shapes} >= {1, 2, 4, 8}
    assert {g.block_size for _, g, _, _ in shapes} >= {7, 16}
    q_lens = [n for _, _, lens, _ in shapes for n in lens]
    assert 1 in q_lens and any(n > 128 for n in q_lens) and any(n % 64 for n in q_lens)
    assert any(kv > q for _, _, qs, kvs in shapes for q, kv in zip(qs, kvs))  # chunked
    assert any(kv >= 16 * 64 - 24 for _, _, _, kvs in shapes for kv in kvs)  # many key tiles


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
    record = _launch(_Sm90Mock(), env=on)
    assert (record.module, record.func) == ("attention_sm90", "prefill_attn_sm90_bf16")
    assert record.grid == (32, 5, 2) and record.block == (128, 1, 1)
    assert record.shared == attention_sm90.PREFILL_SM90_SMEM == 82944
    assert _launch(_Sm90Mock(), head_dim=64, env=on).func == "prefill_attn_bf16"
    assert _launch(MockGpuBackend(), env=on).func == "prefill_attn_bf16"
    assert _launch(_Sm90Mock(), sm90=True).func == "prefill_attn_sm90_bf16"
    with pytest.raises(ValueError, match="head_dim=64"):
        _launch(_Sm90Mock(), head_dim=64, sm90=True)


# ---- index math --------------------------------------------------------------------------

def _swizzle128(row, chunk):
    return row * 128 + ((chunk ^ (row & 7)) << 4)


def _tile_chunk(r, ch):
    """attention_sm90.cu tile_chunk: d-half ch / 8, swizzled chunk ch % 8 of row r."""
    return (ch >> 3) * 8192 + _swizzle128(r, ch & 7)


def _swizzled(linear):
    return linear ^ (((linear >> 7) & 7) << 4)


def _written_tile(values: np.ndarray) -> np.ndarray:
    """Shared memory (one entry per bf16) of a [64][128] tile as the copies leave it."""
    smem = np.full(2 * 8192 // 2, np.nan)
    for r in range(64):
        for ch in range(16):
            base = _tile_chunk(r, ch) // 2
            smem[base:base + 8] = values[r, 8 * ch:8 * ch + 8]
    return smem


def test_copies_cover_the_tile_once() -> None:
    i = np.arange(128)[:, None] + 128 * np.arange(8)[None, :]
    offsets = _tile_chunk(i // 16, i % 16).ravel()
    assert sorted(offsets) == list(range(0, 2 * 8192, 16))


def test_k_major_descriptors_read_q_and_k_slices() -> None:
    """k16 slice kk of a [64][128] tile: half kk / 4, start + 32 (kk % 4) bytes; row r,
    element e of the slice at (r // 8) * 1024 + (r % 8) * 128 + 2 e, swizzled."""
    vals = np.arange(64 * 128, dtype=float).reshape(64, 128)
    smem = _written_tile(vals)
    r, e = np.meshgrid(np.arange(64), np.arange(16), indexing="ij")
    for kk in range(8):
        start = (kk >> 2) * 8192 + 32 * (kk & 3)
        got = smem[_swizzled(start + (r // 8) * 1024 + (r % 8) * 128 + 2 * e) // 2]
        np.testing.assert_array_equal(got, vals[r, 16 * kk + e])


def test_n_major_descriptor_reads_v_slices() -> None:
    """B N-major, 128-byte swizzle (PTX ISA canonical layout ((8, 8, m), (8, k)) :
    ((1, 8, LBO), (64, SBO)) elements): element (k, n) of slice kt in d-half dh at
    start + (k // 8) * 1024 + (k % 8) * 128 + 2 n, swizzled, start = dh * 8192 + 2048 kt.
    It must be V[key 16 kt + k][d 64 dh + n]."""
    vals = np.arange(64 * 128, dtype=float).reshape(64, 128)
    smem = _written_tile(vals)
    k, n = np.meshgrid(np.arange(16), np.arange(64), indexing="ij")
    for dh in range(2):
        for kt in range(4):
            start = dh * 8192 + 2048 * kt
            got = smem[_swizzled(start + (k // 8) * 1024 + (k % 8) * 128 + 2 * n) // 2]
            np.testing.assert_array_equal(got, vals[16 * kt + k, 64 * dh + n])


def _acc_coords(n: int):
    """(row, col) of d[j] of each warpgroup thread for an m64nN f32 accumulator."""
    t = np.arange(128)[:, None]
    j = np.arange(n // 2)[None, :]
    lane, q = t % 32, t // 32
    return (16 * q + lane // 4 + 8 * ((j // 2) % 2), 8 * (j // 4) + 2 * (lane % 4) + j % 2)


def test_s_accumulators_become_p_fragments_and_o_accumulators() -> None:
    """S (m64n64 accumulators) -> P A fragments (pairs s[8kt + 2i], s[8kt + 2i + 1] as
    mma.m16n8k16 A registers a_i of the thread's warp) -> O += P V per d-half (m64n64) ->
    the stored element (row g + 8 (j / 2 % 2), col 64 dh + 8 (j / 4) + 2c + j % 2)."""
    rng = np.random.default_rng(3)
    p, v = rng.standard_normal((64, 64)), rng.standard_normal((64, 128))
    rows, cols = _acc_coords(64)
    s_frag = p[rows, cols]  # [thread, 32]: what the QK^T accumulators hold (P here)
    a_rows = {0: (0, 0), 1: (8, 0), 2: (0, 8), 3: (8, 8)}  # a_i: (row, col) offsets
    rebuilt = np.full((64, 64), np.nan)
    for t in range(128):
        lane, warp = t % 32, t // 32
        g, c = lane // 4, lane % 4
        for kt in range(4):
            for i in range(4):
                dr, dc = a_rows[i]
                for e in range(2):
                    rebuilt[16 * warp + g + dr, 16 * kt + 2 * c + dc + e] = \
                        s_frag[t, 8 * kt + 2 * i + e]
    np.testing.assert_array_equal(rebuilt, p)  # every P element, each from its own register
    o = p @ v
    stored = np.full((64, 128), np.nan)
    o_rows, o_cols = _acc_coords(64)
    for dh in range(2):
        stored[o_rows, 64 * dh + o_cols] = o[o_rows, 64 * dh + o_cols]
    np.testing.assert_allclose(stored, o, rtol=0, atol=0)
