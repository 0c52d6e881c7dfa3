"""Check cases for gated_rmsnorm_bf16 (Gated-DeltaNet's output norm) and the sigmoid output
gate of gated attention (attn_gate.cu), against float64 oracles with the bf16 roundings of
transformers' ops modelled explicitly."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, gating
from .gemv import random_bf16

EPS = 1e-6


def _rb(x: np.ndarray) -> np.ndarray:
    return round_bf16(np.asarray(x, dtype=np.float32)).astype(np.float64)


def naive_gated_norm(x: np.ndarray, z: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """float64 x, z [..., dim] bf16-valued, w [dim]: bf16(w * bf16(RMSNorm(x))) * silu(z)
    (the final bf16 rounding is the comparison's)."""
    normed = _rb(x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))
    return _rb(w * normed) * z / (1.0 + np.exp(-z))


def _norm_case(rng: np.random.Generator, tokens: int, heads: int, dim: int) -> KernelCase:
    z_pitch = heads * dim + 40
    inputs = {"x": random_bf16(rng, (tokens, heads * dim), 0.2),
              "z": random_bf16(rng, (tokens, z_pitch), 2.0),
              "w": f32_to_bf16_bits(rng.uniform(0.5, 1.5, dim).astype(np.float32))}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        gating.gated_rmsnorm(KernelCache(backend), stream, p["x"], p["z"], z_pitch, p["w"],
                             p["out"], tokens, heads, dim, EPS)

    def oracle(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = bf16_bits_to_f32(inp["x"]).astype(np.float64).reshape(tokens, heads, dim)
        z = bf16_bits_to_f32(inp["z"]).astype(np.float64)[:, :heads * dim].reshape(
            tokens, heads, dim)
        w = bf16_bits_to_f32(inp["w"]).astype(np.float64)
        return {"out": naive_gated_norm(x, z, w, EPS)}

    return KernelCase(f"gated_rmsnorm_t{tokens}_h{heads}_d{dim}", "gated_rmsnorm", inputs,
                      {"out": OutputSpec(DType.BF16, (tokens, heads * dim))}, run, oracle)


def _gate_case(rng: np.random.Generator, tokens: int, heads: int, dim: int) -> KernelCase:
    head_pitch = 2 * dim                       # Qwen3.5: [q_h | gate_h] per head
    gate_pitch = heads * head_pitch + 3 * dim  # the row also holds k and v
    inputs = {"x": random_bf16(rng, (tokens, heads * dim), 1.0),
              "gate": random_bf16(rng, (tokens, gate_pitch), 3.0)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        gating.sigmoid_gate_mul(KernelCache(backend), stream, p["x"], p["gate"] + 2 * dim,
                                p["x"], tokens, heads, dim, gate_pitch, head_pitch)

    def oracle(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = bf16_bits_to_f32(inp["x"]).astype(np.float64).reshape(tokens, heads, dim)
        g = bf16_bits_to_f32(inp["gate"]).astype(np.float64)[:, :heads * head_pitch]
        g = g.reshape(tokens, heads, head_pitch)[:, :, dim:]
        return {"x": _rb(x * _rb(1.0 / (1.0 + np.exp(-g)))).reshape(tokens, -1)}

    # in place (out aliases x), as the model runs it
    return KernelCase(f"attn_gate_t{tokens}_h{heads}_d{dim}", "attn_gate", inputs,
                      {"x": OutputSpec(DType.BF16, (tokens, heads * dim))}, run, oracle)


@kernel_cases("gated_rmsnorm")
def gated_rmsnorm_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [_norm_case(rng, 3, 8, 32), _norm_case(rng, 5, 32, 128), _norm_case(rng, 1, 3, 256),
            _norm_case(rng, 300, 32, 128)]


@kernel_cases("attn_gate")
def attn_gate_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [_gate_case(rng, 3, 2, 128), _gate_case(rng, 5, 16, 256), _gate_case(rng, 1, 3, 64)]
