"""A mock Hopper device for the quantized GEMVs' launch-builder tests: its loaded PTX set
has the tensor-core quantized GEMV modules, and it records the kernels' dynamic shared-memory
opt-ins."""

from __future__ import annotations

from atlas.runtime.gpu import DevicePtr
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul_quant_mma
from atlas.runtime.ops.matmul_quant import QuantLinear

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
