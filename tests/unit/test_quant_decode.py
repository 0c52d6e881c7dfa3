"""The quantized kernels' decodes (kernels/hopper/common/quant_decode.cuh), emulated bit for
bit with their constants and selectors read from the header (PTX `prmt.b32`, `mul.rn.bf16x2`
and `cvt.rn.f16x2.e4m3x2` semantics in numpy), against the E2M1 / E4M3 tables for every
input; and the launch builders of the tensor-core GEMVs (gemv_mma_quant, gemv_quant_direct
and its gate_up + SwiGLU entry points): route, geometry, shared memory and preconditions on
a mock Hopper device, and the quantized dense MLP's launches."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import numpy as np
import pytest

from atlas.core.numerics import E2M1_LUT, FP8_E4M3_LUT, f32_to_bf16_bits
from atlas.core.quant import Fp8ScaleMap
from atlas.model.model import DenseMlp
from atlas.runtime.cases.gemv_fp8 import fp8_linear_case
from atlas.runtime.cases.gemv_nvfp4 import nvfp4_linear_case
from atlas.runtime.cases.gemv_quant_direct import swiglu_case
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul_quant, matmul_quant_mma
from atlas.runtime.ops.matmul_nvfp4 import Nvfp4Weight
from atlas.runtime.ops.matmul_quant import Bf16Linear, Fp8Weight, QuantLinear
from atlas.runtime.ops.routes import KernelRoutes
from atlas.runtime.reference.gemv_h2 import SPLIT_PAIRS
from tests.unit.quant_support import QUANT_MODULES, HopperQuantMock, run_product

COMMON = Path(__file__).parents[2] / "kernels" / "hopper" / "common"
HEADER = (COMMON / "quant_decode.cuh").read_text()
U32 = np.uint64(0xFFFFFFFF)


def _body(signature: str) -> str:
    """The header's text of one function, from `signature` to its closing brace."""
    body = HEADER[HEADER.index(signature):]
    return body[:body.index("\n}")]


def _hex(pattern: str, text: str = HEADER) -> list[int]:
    """The hex constants the pattern's groups capture in `text` (the header), in order."""
    found = re.findall(pattern, text)
    return [int(v, 16) for m in found for v in (m if isinstance(m, tuple) else (m,))]


def _prmt(a, b, sel) -> np.ndarray:
    """PTX prmt.b32 (default mode): byte n of d = byte (sel nibble n & 7) of {b, a}, or that
    byte's msb replicated when the nibble's bit 3 is set."""
    a, b, sel = (np.asarray(v, np.uint64) for v in (a, b, sel))
    src = [(a >> np.uint64(8 * i)) & np.uint64(0xFF) for i in range(4)] + \
          [(b >> np.uint64(8 * i)) & np.uint64(0xFF) for i in range(4)]
    d = np.zeros(np.broadcast(a, b, sel).shape, np.uint64)
    for n in range(4):
        s = (sel >> np.uint64(4 * n)) & np.uint64(0xF)
        byte = np.choose((s & np.uint64(7)).astype(np.int64), src)
        byte = np.where(s & np.uint64(8), np.where(byte & np.uint64(0x80), 0xFF, 0), byte)
        d |= byte.astype(np.uint64) << np.uint64(8 * n)
    return d & U32


def _bf16_pair_values(p: int) -> tuple[float, float]:
    lo = np.array([(p & 0xFFFF) << 16], np.uint32).view(np.float32)[0]
    hi = np.array([p & 0xFFFF0000], np.uint32).view(np.float32)[0]
    return float(lo), float(hi)


def _mul_bf16x2(a: int, b: int) -> int:
    """mul.rn.bf16x2: each half's product rounded to bf16 (nearest even)."""
    (a0, a1), (b0, b1) = _bf16_pair_values(a), _bf16_pair_values(b)
    lo, hi = f32_to_bf16_bits(np.array([a0 * b0, a1 * b1], np.float32))
    return int(lo) | (int(hi) << 16)


def _lut(s_pair: int) -> tuple[int, int, int, int]:
    """E2m1Lut::scaled: (hi03, hi47, lo03, lo47)."""
    pairs = _hex(r"i == \d \? (0x[0-9A-F]{8})u") + _hex(r": (0x[0-9A-F]{8})u;\n}")
    assert len(pairs) == 4
    p = [_mul_bf16x2(c, s_pair) for c in pairs]
    hi_sel, lo_sel = _hex(r"prmt\(p\[0\], p\[1\], (0x[0-9a-fA-F]+)u\)")
    return (int(_prmt(p[0], p[1], hi_sel)), int(_prmt(p[2], p[3], hi_sel)),
            int(_prmt(p[0], p[1], lo_sel)), int(_prmt(p[2], p[3], lo_sel)))


def _e2m1x8(q: np.ndarray, lut: tuple[int, int, int, int]) -> np.ndarray:
    """e2m1x8_to_bf16x2 on every word of q: [len(q), 8] bf16 bit patterns."""
    hi03, hi47, lo03, lo47 = lut
    body = _body("void e2m1x8_to_bf16x2(")
    (idx_mask,) = _hex(r"const uint32_t idx = q & (0x[0-9A-Fa-f]+)u", body)
    sign_hi, sign_lo = _hex(r"half \? (0x[0-9A-Fa-f]+)u : (0x[0-9A-Fa-f]+)u\)", body)
    (sign_bits,) = _hex(r"\^ \(sg & (0x[0-9A-Fa-f]+)u\)", body)
    p_even, p_odd = _hex(r"= prmt\(lo, hs, (0x[0-9A-Fa-f]+)u\)", body)
    q = q.astype(np.uint64)
    idx, q4 = q & np.uint64(idx_mask), (q << np.uint64(4)) & U32
    out = []
    for half in range(2):
        sel = idx >> np.uint64(16) if half else idx
        sg = _prmt(q4, q, sign_hi if half else sign_lo)
        hs = _prmt(hi03, hi47, sel) ^ (sg & np.uint64(sign_bits))
        lo = _prmt(lo03, lo47, sel)
        for p in (_prmt(lo, hs, p_even), _prmt(lo, hs, p_odd)):
            out += [p & np.uint64(0xFFFF), p >> np.uint64(16)]
    return np.stack(out, axis=1).astype(np.uint16)


