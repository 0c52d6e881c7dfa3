"""Check cases for the FP8 KV cache: the calibrating, quantizing append (kv_quant.cu) and
prefill / split-K decode attention over fp8 pools (attention_kvq.cu).

The oracles share no code with the references: the append's quantization picks the nearest
E4M3 value from an enumerated table in float64 (ties to the even code), and attention
dequantizes each key slot by slot and runs an exact float64 softmax. Unowned cache slots
hold E4M3 NaN (0x7F), so a kernel that reads one key too many fails loudly. One decode case
at Qwen3-8B's heads joins the device check's CUDA graph (KernelCase.graph).
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


# ---- append + calibration -------------------------------------------------------------------
def append_case(rng: np.random.Generator, name: str, hkv: int, head_dim: int,
                block_size: int, slots: list[int], stage_rows: int, calib_tokens: int,
                preset: np.ndarray | None = None) -> KernelCase:
    """Stage `len(slots)` tokens; scales start at `preset` (0 = calibrate)."""
    t = len(slots)
    num_blocks = max(max(slots) // block_size + 2, 2)
    stage = random_bf16(rng, (2, hkv, stage_rows, head_dim), 3.0)
    # one head with a larger range, so scales differ between heads
    stage[0, 0] = random_bf16(rng, (stage_rows, head_dim), 40.0)
    scales = np.zeros((2, hkv), np.float32) if preset is None else preset.astype(np.float32)
    pool_shape = (num_blocks, hkv, block_size, head_dim)
    inputs = {"stage": stage, "slots": np.asarray(slots, np.int32), "scales": scales,
              "k_cache": np.full(pool_shape, _E4M3_NAN), "v_cache": np.full(pool_shape,
                                                                            _E4M3_NAN)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kv_quant.fp8_kv_append(KernelCache(backend), stream, p["stage"], stage_rows,
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
                sc[which, h] = np.float32(np.float32(amax) / np.float32(448)) if amax else 1.0
        k, v = x["k_cache"].copy(), x["v_cache"].copy()
        for i, slot in enumerate(slots):
            if slot < 0:
                continue
            for which, pool in enumerate((k, v)):
                inv = np.float32(1) / sc[which].astype(np.float32)          # [hkv]
                scaled = xs[which, :, i].astype(np.float32) * inv[:, None]
                pool[slot // block_size, :, slot % block_size] = _nearest_e4m3(
                    scaled.astype(np.float64))
        return {"scales": sc, "k_cache": k, "v_cache": v}

    unowned = np.ones(pool_shape, dtype=bool)   # compare the written slots and untouched NaN
    outputs = {"scales": OutputSpec(DType.FP32, (2, hkv), (0.0, 0.0)),
               "k_cache": OutputSpec(DType.U8, pool_shape, (0.0, 0.0)),
               "v_cache": OutputSpec(DType.U8, pool_shape, (0.0, 0.0))}
    return KernelCase(name, "kv_quant", inputs, outputs, run, oracle,
                      {"k_cache": unowned, "v_cache": unowned})


@kernel_cases("kv_quant")
def append_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [
        # a prefill of 40 tokens calibrating on its first 32 (one padding row, slot -1)
        append_case(rng, "kv_fp8 append D128 hkv8 bs16 calibrate", 8, 128, 16,
                    [int(s) for s in rng.permutation(64)[:39]] + [-1], 48, 32),
        # checkpoint scales are kept; D 64, odd block size
        append_case(rng, "kv_fp8 append D64 hkv2 bs7 fixed scales", 2, 64, 7,
                    [3, 20, 8, -1, 13], 8, 512,
                    preset=np.array([[0.01, 0.2], [0.05, 0.004]])),
        # decode: one token per sequence, no calibration, D 256
        append_case(rng, "kv_fp8 append D256 hkv2 bs16 decode", 2, 256, 16, [5, 37, 70], 4, 0,
                    preset=np.array([[0.02, 0.03], [0.01, 0.05]])),
    ]


# ---- attention ------------------------------------------------------------------------------
def fp8_paged_cache(rng: np.random.Generator, kv_lens: list[int], g: Geometry
                    ) -> dict[str, np.ndarray]:
    """fp8 pools, sequences' blocks at shuffled ids, E4M3 NaN in every unowned slot; scales
    per (K/V, kv head)."""
    need = [-(-n // g.block_size) for n in kv_lens]
    num_blocks = sum(need) + 3
    max_blocks = max(need) + 2
    shape = (num_blocks, g.hkv, g.block_size, g.head_dim)
    k = np.full(shape, _E4M3_NAN)
    v = np.full(shape, _E4M3_NAN)
    ids = rng.permutation(num_blocks).astype(np.int32)
    tables = rng.integers(0, num_blocks, (len(kv_lens), max_blocks)).astype(np.int32)
    finite = np.flatnonzero(np.isfinite(E4M3)).astype(np.uint8)
    used = 0
    for b, n in enumerate(kv_lens):
        own = ids[used:used + need[b]]
        used += need[b]
        tables[b, :need[b]] = own
        for p in range(n):
            blk, off = own[p // g.block_size], p % g.block_size
            k[blk, :, off] = rng.choice(finite, (g.hkv, g.head_dim))
            v[blk, :, off] = rng.choice(finite, (g.hkv, g.head_dim))
    # K scales keep |k| <= ~4 (448 * 0.009); V scales keep |v| <= ~1
    scales = np.stack([rng.uniform(0.002, 0.009, g.hkv),
                       rng.uniform(0.0005, 0.002, g.hkv)]).astype(np.float32)
    return {"k_cache": k, "v_cache": v, "kv_scales": scales, "block_tables": tables,
            "kv_lens": np.asarray(kv_lens, dtype=np.int32)}


def _token_kv(x: dict[str, np.ndarray], b: int, g: Geometry) -> tuple[np.ndarray, ...]:
    """float64 K, V [kv_len, hkv, D] of sequence b, dequantized slot by slot."""
    n = int(x["kv_lens"][b])
    sc = x["kv_scales"].astype(np.float64)
    k = np.empty((n, g.hkv, g.head_dim))
    v = np.empty((n, g.hkv, g.head_dim))
    for p in range(n):
        blk = x["block_tables"][b, p // g.block_size]
        k[p] = E4M3[x["k_cache"][blk, :, p % g.block_size]] * sc[0][:, None]
        v[p] = E4M3[x["v_cache"][blk, :, p % g.block_size]] * sc[1][:, None]
    return k, v


def prefill_case(rng: np.random.Generator, name: str, g: Geometry, q_lens: list[int],
                 kv_lens: list[int]) -> KernelCase:
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    total = int(cu[-1])
    inputs = fp8_paged_cache(rng, kv_lens, g)
    inputs["q"] = random_bf16(rng, (total, g.hq, g.head_dim), 2.0)
    inputs["cu_q"] = cu
    num_seqs, max_blocks = len(q_lens), inputs["block_tables"].shape[1]

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kv_quant.prefill_attention_fp8(
            KernelCache(backend), stream, p["q"], p["k_cache"], p["v_cache"], p["kv_scales"],
            p["block_tables"], p["cu_q"], p["kv_lens"], p["out"], num_seqs, g.hq, g.hkv,
            g.head_dim, g.block_size, max_blocks, g.scale, max(q_lens))

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        q = bf16_bits_to_f32(x["q"]).astype(np.float64)
        out = np.empty_like(q)
        for b in range(num_seqs):
            k, v = _token_kv(x, b, g)
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


def decode_case(rng: np.random.Generator, name: str, g: Geometry, kv_lens: list[int],
                num_splits: int, graph: bool = False) -> KernelCase:
    """Partials and combine of one query per sequence on a num_splits grid; `graph` puts the
    case into the device check's CUDA graph (captured on a created stream, replayed twice)."""
    num_seqs = len(kv_lens)
    inputs = fp8_paged_cache(rng, kv_lens, g)
    inputs["q"] = random_bf16(rng, (num_seqs, g.hq, g.head_dim), 2.0)
    max_blocks = inputs["block_tables"].shape[1]
    po_shape = (num_seqs, g.hq, num_splits, g.head_dim)
    ml_shape = (num_seqs, g.hq, num_splits, 2)
    chunks = [max(-(-n // num_splits), attention.DECODE_MIN_KEYS_PER_SPLIT) for n in kv_lens]
    active = np.zeros((num_seqs, g.hq, num_splits), dtype=bool)
    for b, (n, c) in enumerate(zip(kv_lens, chunks)):
        active[b] = np.arange(num_splits)[None, :] * c < n

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kv_quant.decode_attention_fp8(
            KernelCache(backend), stream, p["q"], p["k_cache"], p["v_cache"], p["kv_scales"],
            p["block_tables"], p["kv_lens"], p["part_o"], p["part_ml"], p["out"], num_seqs,
            g.hq, g.hkv, g.head_dim, g.block_size, max_blocks, num_splits, g.scale)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        q = bf16_bits_to_f32(x["q"]).astype(np.float64)
        out = np.zeros_like(q)
        part_o, part_ml = np.zeros(po_shape), np.zeros(ml_shape)
        for b in range(num_seqs):
            k, v = _token_kv(x, b, g)
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
    return [
        prefill_case(rng, "prefill fp8 D128 gqa4 bs16 (qwen3-8b) mixed", qwen3_8b,
                     [70, 1, 9], [70, 40, 150]),
        prefill_case(rng, "prefill fp8 D64 gqa3 bs7 chunked", Geometry(6, 2, 64, 7),
                     [64, 17], [64, 100]),
        prefill_case(rng, "prefill fp8 D256 gqa8 bs16", Geometry(16, 2, 256, 16), [33], [80]),
        decode_case(rng, "decode fp8 D128 gqa4 bs16 splits33 (qwen3-8b) graph", qwen3_8b,
                    [512, 1, 1056], 33, graph=True),
        decode_case(rng, "decode fp8 D128 gqa4 bs16 splits8 few active", Geometry(8, 2, 128, 16),
                    [1, 50, 300], 8),
        decode_case(rng, "decode fp8 D64 gqa8 bs32 splits1", Geometry(8, 1, 64, 32), [70, 5], 1),
        decode_case(rng, "decode fp8 D256 gqa8 bs16 splits8", Geometry(16, 2, 256, 16),
                    [1, 300], 8),
    ]
