"""A quantized product that dequantizes into the bf16 scratch launches `pdl_fence` between the
dequantize and the GEMM (ops/matmul_quant.py dequant_for_gemm): the TMA GEMMs request weight
tiles before their PDL wait, so they must start only after the scratch is written."""

from __future__ import annotations

import pytest

from atlas.runtime.ops import KernelCache, matmul_quant
from tests.unit.quant_support import QUANT_MODULES, HopperQuantMock, direct_weight


@pytest.mark.parametrize("fmt, dequant", [("fp8", "dequant_fp8_bf16"),
                                          ("nvfp4", "dequant_nvfp4_bf16")])
@pytest.mark.parametrize("m", [2048, 300])
def test_the_gemm_on_a_dequantized_weight_follows_the_fence(fmt, dequant, m) -> None:
    dev = HopperQuantMock(QUANT_MODULES + ("gemm_sm90", "gemm_sm90_tma", "gemm_decode_sm90",
                                           "gemm_decode_tma"))
    kc = KernelCache(dev)
    n, k = 1024, 4096
    w = direct_weight(dev, fmt, n, k)
    scratch = dev.alloc(n * k * 2)
    matmul_quant.linear_quant(kc, 0, dev.alloc(m * k * 2), w, dev.alloc(m * n * 2), m, scratch)
    records = dev.drain_launches()
    assert [r.func for r in records[:2]] == [dequant, "pdl_fence"]
    assert records[2].func.startswith("gemm_") and len(records) == 3
    assert (records[1].grid[0], records[1].block[0]) == (1, 32)  # one warp
