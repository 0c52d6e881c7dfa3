"""The residual add + RMSNorm that lets the next kernel launch before its own PDL wait
(rmsnorm.cu add_rmsnorm_entry<.., kEarly>, ATLAS_NORM_EARLY_TRIGGER): the switch, the entry
point each route launches, and the early entries' check cases against float64 on the host
backend (the same values as the plain entries: only the trigger moves)."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.runtime.cases.rmsnorm import rmsnorm_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, norm
from atlas.runtime.ops.routes import KernelRoutes


def test_the_switch_parses_as_a_tristate() -> None:
    assert KernelRoutes.from_env({}).norm_early_trigger is None
    assert KernelRoutes.from_env({"ATLAS_NORM_EARLY_TRIGGER": "1"}).norm_early_trigger is True
    assert KernelRoutes.from_env({"ATLAS_NORM_EARLY_TRIGGER": "0"}).norm_early_trigger is False
    with pytest.raises(ValueError, match="ATLAS_NORM_EARLY_TRIGGER"):
        KernelRoutes.from_env({"ATLAS_NORM_EARLY_TRIGGER": "yes"})


@pytest.mark.parametrize("early, offset, func", [
    (True, False, "add_rmsnorm_early_bf16"), (True, True, "add_rmsnorm_offset_early_bf16"),
    (False, False, "add_rmsnorm_bf16"), (False, True, "add_rmsnorm_offset_bf16")])
def test_each_route_launches_its_entry_with_the_same_arguments(early: bool, offset: bool,
                                                               func: str) -> None:
    dev = MockGpuBackend()
    kc = KernelCache(dev, KernelRoutes(norm_early_trigger=early))
    ptrs = [dev.alloc(2 * 4 * 4096) for _ in range(3)] + [dev.alloc(2 * 4096)]
    norm.add_rmsnorm(kc, 0, *ptrs[:2], ptrs[3], ptrs[2], 4, 4096, 1e-6, offset)
    (rec,) = dev.drain_launches()
    assert (rec.module, rec.func) == ("rmsnorm", func)
    assert rec.grid[0] == 4 and rec.args["rows"] == 4 and rec.args["dim"] == 4096


@pytest.mark.parametrize("rows", [1, 2, 8, 64, 2048])
def test_unset_batched_rows_trigger_early_and_one_row_after_the_wait(rows: int) -> None:
    """The launch builder's rule: from NORM_EARLY_MIN_ROWS (2) rows on, the early entry."""
    assert norm.NORM_EARLY_MIN_ROWS == 2
    dev = MockGpuBackend()
    p = dev.alloc(2 * 2048 * rows)
    norm.add_rmsnorm(KernelCache(dev, KernelRoutes()), 0, p, p, p, p, rows, 2048, 1e-6, True)
    (rec,) = dev.drain_launches()
    assert rec.func == ("add_rmsnorm_offset_early_bf16" if rows >= 2
                        else "add_rmsnorm_offset_bf16")


def test_the_early_check_cases_match_float64() -> None:
    cases = [c for c in rmsnorm_cases(np.random.default_rng(5)) if "early" in c.name]
    assert len(cases) == 3 and all(c.name.startswith("add_rmsnorm") for c in cases)
    for c in cases:
        result = check(HostBackend(), c)
        assert result.passed, (c.name, result.detail)
