"""ATLAS_MAX_SHARED_CARVEOUT: every kernel the cache resolves asks, once, for SMs configured
with the most shared memory; unset, the loader turns it on for models whose every layer is
full attention and off for hybrids (measured: routes.py), and the variable forces either."""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas.model.load import load_runner
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


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_switch_parses_and_defaults_to_the_models_rule() -> None:
    assert KernelRoutes().max_shared_carveout is None
    assert KernelRoutes.from_env({"ATLAS_MAX_SHARED_CARVEOUT": "1"}).max_shared_carveout
    assert KernelRoutes.from_env({"ATLAS_MAX_SHARED_CARVEOUT": "0"}).max_shared_carveout is False
    with pytest.raises(ValueError, match="ATLAS_MAX_SHARED_CARVEOUT"):
        KernelRoutes.from_env({"ATLAS_MAX_SHARED_CARVEOUT": "yes"})


@pytest.mark.parametrize("model, env, expect", [
    ("tiny-qwen3", None, True), ("tiny-qwen3-moe", None, True),
    ("tiny-qwen3_5", None, False), ("tiny-qwen3_5", "1", True), ("tiny-qwen3", "0", False)])
def test_the_loader_applies_the_models_rule(monkeypatch, model, env, expect) -> None:
    """Full-attention models (dense or MoE) get the most-shared carveout, hybrids do not,
    and the variable overrides the rule both ways."""
    if env is None:
        monkeypatch.delenv("ATLAS_MAX_SHARED_CARVEOUT", raising=False)
    else:
        monkeypatch.setenv("ATLAS_MAX_SHARED_CARVEOUT", env)
    runner = load_runner(FIXTURES / model, backend="host", max_seq_len=64, max_batch_size=1)
    assert runner.model.kc.routes.max_shared_carveout is expect


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
