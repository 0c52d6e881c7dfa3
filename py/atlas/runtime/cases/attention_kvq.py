"""Check cases for the quantized KV caches (FP8 and NVFP4): the calibrating, quantizing
appends (kv_quant.cu) and prefill / split-K decode attention over quantized pools
(attention_kvq.cu).

The oracles share no code with the references: the appends' quantization picks the nearest
E4M3 value (ties to the even code) or E2M1 value (ties away from zero) from enumerated
tables, element by element, and attention dequantizes each key slot by slot and runs an
exact float64 softmax. Unowned cache rows hold 0x7F bytes (E4M3 NaN: an FP8 code, or an
NVFP4 group scale), so a kernel that reads one key too many fails loudly. One decode case
per format at Qwen3-8B's heads joins the device check's CUDA graph (KernelCase.graph).
"""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, attention, kv_quant
from .attention import ATTN_TOL, Geometry, _softmax_rows
from .gemv import random_bf16

_E4M3_NAN = np.uint8(0x7F)
#: f32 partials: the kernels' online softmax sums keys in another order than the
#: reference's, and fold k_scale into the score scale; both move an f32 result by ~1e-6
#: of the outputs' magnitude (< 1), far under any quantization effect
PARTIAL_ABS_TOL = 2e-5


def _e4m3_values() -> np.ndarray:
    """float64 value of every E4M3 code 0..255 (NaN for 0x7F / 0xFF), decoded bit by bit."""
    out = np.empty(256)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exp, man = (code >> 3) & 0xF, code & 0x7
        if exp == 0xF and man == 0x7:
            out[code] = np.nan
        elif exp == 0:
            out[code] = sign * man / 8.0 * 2.0 ** -6
        else:
            out[code] = sign * (1.0 + man / 8.0) * 2.0 ** (exp - 7)
    return out


E4M3 = _e4m3_values()
#: E2M1 magnitudes of the codes 0..7
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
#: the quantized formats; their calibration ranges and pool dtypes
FORMATS = ("fp8", "nvfp4")
_QMAX = {"fp8": 448.0, "nvfp4": 448.0 * 6.0}
_DTYPES = {"fp8": DType.FP8E4M3, "nvfp4": DType.E2M1}


def row_bytes(fmt: str, head_dim: int) -> int:
    return head_dim if fmt == "fp8" else head_dim // 2 + head_dim // 16


def _nearest_e4m3(x: np.ndarray) -> np.ndarray:
    """Codes of the nearest finite E4M3 magnitudes (saturating at 448), ties to the even
    code, with x's sign bit (so a small negative value flushes to -0, code 0x80)."""
    mags = E4M3[:127]                                       # codes 0..126: 0 .. 448, ascending
    flat = np.minimum(np.abs(x.reshape(-1)), 448.0)
    dist = np.abs(flat[:, None] - mags[None, :])
    ties = dist == dist.min(axis=1, keepdims=True)
    even = (np.arange(127) & 1) == 0
    codes = (ties * (1 + even[None, :])).argmax(axis=1)     # an even tie beats an odd one
    codes = codes | np.where(np.signbit(x.reshape(-1)), 0x80, 0)
    return codes.astype(np.uint8).reshape(x.shape)


def _nearest_e2m1(x: np.ndarray) -> np.ndarray:
    """Nibbles of the nearest E2M1 magnitudes (saturating at 6), ties away from zero, with
    x's sign (a small negative value flushes to -0, nibble 8)."""
    dist = np.abs(E2M1[None, :] - np.minimum(np.abs(x.reshape(-1)), 6.0)[:, None])
    ties = dist == dist.min(axis=1, keepdims=True)
    code = 7 - ties[:, ::-1].argmax(axis=1)                 # the larger of two ties
    return (code | np.where(np.signbit(x.reshape(-1)), 8, 0)).reshape(x.shape)


def _nibble_values(n: np.ndarray) -> np.ndarray:
    return np.where(n & 8, -1.0, 1.0) * E2M1[n & 7]


