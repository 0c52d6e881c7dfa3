"""A batched Gemma 3 decode step's dense MLP on the decode GEMM ends gate_up with the tanh-GELU
GLU (gemm_decode_{tma,sm90}_geglu_*, under the SwiGLU epilogue's switch
ATLAS_DECODE_GEMM_SWIGLU): the launches a 12-row step makes (no gelu_tanh_mul; the switch
restores it), on both decode GEMM kernels, and the logits it produces on the CPU reference
backend, which must equal the unfused path's to the bit, on the tiny Gemma 3 fixture (real
safetensors: two sliding layers and a full one, I = 256)."""

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul
from atlas.runtime.ops.decode_gemm_tune import TuneKey
from atlas.runtime.ops.matmul_decode import Glu, entry_point
from atlas.runtime.ops.routes import KernelRoutes
from test_decode_swiglu import report_modules

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-gemma3"
ROWS = 12  # past the GEMV's 8 rows: the decode GEMM's route
LAYERS = 3
#: an sm_90a PTX set's modules: the decode GEMM route, on its TMA kernel by default, and the
#: long decode attention kernel the sliding layers need
HOPPER_MODULES = ["attention", "attention_long", "gemm", "gemm_sm90", "gemv", "gemv_mma",
                  "gemm_decode_sm90", "gemm_decode_tma"]


@pytest.fixture
def hopper(monkeypatch):
    """The decode GEMM route (and its gated entries) taken as on an H200."""
    return report_modules(monkeypatch, HOPPER_MODULES)


def _chunks() -> list[SeqChunk]:
    """ROWS new sequences of one token each (a decode-shaped step: one row per sequence)."""
    return [SeqChunk(i, [3 + 5 * i], 0, [i], GREEDY, history=PenaltyHistory([]))
            for i in range(ROWS)]


def _runner(monkeypatch, backend: str, env: dict[str, str], **kw):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_runner(FIXTURE, backend=backend, max_seq_len=64, max_batch_size=16,
                       max_prefill_tokens=32, **kw)


def _launches(monkeypatch, env: dict[str, str]) -> list[str]:
    runner = _runner(monkeypatch, "mock", env)
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute(_chunks())
    return [r.func for g in dev.graph_launches for r in g.graph] + [
        r.func for r in dev.drain_launches()]


@pytest.mark.parametrize("tma, kernel", [("1", "gemm_decode_tma"), ("0", "gemm_decode_sm90")])
def test_gate_up_ends_with_the_geglu(hopper, tma, kernel) -> None:
    names = _launches(hopper, {"ATLAS_DECODE_GEMM_TMA": tma})
    fused = [i for i, n in enumerate(names) if n.startswith(f"{kernel}_geglu_bf16")]
    assert len(fused) == LAYERS
    assert not any(n.startswith(("gelu_tanh_mul", "silu_mul")) or "swiglu" in n for n in names)
    for i in fused:  # the down projection follows on the decode GEMM, reading the activation
        assert names[i + 1].startswith(f"{kernel}_bf16")


def test_switch_restores_gelu_tanh_mul(hopper) -> None:
    names = _launches(hopper, {"ATLAS_DECODE_GEMM_SWIGLU": "0"})
    assert names.count("gelu_tanh_mul_bf16") == LAYERS
    assert not any("geglu" in n for n in names)


def test_the_geglu_route_is_the_swiglu_one(hopper) -> None:
    """`gelu` fuses wherever the SwiGLU does on the decode GEMM (9..256 rows, n even, the
    switch on: Gemma 3 4B's gate_up here); 2..8 rows end with neither."""
    dev = MockGpuBackend()
    kc = KernelCache(dev, routes=KernelRoutes())
    off = KernelCache(dev, routes=KernelRoutes.from_env({"ATLAS_DECODE_GEMM_SWIGLU": "0"}))
    for m in (9, 64, 256):
        assert matmul.fuses_gate_up_swiglu(kc, m, 2 * 10240, 2560, gelu=True)
        assert not matmul.fuses_gate_up_swiglu(off, m, 2 * 10240, 2560, gelu=True)
        assert not matmul.fuses_gate_up_swiglu(kc, m, 2 * 10240 + 1, 2560, gelu=True)
    for m in (2, 8):
        assert not matmul.fuses_gate_up_swiglu(kc, m, 2 * 10240, 2560, gelu=True)
        assert not matmul.fuses_gate_up_swiglu(kc, m, 2 * 10240, 2560)


def _logits(monkeypatch, swiglu: str) -> tuple[np.ndarray, list, list[str]]:
    """The step's logits and tokens on the host backend, and the kernels it launched."""
    runner = _runner(monkeypatch, "host", {"ATLAS_DECODE_GEMM_SWIGLU": swiglu},
                     use_graphs=False)  # each launch eager: the spy below sees it
    backend, launched = runner.model.kc.backend, []
    launch = backend.launch

    def spy(handle, *args):  # the real launch, its kernel's name recorded
        launched.append(handle.func)
        return launch(handle, *args)

    monkeypatch.setattr(backend, "launch", spy)
    tokens = runner.execute(_chunks())
    return runner.read_logits(ROWS).copy(), tokens, launched


def test_fused_and_unfused_steps_agree_bit_for_bit(hopper) -> None:
    fused, fused_tokens, fused_names = _logits(hopper, "1")
    unfused, unfused_tokens, unfused_names = _logits(hopper, "0")
    assert sum(n.startswith("gemm_decode_tma_geglu_bf16") for n in fused_names) == LAYERS
    assert "gelu_tanh_mul_bf16" not in fused_names
    assert unfused_names.count("gelu_tanh_mul_bf16") == LAYERS
    assert fused.shape[0] == ROWS and np.isfinite(fused).all()
    assert fused.tobytes() == unfused.tobytes() and fused_tokens == unfused_tokens
    # the rows are distinct sequences: a wiring slip (rows or halves crossed) would not hide
    assert len({row.tobytes() for row in fused}) == ROWS


def test_entries_and_tune_keys_by_activation() -> None:
    """Each SwiGLU entry has its GeGLU twin (the same parameters), a caller's `swiglu` flag
    still means the SwiGLU entry, and the tuner keeps GeGLU picks apart from SwiGLU ones
    (whose keys keep their text)."""
    for split, tma, persistent in ((1, False, False), (8, False, False), (3, True, False),
                                   (2, True, True)):
        swiglu = entry_point(split, False, Glu.SWIGLU, tma, persistent)
        geglu = entry_point(split, False, Glu.GEGLU, tma, persistent)
        assert geglu.func == swiglu.func.replace("_swiglu_", "_geglu_")
        assert geglu.params == swiglu.params and geglu.module == swiglu.module
        assert entry_point(split, False, True, tma, persistent) == swiglu
    keys = [TuneKey(64, 20480, 2560, False, glu, True) for glu in Glu]
    assert keys[Glu.SWIGLU].text() == "cols=64 n=20480 k=2560 f32=0 swiglu=1 tma=1"
    assert len({key.text() for key in keys}) == len(Glu)
