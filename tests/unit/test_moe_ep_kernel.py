"""Expert parallelism's id rewrite (moe_ep.cu): reference vs oracle, the .cu entry point
declares the ABI, and the launch builder's geometry and refusals."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.runtime.cases import moe_ep as moe_ep_cases  # noqa: F401 (registers)
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import CASE_FACTORIES, check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, moe_ep
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

CASES = CASE_FACTORIES["moe_ep:moe_ep_cases"](np.random.default_rng(11))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_entry_point_declares_the_abi() -> None:
    _declares_abi("moe_ep")


def test_geometry_and_refusals() -> None:
    dev = MockGpuBackend()
    kc = KernelCache(dev)
    ids = dev.alloc(4096)
    moe_ep.localize_ids(kc, dev.default_stream(), ids, 300, 8, 8, 64, 64)
    (rec,) = dev.drain_launches()
    assert (rec.grid, rec.block) == ((10, 1, 1), (256, 1, 1))
    moe_ep.localize_ids(kc, dev.default_stream(), ids, 1, 5, 3, 0, 4)
    (rec,) = dev.drain_launches()
    assert (rec.grid, rec.block) == ((1, 1, 1), (32, 1, 1))
    moe_ep.localize_ids(kc, dev.default_stream(), ids, 0, 8, 8, 0, 4)
    assert not dev.drain_launches()
    with pytest.raises(ValueError, match="empty"):
        moe_ep.localize_ids(kc, dev.default_stream(), ids, 1, 8, 8, 4, 0)
    with pytest.raises(ValueError, match="width 9 must be in 1..stride 8"):
        moe_ep.localize_ids(kc, dev.default_stream(), ids, 1, 8, 9, 0, 4)
    with pytest.raises(ValueError, match="not 4-byte aligned"):
        moe_ep.localize_ids(kc, dev.default_stream(), ids + 2, 1, 8, 8, 0, 4)