def _nvfp4_row(x: np.ndarray, g: np.float32) -> np.ndarray:
    """One row's NVFP4 bytes: x float32 [D] at head scale g."""
    d = x.size
    out = np.zeros(d // 2 + d // 16, dtype=np.uint8)
    if g <= 0:
        return out
    groups = x.reshape(-1, 16)
    amax = np.abs(groups).max(axis=1).astype(np.float32)
    best = None
    for t in (np.float32(6), np.float32(4)):
        code = _nearest_e4m3((amax / np.float32(t * g)).astype(np.float64))
        sc = (E4M3[code].astype(np.float32) * g).astype(np.float32)
        inv = np.where(sc > 0, np.float32(1) / np.where(sc > 0, sc, 1), 0).astype(np.float32)
        nibs = np.where(sc[:, None] > 0, _nearest_e2m1(
            (groups * inv[:, None]).astype(np.float32).astype(np.float64)), 0)
        err = np.zeros(len(groups), np.float32)
        for i in range(16):                        # one f32 rounding per step, in order
            dv = (groups[:, i] - (_nibble_values(nibs[:, i]).astype(np.float32)
                                  * sc).astype(np.float32)).astype(np.float32)
            err = (err + (dv * dv).astype(np.float32)).astype(np.float32)
        if best is None:
            best = (err, code, nibs)
        else:
            take = err < best[0]
            best = (np.where(take, err, best[0]), np.where(take, code, best[1]),
                    np.where(take[:, None], nibs, best[2]))
    assert best is not None
    _, code, nibs = best
    flat = nibs.reshape(-1).astype(np.uint8)
    out[:d // 2] = flat[0::2] | (flat[1::2] << 4)
    out[d // 2:] = code
    return out


# ---- append + calibration -------------------------------------------------------------------
def append_case(rng: np.random.Generator, name: str, fmt: str, hkv: int, head_dim: int,
                block_size: int, slots: list[int], stage_rows: int, calib_tokens: int,
                preset: np.ndarray | None = None) -> KernelCase:
    """Stage `len(slots)` tokens into `fmt` pools; scales start at `preset` (0 = calibrate)."""
    t = len(slots)
    width = row_bytes(fmt, head_dim)
    num_blocks = max(max(slots) // block_size + 2, 2)
    stage = random_bf16(rng, (2, hkv, stage_rows, head_dim), 3.0)
    # one head with a larger range, so scales differ between heads
    stage[0, 0] = random_bf16(rng, (stage_rows, head_dim), 40.0)
    scales = np.zeros((2, hkv), np.float32) if preset is None else preset.astype(np.float32)
    pool_shape = (num_blocks, hkv, block_size, width)
    inputs = {"stage": stage, "slots": np.asarray(slots, np.int32), "scales": scales,
              "k_cache": np.full(pool_shape, _E4M3_NAN), "v_cache": np.full(pool_shape,
                                                                            _E4M3_NAN)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kv_quant.kv_append(KernelCache(backend), stream, _DTYPES[fmt], p["stage"], stage_rows,
                           p["slots"], p["scales"], p["k_cache"], p["v_cache"], t, hkv,
                           head_dim, block_size, calib_tokens)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        xs = bf16_bits_to_f32(x["stage"]).astype(np.float64)[:, :, :t]
        sc = x["scales"].astype(np.float64).copy()
        n = min(t, calib_tokens)
        live = np.asarray(slots[:n]) >= 0
        for which in range(2):
            for h in range(hkv):
                if sc[which, h] > 0:
                    continue
                seen = np.abs(xs[which, h, :n][live])
                amax = seen.max() if seen.size else 0.0
                sc[which, h] = (np.float32(np.float32(amax) / np.float32(_QMAX[fmt])) if amax
                                else 1.0)
        k, v = x["k_cache"].copy(), x["v_cache"].copy()
        for i, slot in enumerate(slots):
            if slot < 0:
                continue
            for which, pool in enumerate((k, v)):
                g = sc[which].astype(np.float32)                              # [hkv]
                x32 = xs[which, :, i].astype(np.float32)
                if fmt == "fp8":
                    scaled = x32 * (np.float32(1) / g)[:, None]
                    rows = _nearest_e4m3(scaled.astype(np.float64))
                else:
                    rows = np.stack([_nvfp4_row(x32[h], g[h]) for h in range(hkv)])
                pool[slot // block_size, :, slot % block_size] = rows
        return {"scales": sc, "k_cache": k, "v_cache": v}

    unowned = np.ones(pool_shape, dtype=bool)   # compare the written slots and untouched NaN
    outputs = {"scales": OutputSpec(DType.FP32, (2, hkv), (0.0, 0.0)),
               "k_cache": OutputSpec(DType.U8, pool_shape, (0.0, 0.0)),
               "v_cache": OutputSpec(DType.U8, pool_shape, (0.0, 0.0))}
    return KernelCase(name, "kv_quant", inputs, outputs, run, oracle,
                      {"k_cache": unowned, "v_cache": unowned})


@kernel_cases("kv_quant")
def append_cases(rng: np.random.Generator) -> list[KernelCase]:
    out = []
    for fmt in FORMATS:
        # head scales for the preset cases: FP8's as given, NVFP4's six times smaller
        div = 1.0 if fmt == "fp8" else 6.0
        out += [
            # a prefill of 40 tokens calibrating on its first 32 (one padding row, slot -1)
            append_case(rng, f"kv_{fmt} append D128 hkv8 bs16 calibrate", fmt, 8, 128, 16,
                        [int(s) for s in rng.permutation(64)[:39]] + [-1], 48, 32),
            # checkpoint scales are kept; D 64, odd block size
            append_case(rng, f"kv_{fmt} append D64 hkv2 bs7 fixed scales", fmt, 2, 64, 7,
                        [3, 20, 8, -1, 13], 8, 512,
                        preset=np.array([[0.01, 0.2], [0.05, 0.004]]) / div),
            # decode: one token per sequence, no calibration, D 256
            append_case(rng, f"kv_{fmt} append D256 hkv2 bs16 decode", fmt, 2, 256, 16,
                        [5, 37, 70], 4, 0, preset=np.array([[0.02, 0.03], [0.01, 0.05]]) / div),
        ]
    return out


# ---- attention ------------------------------------------------------------------------------
def _random_rows(rng: np.random.Generator, fmt: str, n: int, head_dim: int) -> np.ndarray:
    """n random finite rows: FP8 codes, or NVFP4 nibbles (every nibble is finite) under
    group scales 0.25..4 (E4M3 codes 40..72)."""
    if fmt == "fp8":
        finite = np.flatnonzero(np.isfinite(E4M3)).astype(np.uint8)
        return rng.choice(finite, (n, head_dim))
    nibbles = rng.integers(0, 256, (n, head_dim // 2), dtype=np.uint8)
    scales = rng.integers(40, 73, (n, head_dim // 16), dtype=np.uint8)
    return np.concatenate([nibbles, scales], axis=1)


def paged_cache(rng: np.random.Generator, fmt: str, kv_lens: list[int], g: Geometry
                ) -> dict[str, np.ndarray]:
    """`fmt` pools, sequences' blocks at shuffled ids, 0x7F (E4M3 NaN) in every byte of an
    unowned row; scales per (K/V, kv head)."""
    need = [-(-n // g.block_size) for n in kv_lens]
    num_blocks = sum(need) + 3
    max_blocks = max(need) + 2
    shape = (num_blocks, g.hkv, g.block_size, row_bytes(fmt, g.head_dim))
    k = np.full(shape, _E4M3_NAN)
    v = np.full(shape, _E4M3_NAN)
    ids = rng.permutation(num_blocks).astype(np.int32)
    tables = rng.integers(0, num_blocks, (len(kv_lens), max_blocks)).astype(np.int32)
    used = 0
    for b, n in enumerate(kv_lens):
        own = ids[used:used + need[b]]
        used += need[b]
        tables[b, :need[b]] = own
        for p in range(n):
            blk, off = own[p // g.block_size], p % g.block_size
            k[blk, :, off] = _random_rows(rng, fmt, g.hkv, g.head_dim)
            v[blk, :, off] = _random_rows(rng, fmt, g.hkv, g.head_dim)
    # K scales keep |k| <= ~4 (FP8: 448 * 0.009, NVFP4: 6 * 4 * 0.17); V scales |v| <= ~1
    div = 1.0 if fmt == "fp8" else 448.0 / 24.0
    scales = np.stack([rng.uniform(0.002, 0.009, g.hkv) * div,
                       rng.uniform(0.0005, 0.002, g.hkv) * div]).astype(np.float32)
    return {"k_cache": k, "v_cache": v, "kv_scales": scales, "block_tables": tables,
            "kv_lens": np.asarray(kv_lens, dtype=np.int32)}


def _dequant_row(fmt: str, row: np.ndarray, scale: float) -> np.ndarray:
    """float64 [D] of one quantized row at head scale `scale`."""
    if fmt == "fp8":
        return E4M3[row] * scale
    d = row.size * 16 // 9
    nib = np.empty(d, dtype=np.int64)
    nib[0::2], nib[1::2] = row[:d // 2] & 0xF, row[:d // 2] >> 4
    return _nibble_values(nib) * np.repeat(E4M3[row[d // 2:]], 16) * scale


def _token_kv(fmt: str, x: dict[str, np.ndarray], b: int, g: Geometry
              ) -> tuple[np.ndarray, ...]:
    """float64 K, V [kv_len, hkv, D] of sequence b, dequantized slot by slot."""
    n = int(x["kv_lens"][b])
    sc = x["kv_scales"].astype(np.float64)
    k = np.empty((n, g.hkv, g.head_dim))
    v = np.empty((n, g.hkv, g.head_dim))
    for p in range(n):
        blk = x["block_tables"][b, p // g.block_size]
        for h in range(g.hkv):
            k[p, h] = _dequant_row(fmt, x["k_cache"][blk, h, p % g.block_size], sc[0][h])
            v[p, h] = _dequant_row(fmt, x["v_cache"][blk, h, p % g.block_size], sc[1][h])
    return k, v


def prefill_case(rng: np.random.Generator, name: str, fmt: str, g: Geometry,
                 q_lens: list[int], kv_lens: list[int]) -> KernelCase:
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    total = int(cu[-1])
    inputs = paged_cache(rng, fmt, kv_lens, g)
    inputs["q"] = random_bf16(rng, (total, g.hq, g.head_dim), 2.0)
    inputs["cu_q"] = cu
    num_seqs, max_blocks = len(q_lens), inputs["block_tables"].shape[1]

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kv_quant.prefill_attention_kvq(
            KernelCache(backend), stream, _DTYPES[fmt], p["q"], p["k_cache"], p["v_cache"],
            p["kv_scales"], p["block_tables"], p["cu_q"], p["kv_lens"], p["out"], num_seqs,
            g.hq, g.hkv, g.head_dim, g.block_size, max_blocks, g.scale, max(q_lens))

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        q = bf16_bits_to_f32(x["q"]).astype(np.float64)
        out = np.empty_like(q)
        for b in range(num_seqs):
            k, v = _token_kv(fmt, x, b, g)
            q_len, kv_len = q_lens[b], kv_lens[b]
            visible = (np.arange(kv_len)[None, :]
                       <= (kv_len - q_len + np.arange(q_len))[:, None])
            for h in range(g.hq):
                kvh = h // (g.hq // g.hkv)
                s = q[cu[b]:cu[b + 1], h] @ k[:, kvh].T * g.scale
                out[cu[b]:cu[b + 1], h] = _softmax_rows(np.where(visible, s, -np.inf)) @ v[:, kvh]
        return {"out": out}

    spec = OutputSpec(DType.BF16, (total, g.hq, g.head_dim), ATTN_TOL)
    return KernelCase(name, "attention_kvq", inputs, {"out": spec}, run, oracle)


def decode_case(rng: np.random.Generator, name: str, fmt: str, g: Geometry,
                kv_lens: list[int], num_splits: int, graph: bool = False) -> KernelCase:
    """Partials and combine of one query per sequence on a num_splits grid; `graph` puts the
    case into the device check's CUDA graph (captured on a created stream, replayed twice)."""
    num_seqs = len(kv_lens)
    inputs = paged_cache(rng, fmt, kv_lens, g)
    inputs["q"] = random_bf16(rng, (num_seqs, g.hq, g.head_dim), 2.0)
    max_blocks = inputs["block_tables"].shape[1]
    po_shape = (num_seqs, g.hq, num_splits, g.head_dim)
    ml_shape = (num_seqs, g.hq, num_splits, 2)
    chunks = [max(-(-n // num_splits), attention.DECODE_MIN_KEYS_PER_SPLIT) for n in kv_lens]
    active = np.zeros((num_seqs, g.hq, num_splits), dtype=bool)
    for b, (n, c) in enumerate(zip(kv_lens, chunks)):
        active[b] = np.arange(num_splits)[None, :] * c < n

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kv_quant.decode_attention_kvq(
            KernelCache(backend), stream, _DTYPES[fmt], p["q"], p["k_cache"], p["v_cache"],
            p["kv_scales"], p["block_tables"], p["kv_lens"], p["part_o"], p["part_ml"],
            p["out"], num_seqs, g.hq, g.hkv, g.head_dim, g.block_size, max_blocks, num_splits,
            g.scale)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        q = bf16_bits_to_f32(x["q"]).astype(np.float64)
        out = np.zeros_like(q)
        part_o, part_ml = np.zeros(po_shape), np.zeros(ml_shape)
        for b in range(num_seqs):
            k, v = _token_kv(fmt, x, b, g)
            for h in range(g.hq):
                kvh = h // (g.hq // g.hkv)
                s = k[:, kvh] @ q[b, h] * g.scale
                out[b, h] = _softmax_rows(s) @ v[:, kvh]
                for i in np.flatnonzero(active[b, h]):
                    lo, hi = i * chunks[b], min((i + 1) * chunks[b], kv_lens[b])
                    m = s[lo:hi].max()
                    e = np.exp(s[lo:hi] - m)
                    part_ml[b, h, i] = (m, e.sum())
                    part_o[b, h, i] = e @ v[lo:hi, kvh] / e.sum()
        return {"out": out, "part_o": part_o, "part_ml": part_ml}

    outputs = {
        "out": OutputSpec(DType.BF16, (num_seqs, g.hq, g.head_dim), ATTN_TOL),
        "part_o": OutputSpec(DType.FP32, po_shape, (1e-4, 1e-3)),
        "part_ml": OutputSpec(DType.FP32, ml_shape, (1e-4, 1e-4)),
    }
    mask = {"part_o": np.broadcast_to(active[..., None], po_shape),
            "part_ml": np.broadcast_to(active[..., None], ml_shape)}
    return KernelCase(name, "attention_kvq", inputs, outputs, run, oracle, mask,
                      reference_abs_tol=PARTIAL_ABS_TOL, graph=graph)


@kernel_cases("attention_kvq")
def kvq_cases(rng: np.random.Generator) -> list[KernelCase]:
    qwen3_8b = Geometry(32, 8, 128, 16)
    out = []
    for f in FORMATS:
        out += [
            prefill_case(rng, f"prefill {f} D128 gqa4 bs16 (qwen3-8b) mixed", f, qwen3_8b,
                         [70, 1, 9], [70, 40, 150]),
            prefill_case(rng, f"prefill {f} D64 gqa3 bs7 chunked", f, Geometry(6, 2, 64, 7),
                         [64, 17], [64, 100]),
            prefill_case(rng, f"prefill {f} D256 gqa8 bs16", f, Geometry(16, 2, 256, 16), [33],
                         [80]),
            decode_case(rng, f"decode {f} D128 gqa4 bs16 splits33 (qwen3-8b) graph", f,
                        qwen3_8b, [512, 1, 1056], 33, graph=True),
            decode_case(rng, f"decode {f} D128 gqa4 bs16 splits8 few active", f,
                        Geometry(8, 2, 128, 16), [1, 50, 300], 8),
            decode_case(rng, f"decode {f} D64 gqa8 bs32 splits1", f, Geometry(8, 1, 64, 32),
                        [70, 5], 1),
            decode_case(rng, f"decode {f} D256 gqa8 bs16 splits8", f, Geometry(16, 2, 256, 16),
                        [1, 300], 8),
        ]
    return out
