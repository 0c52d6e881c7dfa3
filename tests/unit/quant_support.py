"""A mock Hopper device for the quantized GEMVs' launch-builder tests: its loaded PTX set
has the tensor-core quantized GEMV modules, and it records the kernels' dynamic shared-memory
opt-ins."""

from __future__ import annotations

import numpy as np

from atlas.core.quant import Fp8ScaleMap
from atlas.runtime.gpu import DevicePtr
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul_quant_mma
from atlas.runtime.ops.matmul_nvfp4 import Nvfp4Weight
from atlas.runtime.ops.matmul_quant import Fp8Weight, QuantLinear
from atlas.runtime.ops.routes import KernelRoutes

#: a hopper leaf's modules the quantized linears route between
QUANT_MODULES = ("activation", "gemm", "gemv", "gemv_fp8", "gemv_mma_quant", "gemv_nvfp4")


class HopperQuantMock(MockGpuBackend):
    """`modules`: the loaded set (default QUANT_MODULES, without gemv_quant_direct)."""

    def __init__(self, modules: tuple[str, ...] = QUANT_MODULES) -> None:
        super().__init__()
        self.modules = sorted(modules)
        self.opt_ins: list[tuple[str, int]] = []

    @property
    def module_names(self) -> list[str]:
        return self.modules

    def set_max_dynamic_shared(self, handle, nbytes: int) -> None:
        self.opt_ins.append((handle.func, nbytes))


def run_product(kc: KernelCache, w, x: DevicePtr, product: str, m: int) -> None:
    """One m-row product of w on kc: 'linear' (QuantLinear, bf16 y), 'swiglu' (the fused
    gate_up weight ending with its SwiGLU) or 'logits' (f32, a quantized LM head), into a
    fresh output buffer."""
    dev = kc.backend
    if product == "swiglu":
        matmul_quant_mma.gemv_direct_swiglu(kc, 0, x, w, dev.alloc(m * w.n), m)
    elif product == "logits":
        matmul_quant_mma.gemv_logits(kc, 0, x, w, dev.alloc(m * w.n * 4), m)
    else:
        QuantLinear(w).linear(kc, 0, x, dev.alloc(m * w.n * 2), m)


def direct_weight(dev: MockGpuBackend, fmt: str, n: int, k: int, misalign: int = 0):
    """An FP8 (128x128 block scales) or NVFP4 weight [n, k] in dev's memory; `misalign`
    offsets the NVFP4 group scales by that many bytes."""
    if fmt == "fp8":
        smap = Fp8ScaleMap.block(n, k)
        return Fp8Weight(dev.alloc(n * k), dev.alloc(4 * int(np.prod(smap.shape))), n, k, smap)
    return Nvfp4Weight(dev.alloc(n * k // 2), dev.alloc(n * k // 16 + 16) + misalign,
                       dev.alloc(4 * n), n, k)


def routed_funcs(routes: KernelRoutes, product: str,
                 shapes: list[tuple[str, int, int, int]]) -> list[tuple[str, str]]:
    """(format, launched entry point) of each check-case shape ((layout, m, n, k): 'nvfp4'
    or an FP8 layout; SwiGLU shapes give the feature count as n) on a mock Hopper device
    with gemv_quant_direct loaded, under `routes`."""
    funcs = []
    for layout, m, n, k in shapes:
        dev = HopperQuantMock(QUANT_MODULES + ("gemv_quant_direct",))
        fmt = "nvfp4" if layout == "nvfp4" else "fp8"
        w = direct_weight(dev, fmt, 2 * n if product == "swiglu" else n, k)
        run_product(KernelCache(dev, routes), w, dev.alloc(m * k * 2), product, m)
        (rec,) = dev.drain_launches()
        funcs.append((fmt, rec.func))
    return funcs
