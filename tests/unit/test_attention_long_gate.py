"""ATLAS_DECODE_ATTN_LONG_GATE: gated attention's sigmoid output gate applied by the D-256
tensor-core decode attention as it writes its output (attention_long.cu GatedOutput) instead
of a sigmoid_gate_mul launch before o_proj: which entry the routes pick, when the model may
fuse it, and that a hybrid model decodes the same tokens from the same logits either way."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_abi import (ATTN_GATE, DECODE_ATTN_LONG_D256_GATED,
                                      DECODE_ATTN_LONG_D256_GATED_LATE)
from atlas.runtime.ops import KernelCache, attention
from atlas.runtime.ops.attention_long import long_gated_kernel_for
from atlas.runtime.ops.routes import KernelRoutes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROMPT = [3, 17, 42, 99, 5, 61, 8]
DECODE_STEPS = 4


def test_the_routes_pick_the_entry() -> None:
    routes = KernelRoutes()
    assert routes.decode_attn_long_gate is False  # off until measured on the H200
    assert KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LONG_GATE": "1"}).decode_attn_long_gate
    assert long_gated_kernel_for(routes, 1) is DECODE_ATTN_LONG_D256_GATED
    late = replace(routes, decode_attn_long_late_trigger=True)
    assert long_gated_kernel_for(late, 1) is DECODE_ATTN_LONG_D256_GATED_LATE
    assert long_gated_kernel_for(late, 4) is DECODE_ATTN_LONG_D256_GATED


@pytest.mark.parametrize("head_dim, splits, gate_route, merge, expect", [
    (256, 16, True, None, True),     # batch 1's merged splits
    (256, 1, True, False, True),     # one split writes the output
    (256, 16, True, False, False),   # partials for the combine: no gate there
    (256, 16, False, None, False),   # the route is off
    (128, 16, True, None, False),    # no D-128 gated entry
])
def test_the_gate_fuses_only_where_the_kernel_writes_the_output(
        head_dim: int, splits: int, gate_route: bool, merge: bool | None,
        expect: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_long_module(monkeypatch)
    routes = replace(KernelRoutes(), decode_attn_long_gate=gate_route,
                     decode_attn_long_merge=merge, decode_attn_long_min_keys=1)
    kc = KernelCache(HostBackend(), routes)
    hkv = 2
    assert attention.fuses_output_gate(kc, 1, 8 * hkv, hkv, head_dim, 512, splits) is expect


def _with_long_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host backend as a hopper PTX set would be: attention_long loaded."""
    monkeypatch.setattr(HostBackend, "module_names",
                        property(lambda self: ["attention", "attention_long"]))


def _d256_config(tmp_path: Path) -> Path:
    """tiny-qwen3_5 with Qwen3.5's 256-wide attention heads (synthetic weights)."""
    config = json.loads((FIXTURES / "tiny-qwen3_5" / "config.json").read_text())
    text = config.get("text_config", config)
    text["head_dim"] = 256
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def _decode(model_dir: Path, monkeypatch: pytest.MonkeyPatch, gate: str
            ) -> tuple[list[np.ndarray], list, list[str]]:
    """Prefill PROMPT, decode greedily; each step's logits, the tokens and the kernels the
    decode steps launched."""
    monkeypatch.setenv("ATLAS_DECODE_ATTN_LONG_GATE", gate)
    monkeypatch.setenv("ATLAS_DECODE_ATTN_LONG_MIN_KEYS", "1")  # the tensor-core kernel
    _with_long_module(monkeypatch)
    runner = load_runner(model_dir, backend="host", max_seq_len=64, max_batch_size=1,
                         synthetic_seed=3, use_graphs=False, batch_invariant=False)
    backend = runner.model.kc.backend
    launched: list[str] = []
    launch = backend.launch

    def spy(handle, *args):  # the real launch, its kernel's name recorded
        launched.append(handle.func)
        return launch(handle, *args)

    blocks = [0, 1, 2, 3]
    toks = [runner.execute([SeqChunk(0, PROMPT, 0, blocks, GREEDY,
                                     history=PenaltyHistory(PROMPT))])]
    logits = [runner.read_logits(1).copy()]
    monkeypatch.setattr(backend, "launch", spy)
    for n in range(DECODE_STEPS):
        toks.append(runner.execute([SeqChunk(0, [toks[-1][0]], len(PROMPT) + n, blocks, GREEDY,
                                             rng_position=n + 1)]))
        logits.append(runner.read_logits(1).copy())
    return logits, toks, launched


def test_a_hybrid_model_decodes_the_same_with_the_gate_fused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model_dir = _d256_config(tmp_path)
    fused_logits, fused_toks, fused = _decode(model_dir, monkeypatch, "1")
    plain_logits, plain_toks, plain = _decode(model_dir, monkeypatch, "0")
    gated = {DECODE_ATTN_LONG_D256_GATED.func, DECODE_ATTN_LONG_D256_GATED_LATE.func}
    assert gated & set(fused) and ATTN_GATE.func not in fused
    assert not gated & set(plain) and ATTN_GATE.func in plain
    assert fused_toks == plain_toks
    for a, b in zip(fused_logits, plain_logits):
        np.testing.assert_array_equal(a, b)  # the same roundings in the same order
