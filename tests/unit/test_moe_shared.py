"""The gated shared-expert add (moe_shared.cu): reference vs float64 oracle, the .cu entry
point declares the ABI, and the launch builder's geometry and refusals."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.runtime.cases import moe_shared as moe_shared_cases  # noqa: F401 (registers)
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import CASE_FACTORIES, check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, moe_shared
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

CASES = CASE_FACTORIES["moe_shared:moe_shared_cases"](np.random.default_rng(7))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_entry_point_declares_the_abi() -> None:
    _declares_abi("moe_shared")


def test_geometry_and_refusals() -> None:
    dev = MockGpuBackend()
    kc = KernelCache(dev)
    a = dev.alloc(1 << 20)
    moe_shared.shared_add(kc, dev.default_stream(), a, a, a, a, 300, 2048, 16)
    (rec,) = dev.drain_launches()
    assert (rec.grid, rec.block) == ((300, 1, 1), (256, 1, 1))
    moe_shared.shared_add(kc, dev.default_stream(), a, a, a, a, 0, 2048)
    assert not dev.drain_launches()  # nothing to do, nothing launched
    with pytest.raises(ValueError, match="hidden=12 must be a positive multiple of 8"):
        moe_shared.shared_add(kc, dev.default_stream(), a, a, a, a, 1, 12)
    with pytest.raises(ValueError, match="gate_stride=0"):
        moe_shared.shared_add(kc, dev.default_stream(), a, a, a, a, 1, 16, 0)
    with pytest.raises(ValueError, match="shared pointer .* not 16-byte aligned"):
        moe_shared.shared_add(kc, dev.default_stream(), a, a + 8, a, a, 1, 16)
