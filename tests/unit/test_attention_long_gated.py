"""Batch 1 of gated full attention in one launch (decode_attn_long_rope_early[_late]_gated_d256:
Qwen3.5 / Qwen3-Next, each q head followed by its output gate, a quarter of a head rotating,
(1 + w) norm weights; ATLAS_DECODE_ATTN_LONG_GATED, unset: where the qkv projection is bf16):
which steps take it (`gated_fusable`, `gated_pays`), the decode graph of a D-256 hybrid model
on MockGpuBackend with the switch on, off and unset (bf16 and NVFP4 weights), the host
reference against the check cases' float64 oracle, and the same greedy tokens and close
logprobs on HostBackend with the switch on and off."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from atlas.model.load import load_runner
from atlas.runtime.cases.attention_long import LONG_ROPE_GATED_SHAPES, long_rope_case
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache
from atlas.runtime.ops.attention_long import gated_fusable
from atlas.runtime.ops.routes import KernelRoutes
from atlas.runtime.quantize import quantization_config
from atlas.runtime.reference.attention import decode_attn_long_rope_early_gated_bf16

from test_gemv_swiglu import _decode_graph, _decode_logprobs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GATED = "decode_attn_long_rope_early_gated_d256_bf16"
FOUR = ["qk_norm_rope_kv_partial_bf16", "decode_attn_long_d256_bf16",
        "decode_attn_combine_bf16", "sigmoid_gate_mul_bf16"]


class _LongMock(MockGpuBackend):
    """A mock that loaded attention_long, as a Hopper device's kernel set does."""

    @property
    def module_names(self) -> list[str]:
        return ["attention_long"]


def _kc(env: dict[str, str] | None = None, **routes: object) -> KernelCache:
    env = {"ATLAS_DECODE_ATTN_LONG_GATED": "1", **(env or {})}
    return KernelCache(_LongMock(), replace(KernelRoutes.from_env(env), **routes))


def test_one_sequence_of_gated_d256_heads_is_fusable() -> None:
    kc = _kc()
    args = dict(hq=16, hkv=2, head_dim=256, q_pitch=512, rotary_dim=64, max_keys=4096)
    assert gated_fusable(kc, num_seqs=1, **args)
    assert not gated_fusable(kc, num_seqs=2, **args)  # batches keep their launches
    assert not gated_fusable(kc, num_seqs=1, step_keys=4, **args)  # verification rows
    assert not gated_fusable(kc, num_seqs=1, window=128, **args)
    assert not gated_fusable(kc, num_seqs=1, sinks=True, **args)
    assert not gated_fusable(kc, num_seqs=1, **{**args, "q_pitch": 256})  # no gate in the row
    assert not gated_fusable(kc, num_seqs=1, **{**args, "head_dim": 128, "q_pitch": 256})
    assert not gated_fusable(kc, num_seqs=1, **{**args, "rotary_dim": 60})
    assert not gated_fusable(_kc({"ATLAS_DECODE_ATTN_LONG_GATED": "0"}), num_seqs=1, **args)
    assert not gated_fusable(_kc(decode_attn_long_early=False), num_seqs=1, **args)
    assert not gated_fusable(KernelCache(MockGpuBackend(), KernelRoutes.from_env(
        {"ATLAS_DECODE_ATTN_LONG_GATED": "1"})), num_seqs=1, **args)  # not loaded
    # unset: off until the model resolves it (model/load.py, gated_pays)
    assert not gated_fusable(KernelCache(_LongMock()), num_seqs=1, **args)


def _d256_dir(tmp_path: Path, quant: str = "bf16") -> Path:
    """tiny-qwen3_5's config (two linear layers, then one gated full-attention layer, a
    quarter of a head rotating, (1 + w) norms) with Qwen3.5-35B-A3B's group of 8 q heads a kv
    head of D 256: synthetic weights (`quant`: their scheme, as `atlas models quantize`
    writes it, the LM head and the linear-attention projections kept bf16)."""
    cfg = json.loads((FIXTURES / "tiny-qwen3_5" / "config.json").read_text())
    cfg.get("text_config", cfg).update(head_dim=256, num_attention_heads=8,
                                        num_key_value_heads=1)
    if quant != "bf16":
        cfg["quantization_config"] = quantization_config(
            quant, ["lm_head.weight", "model.layers.*.linear_attn.weight"])[0]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def _graph(monkeypatch, tmp_path: Path, env: dict[str, str], quant: str = "bf16") -> list:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(MockGpuBackend, "module_names", property(lambda self: ["attention_long"]))
    runner = load_runner(_d256_dir(tmp_path, quant), backend="mock", max_seq_len=1024,
                         max_batch_size=4, max_prefill_tokens=32, synthetic_seed=0)
    return _decode_graph(runner)


@pytest.mark.parametrize("late, func", [("0", GATED),
                                        ("1", GATED.replace("early_", "early_late_"))])
