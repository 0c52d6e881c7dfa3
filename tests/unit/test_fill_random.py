"""The synthetic-weight fill (fill_random.cu): the hash is SplitMix64, the values are normal
with the asked mean and std, the reference agrees with its float64 oracle, and the .cu entry
point declares the ABI."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32
from atlas.runtime.cases import fill_random as fill_random_cases  # noqa: F401 (registers)
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import CASE_FACTORIES, check
from atlas.runtime.ops import KernelCache, fill_random
from atlas.runtime.reference.fill_random import splitmix64
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

CASES = CASE_FACTORIES["fill_random:fill_random_cases"](np.random.default_rng(0))


def test_counter_hash_is_splitmix64() -> None:
    # SplitMix64 seeded with 0 (Vigna's splitmix64.c): the first output
    assert int(splitmix64(0, 1)[0]) == 0xE220A8397B1DCDAF


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_values_are_normal_with_the_asked_moments() -> None:
    dev = HostBackend()
    n = 200_000
    out = dev.alloc(2 * n)
    fill_random.fill_normal(KernelCache(dev), dev.default_stream(), out, n, 99, 0.5, 0.25)
    x = bf16_bits_to_f32(dev.download(out, np.uint16, (n,))).astype(np.float64)
    z = (x - 0.5) / 0.25
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    assert abs(np.mean(np.abs(z) > 2.0) - 0.0455) < 0.004  # the normal's two-sided tail
    other = dev.alloc(2 * n)
    fill_random.fill_normal(KernelCache(dev), dev.default_stream(), other, n, 100, 0.5, 0.25)
    y = bf16_bits_to_f32(dev.download(other, np.uint16, (n,)))
    assert abs(np.corrcoef(x, y)[0, 1]) < 0.01  # another key is another stream


def test_entry_point_declares_the_abi() -> None:
    _declares_abi("fill_random")
