"""ATLAS_NORM_LATE: the loader's rule where the variable is unset (by the smallest projection
after one of the model's add + norms: ops/norm.norm_late_pays), and the variable forcing it."""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas.model.load import load_runner
from atlas.runtime.ops import norm
from atlas.runtime.ops.norm import NORM_LATE_MIN_NEXT_BYTES, norm_late_pays
from atlas.runtime.ops.routes import KernelRoutes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

#: the smallest projection after an add + norm: tiny-qwen3's gate_up (768 x 128 bf16; its qkv
#: is 1,024 x 128), tiny-qwen3_5_moe's Gated-DeltaNet in_proj (656 x 64; the attention's qkv
#: 768 x 64; its MoE layers' norm is the router's)
SMALLEST = {"tiny-qwen3": 2 * 768 * 128, "tiny-qwen3_5_moe": 2 * 656 * 64}


def test_the_rule_follows_the_projection_bytes() -> None:
    # Qwen3-4B's qkv (6,144 x 2,560 bf16, 30 MiB) pays; Qwen3-30B-A3B's (5,120 x 2,048) not
    assert norm_late_pays(2 * 6144 * 2560)
    assert not norm_late_pays(2 * 5120 * 2048)
    assert norm_late_pays(NORM_LATE_MIN_NEXT_BYTES)
    assert not norm_late_pays(NORM_LATE_MIN_NEXT_BYTES - 1)
    assert KernelRoutes().norm_late is None
    assert KernelRoutes.from_env({"ATLAS_NORM_LATE": "0"}).norm_late is False


def _late(model: str) -> bool | None:
    runner = load_runner(FIXTURES / model, backend="host", max_seq_len=64, max_batch_size=1)
    return runner.model.kc.routes.norm_late


@pytest.mark.parametrize("model", sorted(SMALLEST))
def test_the_loader_takes_the_smallest_projection_after_a_norm(monkeypatch, model) -> None:
    """With the threshold at the smallest projection the rule holds, one byte past it not:
    so the loader measured that projection and no smaller one (a tiny model is far below the
    real threshold)."""
    monkeypatch.delenv("ATLAS_NORM_LATE", raising=False)
    assert _late(model) is False
    monkeypatch.setattr(norm, "NORM_LATE_MIN_NEXT_BYTES", SMALLEST[model])
    assert _late(model) is True
    monkeypatch.setattr(norm, "NORM_LATE_MIN_NEXT_BYTES", SMALLEST[model] + 1)
    assert _late(model) is False


def test_the_variable_forces_it(monkeypatch) -> None:
    monkeypatch.setenv("ATLAS_NORM_LATE", "1")
    assert _late("tiny-qwen3") is True