@pytest.mark.parametrize("scale_code", [0x38, 0x01, 0x7E, 0xBA])
def test_e2m1_lookup_gives_exact_scaled_bf16_for_every_code(scale_code: int) -> None:
    """Every E2M1 code in every position of a word, under E4M3 group scales from subnormal
    (0x01) to the largest (0x7E, 448) and negative (0xBA): bf16(e2m1 * s), exact."""
    s = float(FP8_E4M3_LUT[scale_code])
    s_bits = int(f32_to_bf16_bits(np.array([s], np.float32))[0])
    assert _bf16_pair_values(s_bits)[0] == s  # E4M3 scales are exact in bf16
    rng = np.random.default_rng(scale_code)
    low = np.arange(1 << 16, dtype=np.uint64)
    noise = rng.integers(0, 1 << 16, low.size).astype(np.uint64)
    q = np.concatenate([low | (noise << np.uint64(16)), (low << np.uint64(16)) | noise])
    got = _e2m1x8(q, _lut(s_bits | (s_bits << 16)))
    codes = np.stack([(q >> np.uint64(4 * j)) & np.uint64(0xF) for j in range(8)], axis=1)
    want = f32_to_bf16_bits((E2M1_LUT[codes.astype(np.uint8)] * np.float32(s))
                            .astype(np.float32))
    np.testing.assert_array_equal(got, want)  # bit-exact, signed zeros included
    exact = E2M1_LUT.astype(np.float64) * s
    assert np.array_equal(np.unique(exact), np.unique(_f64(want)))


