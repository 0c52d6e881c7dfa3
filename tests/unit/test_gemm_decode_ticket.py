"""The TMA decode GEMM's ticket split of K (gemm_decode_tma_*_ticket, ATLAS_DECODE_GEMM_TICKET):
its references and check cases (each against the float64 oracle, a second launch and the
cluster kernel at the same split bit for bit), the wave-fill rule that picks its split, the
launch builder (entry points, grid, the split workspace kept per cache), the switch, and a
decode step of the tiny Qwen3 fixture (real safetensors) on the CPU reference backend with
the ticket split forced, whose tokens and logprobs must equal the cluster path's to the bit.
There is no GPU in CI; the device check is tools/gpu/check_kernels.py -k ticket."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk, TokenLogprobs
from atlas.model.load import load_runner
from atlas.runtime.cases import gemm_decode_ticket as case_defs
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul_decode, routes
from atlas.runtime.ops.routes import KernelRoutes
from test_gemm_decode_tma import _TmaDecodeMock

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"
CASES = [case_defs.gemm_decode_ticket_case(np.random.default_rng(11), *shape)
         for shape in case_defs.GEMM_DECODE_TICKET_SHAPES]
SM_COUNT = 132  # an H200


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle_relaunch_and_cluster_kernel(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_cases_cover_splits_batches_shapes_and_epilogues() -> None:
    shapes = case_defs.GEMM_DECODE_TICKET_SHAPES
    assert {s for *_, s, _, _ in shapes} >= {2, 3, 4, 5, 6, 7, 8, None}
    assert {1, 17, 64, 256} <= {m for m, *_ in shapes}
    assert any(n % 64 for _, n, *_ in shapes) and any(f for *_, f, _, _, _ in shapes)
    assert any(g for *_, g in shapes) and {True, False} == {w for *_, w, _ in shapes}
    for case in CASES:  # every case relaunches; splits 2, 4, 8 also meet the cluster kernel
        assert case.graph and case.same_bits[0][1].endswith(case_defs.AGAIN)
        split = int(case.name.split("ticket")[1].split()[0])
        assert (len(case.same_bits) == 2) == (split in (2, 4, 8))


# ---- the split rule ----------------------------------------------------------------------

@pytest.mark.parametrize("m, n, k, groups, split", [
    (64, 4096, 4096, 2, 4),     # Qwen3-8B o_proj b64: 32 tiles x 4 = 128 of 132 (cluster: 2)
    (64, 4096, 12288, 2, 4),    # down
    (64, 6144, 4096, 2, 2),     # qkv: 48 x 2 = 96; x 3 = 144 would be two waves
    (64, 24576, 4096, 2, 2),    # gate_up: 192 tiles, x 2 = 384 blocks, 2.9 waves of 132
    (16, 4096, 4096, 1, 4),     # one-warpgroup blocks, two an SM: 64 x 4 = 256 of 264
    (16, 6144, 4096, 1, 2),     # 96 x 2 = 192 of 264
    (128, 4096, 4096, 2, 4),
    (256, 24576, 4096, 2, 1),   # split 2's 50 MB of partials exceed the workspace
    (64, 640, 4096, 2, 8),      # 5 tiles: the largest split, 8
    (64, 640, 1024, 2, 4),      # 16 k-tiles keep at least 4 a block
    (9, 151936, 4096, 1, 1),    # the LM head: nine full waves alone
    (64, 151936, 4096, 2, 1),   # even split 1's partials would exceed the workspace: it has none
])
def test_ticket_split_fills_one_wave(m, n, k, groups, split) -> None:
    assert matmul_decode.ticket_split(m, n, k, SM_COUNT, groups=groups) == split


def test_ticket_split_is_the_largest_one_wave_split_under_a_wave() -> None:
    """Over many shapes below a wave of tiles: the chosen grid fits the resident slots, and
    the next split would not (or would break the k-tile or workspace limits)."""
    rng = np.random.default_rng(3)
    for _ in range(400):
        m = int(rng.integers(1, 257))
        n, k = int(rng.integers(1, 200)) * 64, int(rng.integers(1, 256)) * 64
        groups = matmul_decode.decode_groups(m, None, tma=True)
        slots = SM_COUNT * matmul_decode.blocks_per_sm(matmul_decode.decode_cols(m), groups)
        tiles = -(-n // (64 * groups))
        split = matmul_decode.ticket_split(m, n, k, SM_COUNT, groups=groups)
        assert 1 <= split <= 8
        if split > 1:
            assert k // 64 >= matmul_decode.MIN_SPLIT_K_TILES * split
            assert (matmul_decode.ticket_workspace_bytes(m, n, groups, split)
                    <= matmul_decode.TICKET_WORKSPACE)
        if tiles < slots:
            nxt = split + 1
            assert tiles * split <= slots
            assert (nxt > 8 or tiles * nxt > slots or -(-k // 64) < 4 * nxt
                    or matmul_decode.ticket_workspace_bytes(m, n, groups, nxt)
                    > matmul_decode.TICKET_WORKSPACE)


def test_forced_split_overrides_the_rule() -> None:
    assert matmul_decode.ticket_split(64, 4096, 4096, SM_COUNT, forced=2, groups=2) == 2
    with pytest.raises(ValueError, match="split 9"):
        matmul_decode.ticket_split(64, 4096, 4096, SM_COUNT, forced=9, groups=2)


# ---- launch builder and switch -----------------------------------------------------------

def _kc(dev: MockGpuBackend, **env: str) -> KernelCache:
    return KernelCache(dev, KernelRoutes.from_env({"ATLAS_DECODE_GEMM_TICKET": "1", **env}))


def test_switch_is_off_by_default() -> None:
    assert not KernelRoutes.from_env({}).decode_gemm_ticket
    assert KernelRoutes.from_env({"ATLAS_DECODE_GEMM_TICKET": "1"}).decode_gemm_ticket
    assert "ATLAS_DECODE_GEMM_TICKET=1" in routes.__doc__


def test_ticket_launch_geometry_and_one_workspace() -> None:
    dev = _TmaDecodeMock()
    kc = _kc(dev)
    m, n, k = 64, 4096, 4096
    x, w, y = dev.alloc(m * k * 2), dev.alloc(24576 * k * 2), dev.alloc(m * 24576 * 2)
    for _ in range(2):  # two steps: one workspace, the same addresses
        matmul_decode.decode_gemm(kc, 0, x, w, y, m, n, k)
    first, second = dev.drain_launches()
    assert first.func == "gemm_decode_tma_bf16_ticket"
    assert first.grid == (32 * 4, 1, 1) and first.block == (288, 1, 1)
    assert first.shared == matmul_decode.smem_bytes(64, 2, matmul_decode.TMA_MAX_STAGES)
    args = first.args
    assert args["split"] == 4 and args["ws"] != args["tickets"]
    assert (second.args["ws"], second.args["tickets"]) == (args["ws"], args["tickets"])
    assert dev.op_counts["memset"] == 2  # partials and counters zeroed once, when allocated
    # the gate_up's 12.6 MB of partials and 192 counters outgrow both: new ones, zeroed
    matmul_decode.decode_gemm(kc, 0, x, w, y, m, 24576, k, swiglu=True)
    (gate_up,) = dev.drain_launches()
    assert gate_up.func == "gemm_decode_tma_swiglu_bf16_ticket" and gate_up.args["split"] == 2
    assert gate_up.grid == (192 * 2, 1, 1) and gate_up.args["tickets"] != args["tickets"]
    assert dev.op_counts["memset"] == 4
    assert matmul_decode.ticket_workspace_bytes(m, 24576, 2, 2) == 192 * 2 * m * 128 * 4
    # back to o_proj: the larger buffers serve it, nothing new
    matmul_decode.decode_gemm(kc, 0, x, w, y, m, n, k)
    (again,) = dev.drain_launches()
    assert (again.args["ws"], again.args["tickets"]) == (gate_up.args["ws"],
                                                        gate_up.args["tickets"])
    assert dev.op_counts["memset"] == 4


def test_split_one_and_the_cluster_paths() -> None:
    dev = _TmaDecodeMock()
    m, k, vocab = 9, 4096, 151936
    x, w, y = dev.alloc(64 * k * 2), dev.alloc(vocab * k * 2), dev.alloc(64 * vocab * 4)
    # a split of 1 runs the plain entry point, no workspace
    matmul_decode.decode_gemm(_kc(dev), 0, x, w, y, m, vocab, k, True)
    assert [r.func for r in dev.drain_launches()] == ["gemm_decode_tma_bf16_f32"]
    assert dev.op_counts["memset"] == 0
    # any split 1..8 when forced by the caller (a check case), only 1/2/4/8 on clusters
    matmul_decode.decode_gemm(_kc(dev), 0, x, w, y, 64, 4096, k, split=3)
    (record,) = dev.drain_launches()
    assert record.func == "gemm_decode_tma_bf16_ticket" and record.args["split"] == 3
    with pytest.raises(ValueError, match="split 3"):
        matmul_decode.decode_gemm(KernelCache(dev), 0, x, w, y, 64, 4096, k, split=3)
    # switch off: the cluster rule's entry point; the cp.async kernel has no ticket entries
    matmul_decode.decode_gemm(KernelCache(dev), 0, x, w, y, 64, 4096, k)
    matmul_decode.decode_gemm(_kc(dev, ATLAS_DECODE_GEMM_TMA="0"), 0, x, w, y, 64, 4096, k)
    assert [r.func for r in dev.drain_launches()] == ["gemm_decode_tma_bf16_split4",
                                                      "gemm_decode_sm90_bf16_split4"]


# ---- a decode step on the ticket path ----------------------------------------------------

ROWS = 12  # past the GEMV's 8 rows: the decode GEMM's route
HOPPER_MODULES = ["gemm", "gemm_sm90", "gemv", "gemv_mma", "gemm_decode_sm90",
                  "gemm_decode_tma"]


@pytest.fixture
def hopper(monkeypatch):
    """The mock and the CPU reference backend report an sm_90a set's modules (the TMA
    decode GEMM's among them); the fixture's k = 64..128 give the rule no split, so the
    split is forced to 2 for every product: the ticket entries (switch on) or the clusters."""
    for cls in (MockGpuBackend, HostBackend):
        monkeypatch.setattr(cls, "module_names", property(lambda self: HOPPER_MODULES))
    monkeypatch.setattr(MockGpuBackend, "set_max_dynamic_shared", lambda self, h, n: None,
                        raising=False)
    monkeypatch.setenv("ATLAS_DECODE_GEMM_SPLIT", "2")
    return monkeypatch


def _chunks() -> list[SeqChunk]:
    return [SeqChunk(i, [3 + 5 * i], 0, [i], GREEDY, logprobs=5, history=PenaltyHistory([]))
            for i in range(ROWS)]


def _step(monkeypatch, backend: str, ticket: str) -> tuple[list, list[str]]:
    monkeypatch.setenv("ATLAS_DECODE_GEMM_TICKET", ticket)
    runner = load_runner(FIXTURE, backend=backend, max_seq_len=64, max_batch_size=16,
                         max_prefill_tokens=32)
    dev = runner.backend
    if backend == "mock":
        dev.drain_launches()
        dev.graph_launches.clear()
    out = runner.execute(_chunks())
    names = ([r.func for g in dev.graph_launches for r in g.graph]
             + [r.func for r in dev.drain_launches()] if backend == "mock" else [])
    return out, names


def test_decode_step_launches_the_ticket_entries_in_its_graph(hopper) -> None:
    _, names = _step(hopper, "mock", "1")
    decode = [n for n in names if n.startswith("gemm_decode_tma")]
    # qkv, o_proj, gate_up + SwiGLU, down on each of the 2 layers; the logits too
    assert len(decode) >= 8 and all(n.endswith("_ticket") for n in decode)
    assert "gemm_decode_tma_swiglu_bf16_ticket" in decode
    _, names = _step(hopper, "mock", "0")
    assert not any(n.endswith("_ticket") for n in names)


def test_ticket_and_cluster_steps_agree_bit_for_bit(hopper) -> None:
    ticket, _ = _step(hopper, "host", "1")
    cluster, _ = _step(hopper, "host", "0")
    assert all(isinstance(r, TokenLogprobs) for r in ticket)
    assert ticket == cluster
