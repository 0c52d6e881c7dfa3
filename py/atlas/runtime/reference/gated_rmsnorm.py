"""Reference for gated_rmsnorm_bf16 (kernels/*/common/gated_rmsnorm.cu).

Specification (transformers' Qwen3_5RMSNormGated / Qwen3NextRMSNormGated in bf16), per
(token, head) row x of `dim` with its gate z:
    out = bf16(bf16(w * bf16(x * rsqrt(mean(x^2) + eps))) * silu(z))
with the mean and silu(z) = z * sigmoid(z) in f32 (the gate is widened before the SiLU).
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import Dim3
from ..kernel_abi import GATED_RMSNORM
from . import HostMemory, pitched_rows, reference
from .rmsnorm import rms_norm_bf16


def gated_rms_norm(x: np.ndarray, z: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """x, z float32 [..., dim] bf16-valued, w [dim] -> bf16 bits [..., dim]."""
    normed = bf16_bits_to_f32(rms_norm_bf16(x, w, eps))
    z = np.asarray(z, dtype=np.float32)
    silu = (z / (np.float32(1.0) + np.exp(-z))).astype(np.float32)
    return f32_to_bf16_bits(round_bf16(normed) * silu)


@reference(GATED_RMSNORM)
def gated_rmsnorm_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, z: int, z_pitch: int,
                       w: int, out: int, tokens: int, heads: int, dim: int, eps: float) -> None:
    width = heads * dim
    xf = bf16_bits_to_f32(mem.view(x, np.uint16, tokens * width)).reshape(tokens, heads, dim)
    zf = bf16_bits_to_f32(pitched_rows(mem, z, tokens, z_pitch, width)).reshape(tokens, heads,
                                                                                dim)
    wf = bf16_bits_to_f32(mem.view(w, np.uint16, dim))
    mem.view(out, np.uint16, tokens * width)[:] = gated_rms_norm(xf, zf, wf, eps).reshape(-1)
