"""atlas.bench.kernel_shapes (the kernel table's shapes and bytes/FLOP model, checked by hand)
and tools/gpu/bench_kernels.py's whole flow as a CPU dry run (HostBackend + CPU torch)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import sys
import types
from pathlib import Path

import pytest

from atlas.bench import kernel_shapes as ks
from atlas.core.cold_reads import rotation_copies
from atlas.bench.kernel_shapes import (QWEN3_0_6B, QWEN3_8B, SMOLLM2_135M, Ceilings,
                                       DecodeAttention, Embedding, Family, Linear, Norm,
                                       PrefillAttention, RopeKv, Sampling, SiluMul)

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu" / "bench_kernels.py"


# ---- the bytes/FLOP model against hand counts -------------------------------------------

def test_norm_bytes_read_and_write_every_row_once_plus_the_weight() -> None:
    # x read + out written (2 * 32 * 4096 bf16) + the weight (4096 bf16)
    assert Norm(label="", rows=32, dim=4096).bytes_moved() == 2 * (2 * 32 * 4096 + 4096)
    # residual and delta read, residual and out written
    assert Norm(label="", rows=32, dim=4096, residual=True).bytes_moved() == 1_056_768
    assert Norm(label="", rows=1, dim=8).flops() == 0


def test_silu_mul_and_embedding_bytes() -> None:
    assert SiluMul(label="", rows=1, inter=12288).bytes_moved() == 73_728  # 2 in + 1 out
    # 32 i32 ids + 32 gathered rows read + 32 rows written; the rest of the table is untouched
    assert Embedding(label="", tokens=32, dim=4096, vocab=151936).bytes_moved() == 524_416


def test_linear_bytes_and_flops() -> None:
    qkv = Linear(label="", m=1, n=6144, k=4096)
    assert qkv.bytes_moved() == 50_352_128   # weights 50,331,648 + x 8,192 + y 12,288
    assert qkv.flops() == 50_331_648
    head = Linear(label="", m=1, n=151936, k=4096, out_f32=True)
    assert head.bytes_moved() == 2 * (151936 * 4096 + 4096) + 4 * 151936
    assert head.family is Family.DECODE_GEMV
    assert Linear(label="", m=2048, n=16, k=16, prefill=True).family is Family.PREFILL_GEMM


def test_rope_kv_bytes_count_qkv_both_ways_cos_sin_indices_and_norm_weights() -> None:
    # 48 heads x 128 read (12,288 B) and written as q out + k/v cache (12,288 B), one f32
    # cos/sin row (512 B), position + slot (8 B), q and k norm weights (512 B)
    qwen = RopeKv(label="", tokens=1, heads=32, kv_heads=8, head_dim=128)
    assert qwen.bytes_moved() == 25_608
    assert qwen.family is Family.QK_NORM_ROPE_KV
    llama = RopeKv(label="", tokens=1, heads=32, kv_heads=8, head_dim=128, qk_norm=False)
    assert llama.bytes_moved() == 25_096
    assert llama.family is Family.KV_APPEND


def test_prefill_attention_counts_only_the_causal_pairs() -> None:
    s = PrefillAttention(label="", seq=4, heads=2, kv_heads=1, head_dim=8)
    # 10 causal (query, key) pairs per head, each an 8-wide QK dot and an 8-wide PV update
    # (2 FLOPs per multiply-add): 10 * 2 heads * 32
    assert s.flops() == 640
    assert s.bytes_moved() == 2 * (2 * 4 * 2 * 8 + 2 * 4 * 1 * 8)


def test_decode_attention_reads_each_cached_token_once_per_kv_head() -> None:
    s = DecodeAttention(label="", batch=2, history=3, heads=4, kv_heads=2, head_dim=8)
    assert s.bytes_moved() == 2 * (2 * 2 * 3 * 2 * 8 + 2 * 2 * 4 * 8)
    assert s.flops() == 4 * 2 * 4 * 3 * 8


def test_sampling_reads_the_logits_once() -> None:
    assert Sampling(label="", rows=2, vocab=10, temperature=0.7).bytes_moved() == 88
    assert Sampling(label="", rows=2, vocab=10, temperature=0.0).family is Family.GREEDY
    assert Sampling(label="", rows=2, vocab=10, temperature=0.7).family is Family.SAMPLING


def test_moe_router_reads_the_logits_and_writes_k_ids_and_weights() -> None:
    r = ks.MoeRouter(label="", tokens=512, dims=ks.QWEN3_30B_A3B)
    assert r.bytes_moved() == 4 * 512 * 128 + 8 * 512 * 8 and r.family is Family.MOE_ROUTER
    assert r.flops() == 0
    # a decode batch: the one-launch router also reads the gate weight and x
    d = ks.MoeRouter(label="", tokens=3, dims=ks.QWEN3_30B_A3B)
    assert d.bytes_moved() == 4 * 3 * 128 + 8 * 3 * 8 + 2 * 128 * 2048 + 2 * 3 * 2048
    assert d.flops() == 2 * 3 * 128 * 2048
    sig = ks.MoeRouter(label="", tokens=1, dims=ks.MINIMAX_M2_ROUTER)
    assert sig.bytes_moved() == 4 * 256 + 8 * 8 + 4 * 256 + 2 * 256 * 3072 + 2 * 3072


def test_moe_experts_move_the_hit_experts_weights_once() -> None:
    d = ks.QWEN3_30B_A3B
    b1 = ks.MoeExperts(label="", tokens=1, dims=d)
    expert = 2 * 3 * 768 * 2048  # gate, up and down of one expert, bf16
    assert b1.experts_hit == 8 and b1.family is Family.MOE_DECODE
    assert b1.bytes_moved() == 8 * expert + 2 * 2 * 2048 + 8 * 8
    assert b1.flops() == 2 * 8 * 3 * 768 * 2048
    b64 = ks.MoeExperts(label="", tokens=64, dims=d)
    assert b64.experts_hit == 128 and b64.family is Family.MOE_GROUPED
    assert ks.MoeExperts(label="", tokens=8, dims=d).family is Family.MOE_DECODE


def test_model_dims() -> None:
    assert QWEN3_8B.qkv_out == 6144 and QWEN3_8B.attn_out == 4096
    assert QWEN3_0_6B.qkv_out == 4096 and QWEN3_0_6B.attn_out == 2048
    # docs/kernels.md's SmolLM2 GEMV shapes: qkv 960 x 576, o_proj 576 x 576
    assert SMOLLM2_135M.qkv_out == 960 and SMOLLM2_135M.attn_out == 576


# ---- roofline and summary -----------------------------------------------------------------

def test_memory_bound_rate_at_the_floor_is_the_ceiling() -> None:
    ceilings = Ceilings(copy_bytes_per_s=1e12, bf16_flops_per_s=1e15)
    qkv = Linear(label="", m=1, n=6144, k=4096)
    at_floor = ks.achieved(qkv, 50.352128, ceilings)
    assert at_floor.unit == "GB/s"
    assert at_floor.rate == pytest.approx(1000.0)
    assert at_floor.fraction == pytest.approx(1.0)
    assert at_floor.floor_us == pytest.approx(50.352128)
    assert ks.achieved(qkv, 2 * 50.352128, ceilings).fraction == pytest.approx(0.5)


def test_compute_bound_rate_is_in_tflops() -> None:
    ceilings = Ceilings(copy_bytes_per_s=4e12, bf16_flops_per_s=1e15)
    gemm = Linear(label="", m=2048, n=4096, k=4096, prefill=True)
    assert ks.compute_bound(gemm, ceilings)
    floor = gemm.flops() / 1e15 * 1e6
    got = ks.achieved(gemm, 2 * floor, ceilings)
    assert (got.unit, got.fraction) == ("TFLOP/s", pytest.approx(0.5))
    assert got.rate == pytest.approx(500.0)
    with pytest.raises(ValueError):
        ks.achieved(gemm, 0.0, ceilings)


def test_rotation_copies_pass_the_cache_within_the_cap() -> None:
    assert rotation_copies(50_352_128, 256 << 20, 64) == 6   # 5.33 sets -> 6
    assert rotation_copies(1 << 30, 256 << 20, 64) == 1
    assert rotation_copies(8 << 10, 256 << 20, 64) == 64
    with pytest.raises(ValueError):
        rotation_copies(0, 256 << 20, 64)


def test_speedup_summary() -> None:
    got = ks.speedup_summary([2.0, 0.5, 1.0])
    assert got["speedup_min"] == 0.5
    assert got["speedup_geomean"] == pytest.approx(1.0)
    assert ks.speedup_summary([4.0, 1.0])["speedup_geomean"] == pytest.approx(2.0)
    for bad in ([], [1.0, 0.0], [math.nan]):
        with pytest.raises(ValueError):
            ks.speedup_summary(bad)


# ---- the table ----------------------------------------------------------------------------

def test_every_issue_family_has_full_and_quick_shapes() -> None:
    shapes = ks.table_shapes()
    for issue_name, families in ks.ISSUE_FAMILIES.items():
        for family in families:
            assert any(s.family is family for s in shapes), (issue_name, family)
            assert any(s.family is family and s.quick for s in shapes), (issue_name, family)
    assert {f for fams in ks.ISSUE_FAMILIES.values() for f in fams} == set(Family)


def test_table_sweeps_the_issue_sizes() -> None:
    shapes = ks.table_shapes()
    seqs = {s.seq for s in shapes if s.family is Family.PREFILL_ATTENTION}
    hists = {s.history for s in shapes if s.family is Family.DECODE_ATTENTION}
    # 2,048: the latency rows' second history; 1,536: the 64-stream throughput rows
    assert seqs == {256, 1024, 4096, 16384, 32768} and hists == {512, 1536, 2048, 4096, 16384,
                                                                 32768}
    assert {(s.label, s.rope) for s in shapes if getattr(s, "history", 0) == 1536} == {
        ("qwen3-8b b64 hist1536", False), ("qwen3-8b b64 hist1536 +rope", True),
        *((f"{name} b{b} hist1536 batched", False)
          for name in ("qwen3-8b", "qwen3.5-35b-a3b") for b in (8, 64))}
    # the batched rows (issue 15's tensor-core decode attention): batch 8 and 64 at 512 ..
    # 16,384 keys and batch 32 at 2,048, D 128 and D 256
    batched = {(s.batch, s.history, s.head_dim) for s in shapes
               if s.family is Family.DECODE_ATTENTION and s.label.endswith(" batched")}
    assert batched == {(b, h, d) for b in (8, 64) for h in (512, 1536, 2048, 16384)
                       for d in (128, 256)} | {(32, 2048, 128), (32, 2048, 256)}
    assert {(s.batch, s.history) for s in shapes if s.family is Family.DECODE_ATTENTION} >= {
        (8, 16384), (8, 32768)}  # issue 15's long-context decode
    # every length on the wgmma kernel; issue 15's long prompts on it alone
    assert {s.seq for s in shapes if s.family is Family.PREFILL_ATTENTION and s.sm90} == seqs
    assert {s.seq for s in shapes if s.family is Family.PREFILL_ATTENTION
            and not s.sm90} == {256, 1024, 4096}
    gemv_batches = {s.m for s in shapes if s.family is Family.DECODE_GEMV}
    # 8: the flagship's linear-attention projections; 2 and 4: speculative verifications of
    # K = 1 and 3 at batch 1, on the ring and the register-tiled GEMV
    assert gemv_batches == {1, 2, 4, 8, 32}
    assert {(s.m, s.gemv) for s in shapes if getattr(s, "gemv", "")} == {
        (1, "ring"), (1, "tiled"), (2, "ring"), (2, "tiled"), (4, "ring"), (4, "tiled")}
    assert {s.m for s in shapes if s.family is Family.PREFILL_GEMM} == {2048}
    for small in (QWEN3_0_6B, SMOLLM2_135M):
        assert any(s.family is Family.DECODE_GEMV and s.k == small.hidden for s in shapes)
    keys = [(s.family, s.label, s.describe()) for s in shapes]
    assert len(keys) == len(set(keys))


# ---- the script, as a CPU dry run ---------------------------------------------------------

@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_kernels", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_kernels"] = module  # dataclasses resolve annotations through it
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["bench_kernels"]


def test_every_family_has_a_benchmark(bench) -> None:
    assert set(bench.BUILDERS) == set(Family)


@pytest.mark.parametrize("select", ["b3", "prefill", "swiglu", "ring"])
def test_dry_run_checks_and_times_every_row_and_writes_the_record(bench, tmp_path,
                                                                  select) -> None:
    pytest.importorskip("torch")
    assert bench.main(["--dry-run", "-k", select, "--out-dir", str(tmp_path)]) == 0
    (json_path,) = tmp_path.glob("kernel_table-*.json")
    record = json.loads(json_path.read_text())
    assert record["suite"] == "kernel-table" and record["dry_run"] is True
    rows = record["rows"]
    assert rows and all(r["passed"] and r["ours_us"] > 0 and r["torch_us"] > 0 for r in rows)
    assert record["metrics"]["rows_failed"] == 0
    assert record["metrics"]["speedup_min"] == pytest.approx(min(r["speedup"] for r in rows))
    md = json_path.with_suffix(".md").read_text()
    assert md.count("\n| ") == len(rows) + 1   # header + one line per row


def test_a_failing_row_is_reported_and_the_rest_still_run(bench, monkeypatch, tmp_path) -> None:
    pytest.importorskip("torch")

    def broken(env, shape):
        raise RuntimeError("kernel exploded")

    monkeypatch.setitem(bench.BUILDERS, Family.SILU_MUL, broken)
    assert bench.main(["--dry-run", "-k", "decode b3", "--out-dir", str(tmp_path)]) == 1
    (json_path,) = tmp_path.glob("kernel_table-*.json")
    rows = json.loads(json_path.read_text())["rows"]
    failed = [r for r in rows if not r["passed"]]
    assert [r["family"] for r in failed] == ["silu_mul"]
    assert "kernel exploded" in failed[0]["error"]
    assert any(r["passed"] for r in rows)


# ---- the CUDA timer, on a scripted stand-in for torch.cuda --------------------------------

class _ScriptedCuda:
    """Just enough of torch.cuda for time_cuda: a clock that work advances, events that read
    it, and graphs that record the steps issued while capturing and replay them."""

    def __init__(self, fail_capture: bool = False) -> None:
        self.clock_ms = 0.0
        self.capture: list | None = None
        self.fail_capture = fail_capture
        cuda = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.t = 0.0

            def record(self) -> None:
                self.t = cuda.clock_ms

            def elapsed_time(self, end: "Event") -> float:
                return end.t - self.t

        class CUDAGraph:
            def __init__(self) -> None:
                self.calls: list = []

            def replay(self) -> None:
                for call in self.calls:
                    call()

        class Stream:
            cuda_stream = 7

            def wait_stream(self, other: object) -> None:
                return None

        self.Event, self.CUDAGraph, self.Stream = Event, CUDAGraph, Stream

    def current_stream(self):
        return self.Stream()

    def stream(self, s):
        return contextlib.nullcontext()

    def synchronize(self) -> None:
        return None

    @contextlib.contextmanager
    def graph(self, g):
        self.capture = g.calls
        try:
            if self.fail_capture:
                raise RuntimeError("operation not permitted when stream is capturing")
            yield
        finally:
            self.capture = None


@pytest.mark.parametrize("fail_capture", [False, True])
def test_time_cuda_cycles_the_sets_and_reports_time_per_iteration(bench, fail_capture) -> None:
    cuda = _ScriptedCuda(fail_capture)
    env = types.SimpleNamespace(torch=types.SimpleNamespace(cuda=cuda))
    used: list[int] = []

    def work(i: int) -> None:
        used.append(i)
        cuda.clock_ms += 0.005  # 5 us of device time per iteration

    def step(i: int) -> None:
        if cuda.capture is not None:
            cuda.capture.append(lambda: work(i))
        else:
            work(i)

    timing = bench.time_cuda(env, step, copies=4, repeats=7)
    assert timing.us == pytest.approx(5.0)
    assert timing.graph is not fail_capture
    assert timing.iters % 4 == 0 and timing.iters == 400   # 2 ms of 5 us iterations
    timed = used[-7 * timing.iters:]
    assert timed[:8] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert all(timed.count(i) == 7 * timing.iters // 4 for i in range(4))


def test_hybrid_bytes_count_activations_once_and_the_state_both_ways() -> None:
    # Qwen3.5: conv of 8192 channels; one decode token: x + out rows, 3 ring rows read and
    # one written, the 8192 x 4 taps; a prefill chunk writes 3 rows
    conv = ks.Conv1d(label="", seqs=1, tokens=1, channels=8192, kernel=4)
    assert conv.bytes_moved() == 2 * (2 * 8192 + (3 + 1) * 8192 + 8192 * 4)
    chunk = ks.Conv1d(label="", seqs=1, tokens=64, channels=8192, kernel=4)
    assert chunk.bytes_moved() == 2 * (2 * 64 * 8192 + (3 + 3) * 8192 + 8192 * 4)
    # delta rule, one token: q|k|v row (8192) + b, a (64) + out (4096) bf16, and the f32 state
    # [32, 128, 128] read and written
    step = ks.DeltaRule(label="", seqs=1, tokens=1, key_heads=16, value_heads=32, key_dim=128,
                        value_dim=128, chunked=False)
    assert step.bytes_moved() == 2 * (8192 + 64 + 4096) + 2 * 4 * 32 * 128 * 128
    assert step.family is Family.DELTA_STEP and step.flops() == 0
    assert ks.GatedNorm(label="", tokens=2, heads=32, dim=128).bytes_moved() == 2 * (
        3 * 2 * 4096 + 128)
    # the fused decode step, two sequences: proj rows (8192 + 4096 z + 64 b, a) and out rows
    # (4096), 4 ring rows, the taps and the norm weight in bf16; the state both ways in f32
    fused = ks.GdnDecode(label="", seqs=2, key_heads=16, value_heads=32, key_dim=128,
                         value_dim=128, kernel=4)
    assert fused.bytes_moved() == 2 * (2 * (8192 + 4096 + 64 + 4096) + 2 * 4 * 8192
                                       + 8192 * 4 + 128) + 2 * 2 * 4 * 32 * 128 * 128
    assert fused.family is Family.GDN_DECODE and fused.flops() == 0
    # a verification run of 4 tokens: 4 rows, the ring read once (3 rows) and written whole
    # (4 rows) after each token, the state read once and written after each token
    run = ks.GdnDecode(label="", seqs=1, key_heads=16, value_heads=32, key_dim=128,
                       value_dim=128, kernel=4, tokens=4)
    assert run.bytes_moved() == 2 * (4 * (8192 + 4096 + 64 + 4096) + (3 + 16) * 8192
                                     + 8192 * 4 + 128) + 5 * 4 * 32 * 128 * 128


def test_table_has_the_hybrid_families_at_qwen3_5_shapes() -> None:
    shapes = ks.table_shapes()
    for fam in (Family.CONV1D, Family.DELTA_CHUNK, Family.DELTA_STEP, Family.GATED_RMSNORM,
                Family.GDN_DECODE):
        assert any(s.family is fam and s.quick for s in shapes), fam
    d256 = [s for s in shapes if s.family in (Family.PREFILL_ATTENTION, Family.DECODE_ATTENTION)
            and s.head_dim == 256]
    assert {s.family for s in d256} == {Family.PREFILL_ATTENTION, Family.DECODE_ATTENTION}
    # the linear-attention layer's decode launches at batch 1, 8 and 32: the fused step and
    # its projections [q | k | v | z | b | a] = 8192 + 4096 + 64 outputs and 4096 -> 2048
    layer = {(s.label, s.describe()) for s in shapes if s.label.startswith("qwen3.5-35b-a3b "
                                                                           "decode b")}
    for b in (1, 8, 32):
        assert (f"qwen3.5-35b-a3b decode b{b} in_proj", f"m={b} n=12352 k=2048") in layer
        assert (f"qwen3.5-35b-a3b decode b{b} out_proj", f"m={b} n=2048 k=4096") in layer
        assert any(s.family is Family.GDN_DECODE and s.seqs == b for s in shapes)


def test_quantized_gemv_bytes_are_the_formats() -> None:
    fp8 = ks.QuantLinear(label="q", m=2, n=300, k=256, fmt="fp8-block")
    # codes 1 byte each + f32 per 128x128 block (3 x 2 blocks) + x and y in bf16
    assert fp8.bytes_moved() == 300 * 256 + 4 * 3 * 2 + 2 * (2 * 256 + 2 * 300)
    nv = ks.QuantLinear(label="q", m=1, n=64, k=4096, fmt="nvfp4")
    # half a byte per value + one E4M3 byte per 16 values + f32 per row
    assert nv.bytes_moved() == 64 * 2048 + 64 * 256 + 4 * 64 + 2 * (4096 + 64)
    assert fp8.family is Family.DECODE_GEMV_FP8 and nv.family is Family.DECODE_GEMV_NVFP4
    table = [s for s in ks.table_shapes() if isinstance(s, ks.QuantLinear)]
    qwen3_8b = {(6144, 4096), (4096, 4096), (24576, 4096), (4096, 12288)}
    assert {(s.fmt, s.m, s.ring) for s in table} == (
        {(f, b, False) for f in ("fp8-block", "nvfp4") for b in (1, 8, 32)}
        | {(f, b, True) for f in ("fp8-block", "nvfp4") for b in (1, 8)})
    # the gate_up GEMV ending with the SwiGLU: Qwen3-8B's fused [gate | up], half the output
    swiglu = [s for s in table if s.swiglu and not s.narrow]
    assert {(s.fmt, s.m, s.n, s.k) for s in swiglu} == {
        (f, b, 24576, 4096) for f in ("fp8-block", "nvfp4") for b in (1, 8)}
    assert swiglu[0].bytes_moved() == swiglu[0].weight_bytes() + 2 * (4096 + 12288)
    assert {(s.n, s.k) for s in table if s.ring} == qwen3_8b  # the A/B rows
    # the quantized LM head: Qwen3-8B's vocabulary, f32 logits written
    logits = [s for s in table if s.logits and not s.narrow]
    assert {(s.fmt, s.m, s.n, s.k) for s in logits} == {
        (f, b, 151936, 4096) for f in ("fp8-block", "nvfp4") for b in (1, 8)}
    head = logits[-1]
    assert head.bytes_moved() == head.weight_bytes() + head.m * (2 * 4096 + 4 * 151936)
    # batch 1 of Qwen3-8B and of the other published widths, hidden 2,048 .. 8,192
    assert {s.k for s in table if s.m == 1 and not s.ring} >= {2048, 4096, 5120, 8192}
    # the narrow loops' A/B rows (ATLAS_QUANT_NARROW=1 / 2): Qwen3-8B at batch 1, both
    # formats, the four projections, gate_up + SwiGLU and the LM head
    narrow = [s for s in table if s.narrow]
    assert {(s.fmt, s.narrow, s.m) for s in narrow} == {
        (f, nw, 1) for f in ("fp8-block", "nvfp4") for nw in (1, 2)}
    assert {(s.n, s.k) for s in narrow if not s.swiglu and not s.logits} == qwen3_8b
    assert {(s.fmt, s.narrow) for s in narrow if s.swiglu} == {(s.fmt, s.narrow) for s in narrow}
    assert {(s.fmt, s.narrow, s.n) for s in narrow if s.logits} == {
        (s.fmt, s.narrow, 151936) for s in narrow}
    assert all(s.label.endswith(f" n{s.narrow}") for s in narrow)
    assert len({s.label for s in table}) == len(table)


def test_table_has_the_decode_latency_rows_of_every_head_geometry() -> None:
    rows = {(s.heads, s.kv_heads, s.head_dim, s.rope, s.batch, s.history)
            for s in ks.table_shapes() if s.family in (Family.DECODE_ATTENTION,
                                                        Family.DECODE_ATTENTION_ROPE)
            and s.label.endswith("latency")}
    # Qwen3-0.6B, -8B, -30B-A3B, Qwen2.5-1.5B (rope fused) and Qwen3.5-35B-A3B (D 256, unfused)
    # at batch 1 and 8, 512 and 2,048 keys
    want = {(hq, hkv, d, rope, b, h) for hq, hkv, d, rope in
            ((16, 8, 128, True), (32, 8, 128, True), (32, 4, 128, True), (12, 2, 128, True),
             (16, 2, 256, False))
            for b in (1, 8) for h in (512, 2048)}
    assert rows == want


def test_the_decode_gemm_width_rows_time_the_served_launch() -> None:
    """The "... dgemm" rows leave block shape and split to the routes (the start-up tuner's
    pick, as a served step), the "wide" and plain decode GEMM rows force their shapes (the
    A/Bs): a forced shape bypasses the tuner (ops.matmul_decode.tunes)."""
    rows = [s for s in ks.table_shapes() if isinstance(s, Linear) and s.decode_sm90]
    dgemm = [s for s in rows if s.label.endswith(" dgemm")]
    assert dgemm and all(s.wide is None for s in dgemm)
    assert any(s.label.startswith("qwen3-4b gate_up b64") for s in dgemm)
    assert all(s.wide is not None for s in rows if not s.label.endswith(" dgemm"))
