"""Check cases for batch 1's o_proj GEMV with the sigmoid output gate of gated full attention
on its x load (gemv_attn_gate_bf16_single): each runs its unfused twin (sigmoid_gate_mul into
a scratch row, then the plain GEMV) and requires the same bits on every backend. Selected
by `check_kernels.py -k "gemv attn_gate"`."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, gating, matmul
from .gemv import UNFUSED, random_bf16


def gated_oracle(attn: np.ndarray, qkv: np.ndarray, heads: int, head_dim: int) -> np.ndarray:
    """float64 [1, heads * head_dim] bf16(attn * bf16(sigmoid(gate))), the gate of head h at
    qkv[h * 2 D + D ..] (sigmoid in float64 through tanh)."""
    gate = bf16_bits_to_f32(qkv).astype(np.float64).reshape(heads, 2 * head_dim)[:, head_dim:]
    sig = round_bf16((0.5 + 0.5 * np.tanh(0.5 * gate)).astype(np.float32)).astype(np.float64)
    x = bf16_bits_to_f32(attn).astype(np.float64).reshape(heads, head_dim)
    return round_bf16((x * sig).astype(np.float32)).astype(np.float64).reshape(1, -1)


def gemv_attn_gate_case(rng: np.random.Generator, n: int, heads: int,
                        head_dim: int) -> KernelCase:
    """y = (attn * sigmoid(gate)) @ w.T for a qkv row whose q heads each carry their gate
    (q_pitch = 2 head_dim, the hybrid families' layout); twin into `y_unfused`."""
    k = heads * head_dim
    inputs = {"attn": random_bf16(rng, (1, k), 2.0),
              "qkv": random_bf16(rng, (1, 2 * k), 6.0),  # gates across the sigmoid's range
              "w": random_bf16(rng, (n, k), k ** -0.5),
              "x": np.zeros((1, k), np.uint16)}  # the twin's gated row
    outputs = {"y": OutputSpec(DType.BF16, (1, n)),
               "y" + UNFUSED: OutputSpec(DType.BF16, (1, n))}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        gate = matmul.AttnGate(p["qkv"] + 2 * head_dim, head_dim, 2 * head_dim)
        gating.sigmoid_gate_mul(kc, stream, p["attn"], gate.ptr, p["x"], 1, heads, head_dim,
                                2 * k, 2 * head_dim)
        matmul.gemv_attn_gate(kc, stream, p["attn"], gate, p["w"], p["y"], n, k)
        matmul.gemv(kc, stream, p["x"], p["w"], p["y" + UNFUSED], 1, n, k, single=True)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        y = (gated_oracle(x["attn"], x["qkv"], heads, head_dim)
             @ bf16_bits_to_f32(x["w"]).astype(np.float64).T)
        return {"y": y, "y" + UNFUSED: y}

    return KernelCase(f"gemv attn_gate n{n} h{heads} d{head_dim}", "gemv", inputs, outputs,
                      run, oracle, same_bits=(("y", "y" + UNFUSED),))


#: (n, heads, head_dim): Qwen3.5-35B-A3B / Qwen3-Next's o_proj (16 heads of 256: k = 4,096,
#: 2 chunks a thread), ragged n with three heads of 128 (k = 384: 48 chunks, a partial warp)
#: and with heads of 64 (tiny fixtures' D)
GEMV_ATTN_GATE_SHAPES = [(2048, 16, 256), (515, 3, 128), (130, 4, 64), (33, 2, 64)]


@kernel_cases("gemv")
def gemv_attn_gate_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [gemv_attn_gate_case(rng, *shape) for shape in GEMV_ATTN_GATE_SHAPES]
