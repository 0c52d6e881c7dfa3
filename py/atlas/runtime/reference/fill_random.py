"""Reference for fill_normal_bf16 (kernels/*/common/fill_random.cu).

out[i] = bf16(mean + std * z_i), z_i = sqrt(-2 ln u1) cos(2 pi u2) with u1, u2 the top 48
bits of SplitMix64(key + (i + 1) * golden) (the integer part is exact; the transcendentals
are computed in float64 and rounded to float32, within a few float32 ulps of the GPU's).
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import FILL_NORMAL
from . import HostMemory, reference

GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(key: int, n: int) -> np.ndarray:
    """The 64-bit outputs for counters 0..n-1 of the stream `key` (wrapping uint64 math)."""
    z = np.uint64(key) + (np.arange(n, dtype=np.uint64) + np.uint64(1)) * GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniforms(key: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Box-Muller's u1 in (0, 1) and u2 in [0, 1) (24-bit, exact in float32) per element."""
    h = splitmix64(key, n)
    u1 = ((h >> np.uint64(40)).astype(np.float64) + 0.5) * 2.0 ** -24
    u2 = ((h >> np.uint64(16)) & np.uint64(0xFFFFFF)).astype(np.float64) * 2.0 ** -24
    return u1, u2


def standard_normal(key: int, n: int) -> np.ndarray:
    """z_0..z_{n-1} of stream `key` as float32 (Box-Muller over the hash's 48 top bits)."""
    u1, u2 = uniforms(key, n)
    r = np.sqrt(-2.0 * np.log(u1)).astype(np.float32)
    return r * np.cos(2.0 * np.pi * u2).astype(np.float32)


@reference(FILL_NORMAL)
def fill_normal_bf16(mem: HostMemory, grid: Dim3, block: Dim3, out: int, n: int, key_lo: int,
                     key_hi: int, mean: float, std: float) -> None:
    z = standard_normal((key_hi << 32) | key_lo, n)
    mem.view(out, np.uint16, n)[:] = f32_to_bf16_bits(np.float32(mean) + np.float32(std) * z)