def test_a_batch_one_step_runs_one_gated_launch_before_o_proj(monkeypatch, tmp_path, late,
                                                              func) -> None:
    graph = _graph(monkeypatch, tmp_path, {"ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER": late,
                                           "ATLAS_DECODE_ATTN_LONG_GATED": "1"})
    names = [r.func for r in graph]
    (at,) = [i for i, n in enumerate(names) if n == func]
    assert names[at - 1] == "gemv_bf16_single" and names[at + 1] == "gemv_bf16_single"
    assert not set(FOUR) & set(names)
    rec = graph[at]
    assert (rec.args["q_pitch"], rec.args["rotary_dim"], rec.args["norm_offset"]) == (512, 64, 1)
    # several splits (1,024-key tables), merged by the last through the counters
    assert rec.grid[0] > 1 and rec.grid[1:] == (1, 1) and rec.args["counters"]
    assert rec.args["num_seqs"] == 1 and rec.args["num_splits"] == rec.grid[0]
    # o_proj reads what the launch wrote: the gated output
    assert graph[at + 1].args["x"] == rec.args["out"]


@pytest.mark.parametrize("quant, env, gated", [("bf16", {}, True), ("nvfp4", {}, False),
                                               ("bf16", {"ATLAS_DECODE_ATTN_LONG_GATED": "0"},
                                                False)])
def test_unset_the_qkv_projection_s_weights_pick_the_launches(monkeypatch, tmp_path, quant,
                                                              env, gated) -> None:
    """gated_pays: bf16 qkv weights take the one launch, NVFP4 ones the four; =0 forces four."""
    monkeypatch.delenv("ATLAS_DECODE_ATTN_LONG_GATED", raising=False)
    names = [r.func for r in _graph(monkeypatch, tmp_path, env, quant)]
    late = GATED.replace("early_", "early_late_")
    assert (GATED in names or late in names) == gated
    if not gated:
        at = names.index(FOUR[0])
        assert names[at:at + 4] == FOUR
    else:
        assert not set(FOUR) & set(names)


@pytest.mark.parametrize("shape", LONG_ROPE_GATED_SHAPES, ids=lambda s: s[0])
def test_the_reference_matches_the_cases_float64_oracle(shape) -> None:
    """The host reference (the four launches' references composed) against the device
    check's independent float64 oracle of each gated case."""
    name, g, lens, splits, kw = shape
    result = check(HostBackend(), long_rope_case(np.random.default_rng(3), name, g, lens,
                                                 splits, **kw))
    assert result.passed, result.detail


def test_the_reference_refuses_what_the_kernel_traps_on() -> None:
    args = [0] * 14 + [1, 16, 2, 256, 16, 4, 1, 0.0625, 1e-6, 0, 192, 0, 512, 64, 1]
    with pytest.raises(ValueError, match="needs neither"):
        decode_attn_long_rope_early_gated_bf16(HostBackend(), (1, 2, 1), (128, 1, 1), *args)


def test_the_gated_launch_keeps_the_greedy_tokens(monkeypatch, tmp_path) -> None:
    """HostBackend (the references) with attention_long loaded, synthetic weights: the
    switch on and off give the same greedy tokens and logprobs within the split rules'
    summation order (the early entries merge whole 64-key tiles)."""
    monkeypatch.setattr(HostBackend, "module_names", property(lambda self: ["attention_long"]))
    d = _d256_dir(tmp_path)
    runs = {}
    for switch in ("1", "0"):
        monkeypatch.setenv("ATLAS_DECODE_ATTN_LONG_GATED", switch)
        runs[switch] = _decode_logprobs(load_runner(
            d, backend="host", max_seq_len=256, max_batch_size=4, max_prefill_tokens=32,
            synthetic_seed=0))
    assert [r.token for r in runs["1"]] == [r.token for r in runs["0"]]
    for on, off in zip(runs["1"][1:], runs["0"][1:]):
        assert on.logprob == pytest.approx(off.logprob, abs=2e-2)


def test_the_traced_twin_is_the_late_entrys() -> None:
    """`trace` launches the late gated entry's phase-traced twin with the buffer last
    (tools/gpu/trace_decode_attn.py --long --gated); without the late trigger it refuses."""
    from atlas.runtime.ops.attention_long import decode_attention_long_rope_gated
    dev = _LongMock()
    args = [dev.alloc(1 << 16) for _ in range(14)]  # qkv .. out
    geometry = (16, 2, 256, 16, 64, 34, 0.0625, 1e-6, 512, 64, True)
    routes = replace(KernelRoutes(), decode_attn_long_late_trigger=True)
    decode_attention_long_rope_gated(KernelCache(dev, routes), 0, *args, *geometry,
                                     trace=dev.alloc(4096))
    (rec,) = dev.drain_launches()
    assert rec.func == "decode_attn_long_rope_early_late_gated_trace_d256_bf16"
    assert rec.args["trace"] and rec.args["q_pitch"] == 512
    with pytest.raises(ValueError, match="late entry"):
        decode_attention_long_rope_gated(KernelCache(dev), 0, *args, *geometry,
                                         trace=dev.alloc(4096))
