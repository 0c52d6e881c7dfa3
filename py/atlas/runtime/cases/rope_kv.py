"""Check cases for qk_norm_rope_kv_bf16: head dims 64/128 and an odd half (D = 6), with and
without the q/k norm, GQA, scattered slots and a padding token (slot -1); the general
kernel's partial rotary, gated q pitch, (1 + w) norms and padded heads (proj_dim elements of
a head in the qkv row, its q_out and cache rows zero past them: Phi-3-mini's 96 at 128).

The caches are in/out buffers with random contents: entries the kernel must not touch are
compared against their original values, so a stray write fails.
"""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, rope
from .attention import pad_heads
from .gemv import random_bf16

EPS = 1e-6
BLOCK_SIZE = 16
MAX_POS = 97


def _bf(a: np.ndarray) -> np.ndarray:
    return bf16_bits_to_f32(a).astype(np.float64)


def rb(a: np.ndarray) -> np.ndarray:
    """Round float64 values to bf16 precision (through float32, like the device)."""
    return round_bf16(np.asarray(a, dtype=np.float32)).astype(np.float64)


def head_norm(x: np.ndarray, w: np.ndarray, offset: bool = False) -> np.ndarray:
    """Per-head RMSNorm over the last axis with the kernel's roundings (float64 values)."""
    inv = 1.0 / np.sqrt(np.mean(x ** 2, axis=-1, keepdims=True) + EPS)
    if offset:  # Qwen3.5: (1 + w), one rounding
        return rb(x * inv * (1.0 + w))
    return rb(w * rb(x * inv))


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """transformers' q * cos + rotate_half(q) * sin on the first 2 * cos.shape[-1] dims (the
    rest pass through: partial rotary)."""
    rot = 2 * cos.shape[-1]
    xr, rest = x[..., :rot], x[..., rot:]
    half = rot // 2
    rotated = np.concatenate([-xr[..., half:], xr[..., :half]], axis=-1)
    c = np.concatenate([cos, cos], axis=-1)
    s = np.concatenate([sin, sin], axis=-1)
    return np.concatenate([rb(xr * c) + rb(rotated * s), rest], axis=-1)


