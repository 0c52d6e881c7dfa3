"""ATLAS_GEMV_NORM_IN (default off): at batch 1 the residual add + RMSNorm before a bf16
projection on the single-row GEMV runs inside that GEMV (gemv.cu gemv_add_rmsnorm_*), the
sum going to the other of two residual buffers: where it runs, what it refuses, and that
dense, hybrid and MoE models decode the same tokens from the same logits either way with
one add_rmsnorm launch fewer per fused projection."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_abi import (ADD_RMSNORM, ADD_RMSNORM_OFFSET, GEMV_ADD_RMSNORM_SINGLE,
                                      GEMV_ADD_RMSNORM_SWIGLU_SINGLE)
from atlas.runtime.ops import KernelCache, matmul
from atlas.runtime.ops.routes import KernelRoutes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROMPT = [3, 17, 42, 99, 5]
DECODE_STEPS = 3
FUSED = {GEMV_ADD_RMSNORM_SINGLE.func, GEMV_ADD_RMSNORM_SWIGLU_SINGLE.func}
NORMS = {ADD_RMSNORM.func, ADD_RMSNORM_OFFSET.func}


def test_the_norm_goes_into_the_gemv_only_where_switched_on_and_it_fits() -> None:
    assert KernelRoutes().gemv_norm_in is False
    assert KernelRoutes.from_env({"ATLAS_GEMV_NORM_IN": "1"}).gemv_norm_in
    on = KernelCache(HostBackend(), replace(KernelRoutes(), gemv_norm_in=True))
    assert matmul.takes_norm_in(on, 1, 6144, 4096)
    assert matmul.takes_norm_in(on, 1, 24576, 4096, swiglu=True)
    assert not matmul.takes_norm_in(on, 2, 6144, 4096)  # batch 1 only
    assert not matmul.takes_norm_in(on, 1, 64, matmul.NORM_IN_MAX_K + 8)
    assert not matmul.takes_norm_in(on, 1, 6145, 4096, swiglu=True)  # an odd [gate | up]
    off = KernelCache(HostBackend(), KernelRoutes())
    assert not matmul.takes_norm_in(off, 1, 6144, 4096)


def test_the_fused_launch_refuses_an_in_place_residual() -> None:
    kc = KernelCache(HostBackend(), replace(KernelRoutes(), gemv_norm_in=True))
    backend = kc.backend
    buf = backend.alloc(4 * 1024)
    norm = matmul.GemvNorm(buf, buf + 1024, buf + 2048, buf, 1e-6)
    with pytest.raises(ValueError, match="residual_out must be another buffer"):
        matmul.gemv_add_rmsnorm(kc, backend.default_stream(), norm, buf + 3072, buf + 3584,
                                4, 256)


def _decode(model: str, monkeypatch: pytest.MonkeyPatch, switch: str
            ) -> tuple[list[np.ndarray], list, list[str]]:
    """Prefill the prompt, decode it greedily at batch 1; each step's logits, the tokens and
    the kernels the decode steps launched."""
    monkeypatch.setenv("ATLAS_GEMV_NORM_IN", switch)
    runner = load_runner(FIXTURES / model, backend="host", max_seq_len=64, max_batch_size=1,
                         use_graphs=False)
    backend = runner.model.kc.backend
    launched: list[str] = []
    launch = backend.launch

    def spy(handle, *args):  # the real launch, its kernel's name recorded
        launched.append(handle.func)
        return launch(handle, *args)

    toks = [runner.execute([SeqChunk(0, PROMPT, 0, [0, 1], GREEDY,
                                     history=PenaltyHistory(PROMPT))])]
    logits = [runner.read_logits(1).copy()]
    monkeypatch.setattr(backend, "launch", spy)
    for n in range(DECODE_STEPS):
        toks.append(runner.execute([SeqChunk(0, [toks[-1][0]], len(PROMPT) + n, [0, 1], GREEDY,
                                             rng_position=n + 1)]))
        logits.append(runner.read_logits(1).copy())
    return logits, toks, launched


@pytest.mark.parametrize("model", ["tiny-qwen3", "tiny-qwen3_5", "tiny-qwen3-moe",
                                   "tiny-qwen3_5_moe"])
def test_models_decode_the_same_with_the_norm_in_the_gemv(
        model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fused_logits, fused_toks, fused = _decode(model, monkeypatch, "1")
    plain_logits, plain_toks, plain = _decode(model, monkeypatch, "0")
    n_fused = sum(f in FUSED for f in fused)
    assert n_fused > 0 and not FUSED & set(plain)
    # one add_rmsnorm launch fewer per fused projection
    assert sum(f in NORMS for f in plain) - sum(f in NORMS for f in fused) == n_fused
    assert fused_toks == plain_toks
    for a, b in zip(fused_logits, plain_logits):
        np.testing.assert_array_equal(a, b)
