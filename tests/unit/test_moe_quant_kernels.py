"""The quantized-expert decode kernels' references (reference/moe_quant.py) against the
check cases' independent float64 oracle (cases/moe_quant.py), on the host backend; the
full-width cases run on the GPU check only (tools/gpu/check_kernels.py)."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.runtime.cases.moe_quant import moe_decode_quant_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check

ALL = moe_decode_quant_cases(np.random.default_rng(12))
CASES = [c for c in ALL if " h2048 " not in c.name]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_the_float64_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_cases_cover_both_formats_every_fp8_map_and_invalid_ids() -> None:
    names = " | ".join(c.name for c in ALL)
    for part in ("fp8 block", "fp8 channel", "fp8 tensor", "nvfp4 t8", "h2048 i768",
                 "+shared k8 h2048 i512", "nvfp4 t6 e16+shared", "moe_dequant_nvfp4 n384 k48"):
        assert part in names