def _make_oracle(hq: int, hkv: int, d: int, normed: bool, q_pitch: int | None = None,
                 rot: int | None = None, offset: bool = False, proj: int | None = None):
    proj = proj or d
    q_pitch = q_pitch or proj
    rot = rot or proj

    def oracle(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        t = inputs["positions"].size
        x = _bf(inputs["qkv"]).reshape(t, -1)
        q = x[:, :hq * q_pitch].reshape(t, hq, q_pitch)[:, :, :proj]
        k = x[:, hq * q_pitch:hq * q_pitch + hkv * proj].reshape(t, hkv, proj)
        v = x[:, hq * q_pitch + hkv * proj:].reshape(t, hkv, proj)
        if normed:
            q = head_norm(q, _bf(inputs["q_norm_w"]), offset)
            k = head_norm(k, _bf(inputs["k_norm_w"]), offset)
        table = inputs["cos_sin"][inputs["positions"]]
        cos = rb(table[:, None, : rot // 2])
        sin = rb(table[:, None, rot // 2:])
        kc, vc = _bf(inputs["k_cache"]), _bf(inputs["v_cache"])
        k_rot = pad_heads(rotate(k, cos, sin), d)
        for i, slot in enumerate(inputs["slots"].tolist()):
            if slot >= 0:
                kc[slot // BLOCK_SIZE, :, slot % BLOCK_SIZE] = k_rot[i]
                vc[slot // BLOCK_SIZE, :, slot % BLOCK_SIZE] = pad_heads(v[i], d)
        return {"q_out": pad_heads(rotate(q, cos, sin), d), "k_cache": kc, "v_cache": vc}

    return oracle


def cos_sin_table(d: int, positions: int = MAX_POS) -> np.ndarray:
    """f32 [positions, d]: cos of the d / 2 frequencies, then sin (theta 10000)."""
    freqs = 1.0 / (10000.0 ** (np.arange(0, d, 2) / d))
    angles = np.arange(positions)[:, None] * freqs[None, :]
    return np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)


def _case(rng: np.random.Generator, tokens: int, hq: int, hkv: int, d: int, normed: bool,
          num_blocks: int, partial: tuple[int, int, bool] | None = None,
          proj: int | None = None) -> KernelCase:
    """partial = (q_pitch, rotary_dim, norm_offset) selects the general kernel, `proj` (a
    padded head's proj_dim < d) with it."""
    proj = proj or d
    q_pitch, rot, offset = partial or (d, d, False)
    slots = rng.choice(num_blocks * BLOCK_SIZE, tokens, replace=False).astype(np.int32)
    slots[tokens // 2] = -1
    positions = rng.integers(0, MAX_POS, tokens).astype(np.int32)
    positions[0] = 0
    cache_shape = (num_blocks, hkv, BLOCK_SIZE, d)
    inputs = {
        "qkv": random_bf16(rng, (tokens, hq * q_pitch + 2 * hkv * proj), 3.0),
        "k_cache": random_bf16(rng, cache_shape), "v_cache": random_bf16(rng, cache_shape),
        "cos_sin": cos_sin_table(rot), "positions": positions, "slots": slots,
    }
    if normed:
        lo, hi = (-0.3, 0.3) if offset else (0.5, 1.5)
        inputs["q_norm_w"] = f32_to_bf16_bits(rng.uniform(lo, hi, proj).astype(np.float32))
        inputs["k_norm_w"] = f32_to_bf16_bits(rng.uniform(lo, hi, proj).astype(np.float32))

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        extra = ({"q_pitch": q_pitch, "rotary_dim": rot, "norm_offset": offset,
                  "proj_dim": proj} if partial else {})
        rope.qk_norm_rope_kv(KernelCache(backend), stream, p["qkv"], p["q_out"], p["k_cache"],
                             p["v_cache"], p.get("q_norm_w", 0), p.get("k_norm_w", 0),
                             p["cos_sin"], p["positions"], p["slots"], tokens, hq, hkv, d,
                             BLOCK_SIZE, EPS, **extra)

    outputs = {"q_out": OutputSpec(DType.BF16, (tokens, hq, d)),
               "k_cache": OutputSpec(DType.BF16, cache_shape),
               "v_cache": OutputSpec(DType.BF16, cache_shape, tol=(0.0, 0.0))}
    name = f"rope_kv_t{tokens}_q{hq}_kv{hkv}_d{d}{'_norm' if normed else ''}"
    if partial:
        name += f"_pitch{q_pitch}_rot{rot}{'_offset' if offset else ''}"
    if proj != d:
        name += f"_proj{proj}"
    return KernelCase(name, "rope_kv", inputs, outputs, run,
                      _make_oracle(hq, hkv, d, normed, q_pitch, rot, offset, proj))


@kernel_cases("rope_kv")
def rope_kv_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [
        _case(rng, 5, 4, 2, 64, False, 2),
        _case(rng, 7, 4, 2, 128, True, 3),
        _case(rng, 3, 9, 3, 128, False, 1),   # 15 heads: the last block has 3 warps of work
        _case(rng, 2, 32, 8, 128, True, 1),   # Qwen3-8B heads (12 blocks a token), one padded
        _case(rng, 3, 32, 4, 128, True, 1),   # Qwen3-30B-A3B heads: 36 a token, 4 of them kv
        _case(rng, 2, 1, 1, 64, True, 1),     # 3 heads: fewer than one block's warps
        _case(rng, 4, 2, 1, 6, True, 1),      # odd half: 3 rotation pairs
        _case(rng, 2, 2, 2, 256, True, 1),    # largest head dim: 4 pairs per lane
        # the general kernel: Qwen3.5 full attention (gated q heads 2 * D apart, a quarter of
        # the head rotating, (1 + w) norm weights), head dims 256 and 128, and partial
        # rotary without the gate or the norm
        _case(rng, 5, 16, 2, 256, True, 2, (512, 64, True)),
        _case(rng, 3, 4, 1, 128, True, 1, (256, 32, True)),
        _case(rng, 4, 4, 2, 64, False, 1, (64, 16, False)),
        _case(rng, 2, 2, 2, 256, True, 1, (256, 256, True)),   # whole-head rotation, offset
        # padded heads at D 128 (ops.attention.padded_head_dim): Phi-3-mini's 96 rotating
        # whole, with and without the q/k norm (over the 96), with a partial rotation inside
        # the head (the pass-through and the padding after it), 80 with the gated pitch and
        # (1 + w) norms, and 112
        _case(rng, 5, 4, 2, 128, False, 2, (96, 96, False), proj=96),
        _case(rng, 3, 4, 1, 128, True, 1, (96, 96, False), proj=96),
        _case(rng, 4, 2, 2, 128, False, 1, (96, 72, False), proj=96),
        _case(rng, 2, 4, 2, 128, True, 1, (160, 40, True), proj=80),
        _case(rng, 3, 2, 1, 128, False, 1, (112, 112, False), proj=112),
    ]
