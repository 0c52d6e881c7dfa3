"""ATLAS_MAX_SHARED_CARVEOUT: every kernel the cache resolves asks, once, for SMs configured
with the most shared memory; off by default, only the launches that ask for it do."""

from __future__ import annotations

from atlas.runtime.kernel_abi import GEMV_SINGLE, SILU_MUL
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache
from atlas.runtime.ops.routes import KernelRoutes


class CarveoutRecorder(MockGpuBackend):
    """The mock backend, remembering which kernels asked for the most shared memory."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def prefer_shared_memory(self, handle) -> None:
        self.asked.append(handle.func)


def test_switch_parses_and_defaults_off() -> None:
    assert KernelRoutes().max_shared_carveout is False
    assert KernelRoutes.from_env({"ATLAS_MAX_SHARED_CARVEOUT": "1"}).max_shared_carveout


def test_every_kernel_asks_once_with_the_switch() -> None:
    dev = CarveoutRecorder()
    kc = KernelCache(dev, routes=KernelRoutes(max_shared_carveout=True))
    for sig in (GEMV_SINGLE, SILU_MUL, GEMV_SINGLE):
        kc.get(sig)
    kc.get_with_shared(SILU_MUL, 1024, most_shared=True)  # already asked: not again
    assert dev.asked == ["gemv_bf16_single", "silu_mul_bf16"]


def test_without_the_switch_only_the_launches_that_need_it_ask() -> None:
    dev = CarveoutRecorder()
    kc = KernelCache(dev, routes=KernelRoutes())
    kc.get(GEMV_SINGLE)
    kc.get_with_shared(SILU_MUL, 1024, most_shared=True)
    assert dev.asked == ["silu_mul_bf16"]