def _e2m1x8_e4m3_bytes(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """e2m1x8_e4m3_bytes on every word of q: its even / odd byte words, the shift-and-mask
    expressions read from the header and evaluated."""
    body = _body("void e2m1x8_e4m3_bytes(")
    terms = re.findall(r"\(\(q ([<>]{2}) (\d)\) & (0x[0-9A-Fa-f]+)u\)", body)
    (sign_mask,) = _hex(r"\| \(q & (0x[0-9A-Fa-f]+)u\)", body)
    assert len(terms) == 3
    q = q.astype(np.uint64)

    def term(op: str, sh: str, mask: str) -> np.ndarray:
        moved = (q << np.uint64(int(sh))) & U32 if op == "<<" else q >> np.uint64(int(sh))
        return moved & np.uint64(int(mask, 16))

    return term(*terms[0]) | term(*terms[1]), term(*terms[2]) | (q & np.uint64(sign_mask))


def _e4m3_words_to_f16(words: list[np.ndarray]) -> np.ndarray:
    """Each byte of each word converted exactly to f16 (cvt.rn.f16x2.e4m3x2), bytes in
    order: [len(q), 4 len(words)] f16 bit patterns."""
    out = [(w >> np.uint64(8 * b)) & np.uint64(0xFF) for w in words for b in range(4)]
    return FP8_E4M3_LUT[np.stack(out, axis=1).astype(np.uint8)].astype(np.float16).view(
        np.uint16)


def _e2m1x8_half_cvt(q: np.ndarray) -> np.ndarray:
    """e2m1x8_to_f16x2_cvt on every word of q: [len(q), 8] f16 bit patterns (its PRMT
    selectors read from the header)."""
    even, odd = _e2m1x8_e4m3_bytes(q)
    sels = _hex(r"prmt\(even, odd, (0x[0-9A-Fa-f]+)u\)", _body("void e2m1x8_to_f16x2_cvt("))
    assert len(sels) == 2
    return _e4m3_words_to_f16([_prmt(even, odd, sel) for sel in sels])


def _e2m1x8_half_split(q: np.ndarray) -> np.ndarray:
    """e2m1x8_to_f16x2_split on every word of q: [len(q), 8] f16 bit patterns, the even
    word's bytes then the odd one's (the body must convert them as they are)."""
    body = _body("void e2m1x8_to_f16x2_split(")
    assert re.findall(r"e4m3x4_to_f16x2\((\w+), ", body) == ["even", "odd"]
    return _e4m3_words_to_f16(list(_e2m1x8_e4m3_bytes(q)))


def _every_code_words(seed: int) -> np.ndarray:
    """Every 16-bit pattern in both halves of a word (the other half random)."""
    rng = np.random.default_rng(seed)
    low = np.arange(1 << 16, dtype=np.uint64)
    noise = rng.integers(0, 1 << 16, low.size).astype(np.uint64)
    return np.concatenate([low | (noise << np.uint64(16)), (low << np.uint64(16)) | noise])


@pytest.mark.parametrize("decode, order", [(_e2m1x8_half_cvt, [0, 1, 2, 3, 4, 5, 6, 7]),
                                           (_e2m1x8_half_split, [0, 2, 4, 6, 1, 3, 5, 7])])
def test_e2m1_convert_decodes_give_exact_f16_in_their_pair_order(
        decode: Callable[[np.ndarray], np.ndarray], order: list[int]) -> None:
    """The h2 GEMV's E4M3-convert decodes (gemv_nvfp4.cu Nvfp4H2; ATLAS_NVFP4_H2_SPLIT picks
    one): every E2M1 code in every position of a word gives the f16 of e2m1 *
    2^kE2m1HalfExp exactly, signed zeros included; the own-order decode's f16 values are
    v0 .. v7, the split one's (v0, v2) (v4, v6) (v1, v3) (v5, v7), the order the reference
    emulates (reference/gemv_h2.SPLIT_PAIRS)."""
    (exp,) = [int(v) for v in re.findall(r"constexpr int kE2m1HalfExp = (-?\d+);", HEADER)]
    q = _every_code_words(11)
    codes = np.stack([(q >> np.uint64(4 * j)) & np.uint64(0xF) for j in order], axis=1)
    want = (E2M1_LUT[codes.astype(np.uint8)].astype(np.float64) * 2.0 ** exp).astype(np.float16)
    np.testing.assert_array_equal(decode(q), want.view(np.uint16))
    assert float(np.abs(want.astype(np.float64)).min(initial=1.0, where=want != 0)) >= 2.0 ** -14
    if decode is _e2m1x8_half_split:
        assert list(SPLIT_PAIRS[:8]) == order


def _f64(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _spread(q: np.ndarray) -> list[np.ndarray]:
    """e2m1x8_to_bf16x2_spread on every word of q, its four `p[i] = ...;` expressions read
    from the header and evaluated (they are valid Python once the `u` suffixes go)."""
    body = HEADER[HEADER.index("void e2m1x8_to_bf16x2_spread"):]
    body = body[:body.index("\n}")]
    consts = {name: int(v, 16) for name, v in
              re.findall(r"constexpr uint32_t (k\w+) = (0x[0-9A-Fa-f]+)u;", body)}
    exprs = re.findall(r"p\[(\d)\] = ([^;]+);", body)
    assert [int(i) for i, _ in exprs] == [0, 1, 2, 3] and consts
    q = q.astype(np.uint64)
    env = {"q": q, **{k: np.uint64(v) for k, v in consts.items()}}
    for sh, name, src in re.findall(r'asm\("shr.b32 %0, %1, (\d+);" : "=r"\((\w+)\) : '
                                    r'"r"\((\w+)\)\);', body):  # helper words
        env[name] = env[src] >> np.uint64(int(sh))
    out = []
    for _, e in exprs:
        e = re.sub(r"(0x[0-9A-Fa-f]+)u", r"np.uint64(\1)", e)
        e = re.sub(r"([<>]{2}) (\d+)", r"\1 np.uint64(\2)", e)
        out.append(eval(e, {"np": np}, env) & U32)  # noqa: S307 - our own header's expressions
    return out


def test_e2m1_spread_decode_is_every_code_times_2_to_the_minus_126() -> None:
    """e2m1x8_to_bf16x2_spread for every code in every position of a word: pair i holds
    (v_i, v_{i + 4}) as bf16 of e2m1 * 2^-126 exactly (0.5 the bf16 subnormal), signs kept."""
    rng = np.random.default_rng(7)
    low = np.arange(1 << 16, dtype=np.uint64)
    noise = rng.integers(0, 1 << 16, low.size).astype(np.uint64)
    q = np.concatenate([low | (noise << np.uint64(16)), (low << np.uint64(16)) | noise])
    pairs = _spread(q)
    codes = [(q >> np.uint64(4 * j)) & np.uint64(0xF) for j in range(8)]
    for i, p in enumerate(pairs):
        for half, j in ((0, i), (1, i + 4)):
            bits = ((p >> np.uint64(16 * half)) & np.uint64(0xFFFF)).astype(np.uint32)
            got = (bits << 16).view(np.float32).astype(np.float64)
            want = E2M1_LUT[codes[j].astype(np.uint8)].astype(np.float64) * 2.0 ** -126
            np.testing.assert_array_equal(got, want)
            assert np.array_equal(np.signbit(got), codes[j] >= 8)  # -0 stays -0


def test_e2m1_scaled_pairs_are_exact_normal_products_for_every_scale() -> None:
    """e2m1x8_scaled_pairs: the spread pairs times the group scale as e4m3x2_to_bf16_pairs
    _scaled makes it ((s, s) * 2^kE2m1ScaleExp, exact in bf16 for every non-NaN code), one
    mul.rn.bf16x2 (a subnormal input for 0.5): every product is e2m1 * s / kE2m1PairScale
    exactly and a normal bf16 or zero, for every (code, scale) pair. And the x permutation
    (spread_x_pairs) matches the pairs: (x_i, x_{i + 4})."""
    (exp,) = [int(v) for v in re.findall(r"constexpr int kE2m1ScaleExp = (\d+);", HEADER)]
    (pair_scale,) = [int(v) for v in re.findall(r"kE2m1PairScale = 0x1p(\d+)f", HEADER)]
    assert re.search(rf"\* 0x1p{exp}f, f1 = __high2float\(hh\) \* 0x1p{exp}f", HEADER)
    codes = np.arange(256)
    valid = codes[(codes & 0x7F) != 0x7F]
    s = FP8_E4M3_LUT[valid].astype(np.float64)
    s_bits = f32_to_bf16_bits((s * 2.0 ** exp).astype(np.float32))
    assert np.array_equal(_f64(s_bits), s * 2.0 ** exp)  # the scaled scale is exact in bf16
    q = np.array([sum(c << (4 * j) for j in range(8)) for c in range(16)], np.uint64)
    pairs = _spread(q)  # word c: code c everywhere
    for sb, sv in zip(s_bits.astype(int), s):
        for i in range(4):
            for c in range(16):
                prod = _mul_bf16x2(int(pairs[i][c]), sb | (sb << 16))
                for half in (prod & 0xFFFF, prod >> 16):
                    got = float(_f64(np.array([half], np.uint16))[0])
                    assert got == float(E2M1_LUT[c]) * sv * 2.0 ** -pair_scale, (c, sv)
                    assert half & 0x7F80 or not half & 0x7FFF  # normal or zero
    sels = _hex(r"p\[\d\] = prmt\(x\d\d, x\d\d, (0x[0-9A-Fa-f]+)u\);")
    srcs = re.findall(r"p\[\d\] = prmt\((x\d\d), (x\d\d), 0x", HEADER)
    xs = np.arange(8, dtype=np.uint64) + np.uint64(0x3F00)
    words = {f"x{2 * i}{2 * i + 1}": xs[2 * i] | (xs[2 * i + 1] << np.uint64(16)) for i in range(4)}
    for i, ((a, b), sel) in enumerate(zip(srcs, sels)):
        p = int(_prmt(words[a], words[b], sel))
        assert (p & 0xFFFF, p >> 16) == (int(xs[i]), int(xs[i + 4]))


def test_e4m3_pair_decode_is_the_value_times_2_to_the_minus_112() -> None:
    """e4m3x2_to_bf16x2 for every pair of non-NaN codes: the hardware's exact f16, shifted
    right by 3 with the sign moved back, is a normal bf16 of value * 2^-112."""
    (shift,) = [int(v) for v in re.findall(r"const uint32_t t = h >> (\d+);", HEADER)]
    (mul, mask) = re.search(r"return t \+ (\d+)u \* \(t & (0x[0-9a-fA-F]+)u\);", HEADER).groups()
    codes = np.arange(256)
    valid = codes[(codes & 0x7F) != 0x7F]
    f16 = FP8_E4M3_LUT[valid].astype(np.float16)
    assert np.array_equal(f16.astype(np.float32), FP8_E4M3_LUT[valid])  # exact in f16
    h16 = f16.view(np.uint16).astype(np.uint64)
    h = (h16[:, None] | (h16[None, :] << np.uint64(16))).reshape(-1)  # every (lo, hi) pair
    t = h >> np.uint64(shift)
    out = (t + np.uint64(int(mul)) * (t & np.uint64(int(mask, 16)))) & U32
    got = np.stack([out & np.uint64(0xFFFF), out >> np.uint64(16)], axis=1).astype(np.uint16)
    vals = FP8_E4M3_LUT[valid].astype(np.float64) * 2.0 ** -112
    want = np.stack([np.repeat(vals[:, None], valid.size, 1).reshape(-1),  # [lo, hi] pairs
                     np.repeat(vals[None, :], valid.size, 0).reshape(-1)], axis=1)
    np.testing.assert_array_equal(_f64(got), want)
    exps = (got.astype(np.uint32) >> 7) & 0xFF
    assert ((exps > 0) | (got & 0x7FFF == 0)).all()  # normal or zero, never subnormal
    assert re.search(r"kE4m3PairScale = 0x1p112f", HEADER)


# ---- launch builders -------------------------------------------------------------------------

def _quant_mock() -> HopperQuantMock:
    """A hopper leaf without the register-fed kernel."""
    return HopperQuantMock()


def _weights(dev: MockGpuBackend, n: int, k: int) -> dict[str, object]:
    smap = Fp8ScaleMap.block(n, k)
    return {"fp8": Fp8Weight(dev.alloc(n * k), dev.alloc(4 * max(1, int(np.prod(smap.shape)))),
                             n, k, smap),
            "nvfp4": Nvfp4Weight(dev.alloc(n * k // 2), dev.alloc(n * k // 16), dev.alloc(4 * n),
                                 n, k)}


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
@pytest.mark.parametrize("m, func", [(1, "_small"), (8, "_small"), (9, ""), (64, "")])
def test_decode_batches_take_the_tensor_core_gemv(fmt: str, m: int, func: str) -> None:
    dev = _quant_mock()
    kc = KernelCache(dev, KernelRoutes(quant_fp8_core=False, quant_nvfp4_h2=False,
                                       quant_fp8_h2=False))
    n, k = 4100, 1024
    w = _weights(dev, n, k)[fmt]
    x, y = dev.alloc(m * k * 2), dev.alloc(m * n * 2)
    QuantLinear(w).linear(kc, 0, x, y, m)
    (rec,) = dev.drain_launches()
    assert (rec.module, rec.func) == ("gemv_mma_quant", f"gemv_mma_{fmt}_bf16{func}")
    assert rec.grid[0] == -(-n // 32) and rec.block[0] == 256  # rows past n: last block
    assert rec.shared == matmul_quant_mma.ring_bytes(fmt, m)
    assert rec.args["x"] == x and rec.args["y"] == y and rec.args["m"] == m
    assert (rec.args["n"], rec.args["k"]) == (n, k)
    assert dev.opt_ins == [(rec.func, matmul_quant_mma.MMA_QUANT_MAX_SHARED)]


def test_the_down_projection_runs_silu_mul_then_the_tensor_core_gemv() -> None:
    dev = _quant_mock()
    w = _weights(dev, 256, 3072)["nvfp4"]
    gate_up, act, y = dev.alloc(4 * 2 * 3072 * 2), dev.alloc(4 * 3072 * 2), dev.alloc(4 * 512)
    QuantLinear(w).linear_silu(KernelCache(dev), 0, gate_up, y, 4, act_scratch=act)
    silu, gemv = dev.drain_launches()
    assert silu.func == "silu_mul_early_bf16" and silu.args["out"] == act  # 4 rows
    assert gemv.func == "gemv_mma_nvfp4_bf16_small" and gemv.args["x"] == act
    with pytest.raises(ValueError, match="activation scratch"):
        QuantLinear(w).linear_silu(KernelCache(dev), 0, gate_up, y, 4)


@pytest.mark.parametrize("k, funcs", [(3072, ["gemv_silu_fp8_bf16_single"]),
                                      (12288, ["silu_mul_bf16", "gemv_fp8_bf16_single"])])
def test_cuda_core_down_projection_fuses_swiglu_only_for_short_rows(k: int, funcs) -> None:
    """As the bf16 GEMV (FUSED_SILU_MAX_K): at k = 12,288 every block recomputing the
    activation row, one block per SM, cost more than a silu_mul launch."""
    dev = MockGpuBackend()
    w = _weights(dev, 256, k)["fp8"]
    QuantLinear(w).linear_silu(KernelCache(dev), 0, dev.alloc(2 * k * 2), dev.alloc(512), 1,
                               act_scratch=dev.alloc(k * 2))
    assert [r.func for r in dev.drain_launches()] == funcs


@pytest.mark.parametrize("k, threads", [(4096, 128), (12288, 256), (1536, 64)])
def test_one_fp8_row_takes_the_convert_gemv_by_default(k: int, threads: int) -> None:
    """Batch 1 (qkv, o_proj, down) without the half-precision-FMA GEMV (ATLAS_QUANT_FP8_H2=0)
    on gemv_fp8_cvt_bf16_single: 4 rows a block, two 16-byte chunks of each row per thread
    (256 threads at most); ATLAS_QUANT_FP8_CORE=0, more rows, NVFP4 and a forced tensor-core
    product keep the tensor-core GEMV."""
    dev = _quant_mock()
    n = 4100
    weights = _weights(dev, n, k)
    x, y = dev.alloc(2 * 8 * k), dev.alloc(2 * 8 * n)
    matmul_quant.linear_quant(KernelCache(dev, KernelRoutes(quant_fp8_h2=False)), 0, x,
                              weights["fp8"], y, 1)
    (rec,) = dev.drain_launches()
    assert (rec.module, rec.func) == ("gemv_fp8", "gemv_fp8_cvt_bf16_single")
    assert rec.grid[0] == -(-n // 4) and rec.block[0] == threads and rec.shared == 0
    assert (rec.args["x"], rec.args["y"], rec.args["m"], rec.args["k"]) == (x, y, 1, k)
    others = [(KernelRoutes(quant_fp8_core=False, quant_fp8_h2=False), "fp8", 1, None),
              (KernelRoutes(), "fp8", 2, None),
              (KernelRoutes(quant_nvfp4_h2=False), "nvfp4", 1, None),
              (KernelRoutes(quant_fp8_core=True), "fp8", 1, True)]
    for routes, fmt, m, mma in others:
        matmul_quant.linear_quant(KernelCache(dev, routes), 0, x, weights[fmt], y, m, mma=mma)
        assert [r.module for r in dev.drain_launches()] == ["gemv_mma_quant"]


def test_one_fp8_row_of_logits_takes_the_convert_gemv() -> None:
    """A quantized FP8 LM head at batch 1 (QuantLinear.linear(out_f32=True)) streams on
    gemv_fp8_cvt_f32_single, the convert GEMV's geometry; ATLAS_QUANT_FP8_CORE=0 and two rows
    keep the register-fed tensor-core kernel."""
    dev = _direct_mock()
    n, k = 20000, 4096
    w, x, y = _weights(dev, n, k)["fp8"], dev.alloc(2 * 2 * k), dev.alloc(4 * 2 * n)
    QuantLinear(w).linear(KernelCache(dev, KernelRoutes(quant_fp8_h2=False)), 0, x, y, 1,
                          out_f32=True)
    (rec,) = dev.drain_launches()
    assert (rec.module, rec.func) == ("gemv_fp8", "gemv_fp8_cvt_f32_single")
    assert rec.grid[0] == n // 4 and rec.block[0] == 128
    assert (rec.args["x"], rec.args["y"], rec.args["m"], rec.args["n"]) == (x, y, 1, n)
    for routes, m in ((KernelRoutes(quant_fp8_core=False, quant_fp8_h2=False), 1),
                      (KernelRoutes(quant_fp8_h2=False), 2)):
        QuantLinear(w).linear(KernelCache(dev, routes), 0, x, y, m, out_f32=True)
        assert [r.module for r in dev.drain_launches()] == ["gemv_quant_direct"]
    with pytest.raises(ValueError, match="f32 outputs"):
        matmul_quant.gemv_fp8(KernelCache(dev), 0, x, w, y, 1, out_f32=True)


def test_the_rows_switches_take_the_convert_gemvs_8_row_twins() -> None:
    """ATLAS_GEMV_ROWS=8: one FP8 row's bf16 product on gemv_fp8_cvt_x8_single (grid n / 8,
    the convert GEMV's threads), the SwiGLU product on gemv_fp8_cvt_swiglu_x8_single as by
    default (ATLAS_GEMV_SWIGLU_ROWS unset: 8; 4 its 4-row entry); logits stay on the 4-row
    f32 entry."""
    dev = _direct_mock()
    kc = KernelCache(dev, KernelRoutes.from_env({"ATLAS_GEMV_ROWS": "8",
                                                 "ATLAS_QUANT_FP8_H2": "0"}))
    n, k = 6144, 4096
    w, x, y = _weights(dev, n, k)["fp8"], dev.alloc(2 * k), dev.alloc(4 * n)
    QuantLinear(w).linear(kc, 0, x, y, 1)
    QuantLinear(w).linear_swiglu(kc, 0, x, y, 1)
    QuantLinear(w).linear(kc, 0, x, y, 1, out_f32=True)
    assert [(r.func, r.grid[0], r.block[0]) for r in dev.drain_launches()] == [
        ("gemv_fp8_cvt_x8_single", n // 8, 128), ("gemv_fp8_cvt_swiglu_x8_single", n // 8, 128),
        ("gemv_fp8_cvt_f32_single", n // 4, 128)]
    for env, swiglu in (({}, ("gemv_fp8_cvt_swiglu_x8_single", n // 8)),
                        ({"ATLAS_GEMV_SWIGLU_ROWS": "4"},
                         ("gemv_fp8_cvt_swiglu_bf16_single", n // 4))):
        kc = KernelCache(dev, KernelRoutes.from_env({**env, "ATLAS_QUANT_FP8_H2": "0"}))
        QuantLinear(w).linear(kc, 0, x, y, 1)
        QuantLinear(w).linear_swiglu(kc, 0, x, y, 1)
        assert [(r.func, r.grid[0]) for r in dev.drain_launches()] == [
            ("gemv_fp8_cvt_bf16_single", n // 4), swiglu]


@pytest.mark.parametrize("case", ["prefill", "switched off", "k % 64", "narrow blocks", "gb10"])
def test_other_products_keep_their_routes(case: str) -> None:
    dev = MockGpuBackend() if case == "gb10" else _quant_mock()
    routes = KernelRoutes(quant_mma=case != "switched off")
    n, k, m = 256, 96 if case == "k % 64" else 1024, 65 if case == "prefill" else 4
    w = _weights(dev, n, k)["fp8"]
    if case == "narrow blocks":  # 32-column scale blocks: a 64-value step spans two
        w = Fp8Weight(w.codes, w.scales, n, k, Fp8ScaleMap.block(n, k, 128, 32))
    scratch = dev.alloc(n * k * 2)
    matmul_quant.linear_quant(KernelCache(dev, routes), 0, dev.alloc(m * k * 2), w,
                              dev.alloc(m * n * 2), m, scratch)
    modules = {r.module for r in dev.drain_launches()}
    assert "gemv_mma_quant" not in modules and modules


@pytest.mark.parametrize("module, fmt, m, n, k, silu", [
    ("gemv_mma_quant", "block", 1, 70, 256, False), ("gemv_mma_quant", "channel", 9, 33, 192, True),
    ("gemv_mma_quant", "tensor", 40, 16, 64, False), ("gemv_mma_quant", "nvfp4", 3, 48, 256, False),
    ("gemv_mma_quant", "nvfp4", 17, 40, 128, True),
    ("gemv_quant_direct", "block", 1, 70, 256, False),
    ("gemv_quant_direct", "channel", 8, 33, 192, True),
    ("gemv_quant_direct", "tensor", 3, 16, 64, False),
    ("gemv_quant_direct", "nvfp4", 2, 48, 256, False),
    ("gemv_quant_direct", "nvfp4", 8, 40, 128, True)])
def test_tensor_core_launches_on_the_host_references(module: str, fmt: str, m: int, n: int,
                                                     k: int, silu: bool) -> None:
    """The forced tensor-core routes (the ring kernel, its register-fed twin) end to end on
    the host backend (arguments reach the references by their ABI names) against the
    float64 oracle."""
    rng = np.random.default_rng(m)
    route = {"direct": True} if module == "gemv_quant_direct" else {"mma": True}
    case = (nvfp4_linear_case(rng, m, n, k, silu, parts=2, **route) if fmt == "nvfp4"
            else fp8_linear_case(rng, fmt, m, n, k, silu, **route))
    assert case.module == module
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_launch_builder_preconditions() -> None:
    dev = _quant_mock()
    kc = KernelCache(dev)
    w = _weights(dev, 64, 128)
    with pytest.raises(ValueError, match="m=65"):
        matmul_quant_mma.gemv_mma(kc, 0, dev.alloc(65 * 256), w["fp8"], dev.alloc(8192), 65)
    with pytest.raises(ValueError, match="k % 64"):
        narrow = Fp8Weight(w["fp8"].codes, w["fp8"].scales, 64, 128,
                           Fp8ScaleMap.block(64, 128, 128, 32))
        matmul_quant_mma.gemv_mma(kc, 0, dev.alloc(256), narrow, dev.alloc(128), 1)
    with pytest.raises(ValueError, match="16-byte"):
        matmul_quant_mma.gemv_mma(kc, 0, dev.alloc(256) + 8, w["nvfp4"], dev.alloc(128), 1)
    assert not dev.drain_launches()


def test_ring_fits_the_partials_and_two_blocks_per_sm_for_small_batches() -> None:
    """The kernel reuses its rings for the warps' partial sums ([8][2][B tiles][4][32] f32)
    and, at m <= 8, two blocks share an SM (228 KiB, 1 KiB reserved per block)."""
    for fmt in ("fp8", "nvfp4"):
        for m in range(1, 65):
            assert matmul_quant_mma.ring_bytes(fmt, m) >= 8 * 2 * -(-m // 8) * 4 * 32 * 4
            assert matmul_quant_mma.ring_bytes(fmt, m) >= 2 * 8 * matmul_quant_mma.stage_bytes(
                fmt, m)
        assert 2 * (matmul_quant_mma.ring_bytes(fmt, 8) + 1024) <= 228 * 1024
    assert matmul_quant_mma.MMA_QUANT_MAX_SHARED <= 227 * 1024


# ---- the register-fed twin (gemv_quant_direct) ----------------------------------------------

def _direct_mock() -> HopperQuantMock:
    """A hopper leaf that also builds gemv_quant_direct."""
    return HopperQuantMock(QUANT_MODULES + ("gemv_quant_direct",))


#: the register-fed kernel's own loops (its staged variant has tests of its own,
#: test_quant_staged.py), for one FP8 row too (not the convert GEMV)
REGISTER_FED = KernelRoutes(quant_staged=False, quant_fp8_core=False, quant_nvfp4_h2=False,
                            quant_fp8_h2=False)


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
@pytest.mark.parametrize("m", [1, 5, 8])
def test_small_batches_take_the_register_fed_kernel_where_loaded(fmt: str, m: int) -> None:
    dev = _direct_mock()
    n, k = 4100, 1024
    w = _weights(dev, n, k)[fmt]
    x, y = dev.alloc(m * k * 2), dev.alloc(m * n * 2)
    QuantLinear(w).linear(KernelCache(dev, REGISTER_FED), 0, x, y, m)
    (rec,) = dev.drain_launches()
    assert (rec.module, rec.func) == ("gemv_quant_direct", f"gemv_qd_{fmt}_bf16")
    assert rec.grid[0] == -(-n // 16) and rec.block[0] == 256 and rec.shared == 0
    assert rec.args["x"] == x and rec.args["y"] == y and rec.args["m"] == m
    assert (rec.args["n"], rec.args["k"]) == (n, k)
    assert not dev.opt_ins  # no dynamic shared memory to opt in to


def test_register_fed_grid_is_one_wave_giving_each_sm_an_even_share() -> None:
    """direct_blocks on the H200's 132 SMs: Qwen3-8B's qkv (384 tiles) in 132 blocks of <= 3
    tiles, not 384 blocks in ~1.5 waves of two per SM; o / down (256) one tile a block;
    gate_up (1,536) and a vocabulary (9,496) in 264 looping blocks. For every tile count the
    grid is one wave whose busiest SM runs ceil(tiles / SMs) tiles (the least any split into
    whole tiles can); ties go to two blocks per SM; not persistent (the default) is one block
    per tile."""
    blocks = matmul_quant_mma.direct_blocks
    assert [blocks(t, 132, True) for t in (3, 256, 257, 384, 1536, 9496)] == [3, 256, 257, 132,
                                                                              264,
                                                                        264]
    assert blocks(384, 132, persistent=False) == 384
    assert [blocks(t, 132, True, p) for t, p in ((384, 2), (1536, 1), (100, 2))] == [264, 132,
                                                                                   100]
    with pytest.raises(ValueError, match="per_sm"):
        blocks(384, 132, True, 3)
    for tiles in range(1, 3000):
        grid = blocks(tiles, 132, True)
        assert 1 <= grid <= min(tiles, 2 * 132)
        busiest = matmul_quant_mma.busiest_sm_tiles(tiles, grid, 132)
        assert busiest == -(-tiles // 132)
        if matmul_quant_mma.busiest_sm_tiles(tiles, min(tiles, 264), 132) == busiest:
            assert grid == min(tiles, 264)


_ON = {"ATLAS_QUANT_PERSISTENT": "1"}


@pytest.mark.parametrize("env, product, grid", [(_ON, "linear", 132), (_ON, "swiglu", 264),
                                                (_ON, "logits", 264),
                                                ({"ATLAS_QUANT_BLOCKS_PER_SM": "2"}, "linear",
                                                 264),
                                                ({"ATLAS_QUANT_BLOCKS_PER_SM": "1"}, "swiglu",
                                                 132),
                                                ({}, "linear", 384), ({}, "swiglu", 1536),
                                                ({}, "logits", 1250)])
def test_register_fed_launches_take_the_persistent_grid_where_switched_on(
        env: dict[str, str], product: str, grid: int) -> None:
    """Qwen3-8B's qkv (6,144 rows: 384 tiles), gate_up + SwiGLU (12,288 features: 1,536
    tiles) and a vocabulary-like f32 product (a quantized LM head, 20,000 rows: 1,250)."""
    routes = KernelRoutes.from_env({**env, "ATLAS_QUANT_STAGED": "0", "ATLAS_QUANT_NVFP4_H2": "0"})
    assert routes.quant_persistent is (env.get("ATLAS_QUANT_PERSISTENT") == "1")
    with pytest.raises(ValueError, match="ATLAS_QUANT_BLOCKS_PER_SM"):
        KernelRoutes.from_env({"ATLAS_QUANT_BLOCKS_PER_SM": "5"})
    dev = _direct_mock()
    kc, k = KernelCache(dev, routes), 4096
    n = {"linear": 6144, "swiglu": 2 * 12288, "logits": 20000}[product]
    w, x = _weights(dev, n, k)["nvfp4"], dev.alloc(k * 2)
    run_product(kc, w, x, product, 1)
    (rec,) = dev.drain_launches()
    assert rec.module == "gemv_quant_direct" and rec.grid[0] == grid and rec.block[0] == 256
    assert rec.args["n"] == n and rec.args["k"] == k


@pytest.mark.parametrize("case", ["m9", "switched off", "nvfp4 k % 128", "not loaded"])
def test_the_ring_kernel_keeps_what_the_register_fed_one_does_not_take(case: str) -> None:
    dev = _quant_mock() if case == "not loaded" else _direct_mock()
    routes = KernelRoutes(quant_direct=False if case == "switched off" else None)
    n, k, m = 64, 192 if case == "nvfp4 k % 128" else 256, 9 if case == "m9" else 2
    w = _weights(dev, n, k)["nvfp4" if case == "nvfp4 k % 128" else "fp8"]
    QuantLinear(w).linear(KernelCache(dev, routes), 0, dev.alloc(m * k * 2), dev.alloc(m * n * 2),
                          m)
    (rec,) = dev.drain_launches()
    assert rec.module == "gemv_mma_quant"


@pytest.mark.parametrize("product, func", [("linear", "gemv_qd_nvfp4_lut_bf16"),
                                           ("logits", "gemv_qd_nvfp4_lut_f32"),
                                           ("swiglu", "gemv_qd_nvfp4_lut_swiglu_bf16")])
def test_the_lut_switch_takes_the_byte_table_entry_points_for_nvfp4_only(product: str,
                                                                         func: str) -> None:
    """ATLAS_QUANT_E2M1_LUT=1 (the A/B of the NVFP4 decode): every register-fed NVFP4 launch
    names the byte-table entry point, same geometry and arguments; FP8 keeps its own."""
    assert KernelRoutes.from_env({}).quant_e2m1_lut is False
    routes = KernelRoutes.from_env({"ATLAS_QUANT_E2M1_LUT": "1", "ATLAS_QUANT_STAGED": "0"})
    assert routes.quant_e2m1_lut is True
    dev = _direct_mock()
    n, k, m = 96, 256, 3
    for fmt, want in (("nvfp4", func), ("fp8", func.replace("nvfp4_lut", "fp8"))):
        w = _weights(dev, n, k)[fmt]
        kc, x = KernelCache(dev, routes), dev.alloc(m * k * 2)
        run_product(kc, w, x, product, m)
        (rec,) = dev.drain_launches()
        assert (rec.module, rec.func) == ("gemv_quant_direct", want)
        assert rec.grid[0] == (-(-n // 2 // 8) if product == "swiglu" else -(-n // 16))


def test_the_direct_route_switch_reads_the_environment() -> None:
    assert KernelRoutes.from_env({}).quant_direct is None
    assert KernelRoutes.from_env({"ATLAS_QUANT_DIRECT": "0"}).quant_direct is False
    assert KernelRoutes.from_env({"ATLAS_QUANT_DIRECT": "1"}).quant_direct is True
    with pytest.raises(ValueError, match="ATLAS_QUANT_DIRECT"):
        KernelRoutes.from_env({"ATLAS_QUANT_DIRECT": "yes"})


@pytest.mark.parametrize("fmt, m, inter, k", [("block", 1, 200, 256), ("channel", 8, 77, 192),
                                              ("nvfp4", 3, 40, 256), ("nvfp4", 8, 9, 128)])
def test_gate_up_ending_with_swiglu_on_the_host_references(fmt: str, m: int, inter: int,
                                                           k: int) -> None:
    """The `_swiglu` entry points end to end on the host backend against float64 (the
    product rounded to bf16, then silu_mul's rounding)."""
    case = swiglu_case(np.random.default_rng(inter), fmt, m, inter, k)
    result = check(HostBackend(), case)
    assert result.passed, result.detail


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
def test_gate_up_swiglu_launch_geometry(fmt: str) -> None:
    dev = _direct_mock()
    inter, k, m = 1001, 1024, 3
    w = _weights(dev, 2 * inter, k)[fmt]
    lin = QuantLinear(w)
    assert lin.fuses_swiglu(KernelCache(dev, REGISTER_FED), m)
    x, act = dev.alloc(m * k * 2), dev.alloc(m * inter * 2)
    lin.linear_swiglu(KernelCache(dev, REGISTER_FED), 0, x, act, m)
    (rec,) = dev.drain_launches()
    assert (rec.module, rec.func) == ("gemv_quant_direct", f"gemv_qd_{fmt}_swiglu_bf16")
    assert rec.grid[0] == -(-inter // 8) and rec.block[0] == 256 and rec.shared == 0
    assert rec.args["y"] == act and rec.args["n"] == 2 * inter and rec.args["m"] == m


@pytest.mark.parametrize("case", ["m9", "ring", "odd n", "not loaded", "bf16"])
def test_gate_up_keeps_silu_mul_where_the_swiglu_cannot_fuse(case: str) -> None:
    dev = _quant_mock() if case == "not loaded" else _direct_mock()
    # the tensor-core kernels' conditions: one FP8 row's CUDA-core GEMVs switched off
    routes = KernelRoutes(quant_direct=False if case == "ring" else None, quant_fp8_h2=False,
                          quant_fp8_core=False)
    n = 2 * 64 + (1 if case == "odd n" else 0)
    m = 9 if case == "m9" else 2 if case == "bf16" else 1  # bf16 fuses one row only
    lin = (Bf16Linear(dev.alloc(n * 256 * 2), n, 256) if case == "bf16"
           else QuantLinear(_weights(dev, n, 256)["fp8"]))
    assert not lin.fuses_swiglu(KernelCache(dev, routes), m)


def test_a_quantized_dense_mlp_runs_two_launches_at_decode() -> None:
    """DenseMlp over quantized weights at batch 1: gate_up + SwiGLU into act, then the down
    GEMV reading act (no silu_mul); at 9 rows the unfused gate_up, silu_mul, down."""
    dev = _direct_mock()
    h, inter = 256, 192
    mlp = DenseMlp(QuantLinear(_weights(dev, 2 * inter, h)["fp8"]),
                   QuantLinear(_weights(dev, h, inter)["fp8"]))
    bufs = {name: dev.alloc(9 * 2 * inter * 2) for name in ("normed", "gate_up", "act", "delta")}
    b = SimpleNamespace(w_scratch=0, **bufs)
    mlp.forward(KernelCache(dev, REGISTER_FED), 0, b, 1)
    gate_up, down = dev.drain_launches()
    assert gate_up.func == "gemv_qd_fp8_swiglu_bf16" and gate_up.args["y"] == bufs["act"]
    assert down.func == "gemv_qd_fp8_bf16" and down.args["x"] == bufs["act"]
    assert down.args["y"] == bufs["delta"]
    mlp.forward(KernelCache(dev, KernelRoutes(quant_staged=False)), 0, b, 1)  # the default:
    assert [r.func for r in dev.drain_launches()] == [  # both on the convert GEMV (256-byte
        "gemv_fp8_cvt_swiglu_bf16_single", "gemv_fp8_cvt_bf16_single"]  # rows: 4 a block)
    mlp.forward(KernelCache(dev, KernelRoutes(quant_staged=False, quant_fp8_h2=True)), 0, b, 1)
    assert [r.func for r in dev.drain_launches()] == ["gemv_fp8_h2_swiglu_bf16",  # both on the
                                                      "gemv_fp8_h2_bf16"]  # half-precision FMAs
    mlp.forward(KernelCache(dev, REGISTER_FED), 0, b, 9)
    assert [r.func for r in dev.drain_launches()] == ["gemv_mma_fp8_bf16", "silu_mul_early_bf16",
                                                      "gemv_mma_fp8_bf16"]
