"""The verification decode attention (attention_verify): its reference and check cases, a
numpy model of the kernel's algorithm (runs, pieces, split ranges, absolute 64-key tiles,
the warps' key slices, masks, online softmax with one bf16 per probability, the merges)
against the float64 oracle, the launch geometry, and the routing of a speculating runner's
verification steps. There is no GPU in CI; the device check of the kernel is
tools/gpu/check_kernels.py over the same cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, round_bf16
from atlas.core.sampling import GREEDY
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest
from atlas.engine.speculative import OracleDrafter, Speculator
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.cases import attention_verify as case_defs
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, attention_long, attention_verify as av
from atlas.runtime.ops.routes import KernelRoutes
# the elementwise kernels' check that a .cu file declares exactly its module's ABI entries
from test_gemm_decode_sm90 import _constant as _kernel_constant
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

SOURCE = Path(__file__).resolve().parents[2] / "kernels/hopper/common/attention_verify.cu"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"
CASES = case_defs.verify_cases(np.random.default_rng(7))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_cuda_entry_points_declare_exactly_the_abi() -> None:
    _declares_abi("attention_verify")


def _constant(name: str) -> int:
    return _kernel_constant(name, SOURCE)


def test_launch_constants_match_the_kernel() -> None:
    assert av.VERIFY_THREADS == _constant("kThreads")
    assert av.VERIFY_TILE_KEYS == _constant("kBKV")
    assert av.VERIFY_MAX_ROWS == _constant("kMaxRows")
    assert av.VERIFY_MAX_STEP_ROWS == _constant("kMaxStepRows")


@pytest.mark.parametrize("d, nbytes", [(64, 56 * 1024), (128, 112 * 1024), (256, 160 * 1024)])
def test_shared_memory(d: int, nbytes: int) -> None:
    """Q [64][D] and 3 (2 at D = 256) stages of K and V [64][D] bf16; the warps' merge
    (o [4][16][D], m and l [4][16] f32) and the last split's (weights and l's [64][64 splits]
    and the sums [64], f32) fit in the ring; a block fits in 227 KiB, two at D <= 128 (with
    1 KiB reserved a block and up to 512 B of static arrays: 384 B by ptxas -v)."""
    assert av.verify_smem_bytes(d) == nbytes
    ring = av.verify_stages(d) * 2 * 64 * d * 2
    assert (4 * 16 * d + 2 * 4 * 16) * 4 <= ring
    assert (2 * 64 * av.VERIFY_MAX_SPLITS + 64) * 4 <= ring
    assert nbytes <= 227 * 1024 and (d > 128 or 2 * (nbytes + 1024 + 512) <= 228 * 1024)


def test_split_rule_is_whole_tiles_from_the_rows_own_length() -> None:
    assert av.verify_split_rule(1, 33) == (64, 1)
    assert av.verify_split_rule(512, 33) == (64, 8)
    assert av.verify_split_rule(4096, 33) == (128, 32)
    assert av.verify_split_rule(577, 9) == (128, 5)
    for n in range(1, 3000, 37):
        for s in (1, 2, 9, 33):
            chunk, active = av.verify_split_rule(n, s)
            assert chunk % 64 == 0 and 1 <= active <= s
            assert (active - 1) * chunk < n <= active * chunk


def test_a_minimum_chunk_takes_fewer_longer_splits_at_short_contexts_only() -> None:
    assert av.verify_split_rule(512, 33, 128) == (128, 4)
    assert av.verify_split_rule(512, 33, 256) == (256, 2)
    assert av.verify_split_rule(1, 33, 256) == (256, 1)
    assert av.verify_split_rule(4096, 33, 128) == (128, 32)   # already 2 tiles a split
    for n in range(1, 3000, 37):
        for s in (1, 2, 9, 33):
            for least in (128, 192, 256):
                chunk, active = av.verify_split_rule(n, s, least)
                assert chunk % 64 == 0 and chunk >= least and 1 <= active <= s
                assert (active - 1) * chunk < n <= active * chunk
                assert chunk == max(av.verify_split_rule(n, s)[0], least)


# ---- a numpy model of the kernel ------------------------------------------------------

def _continues(lens: np.ndarray, tables: np.ndarray, row: int, bs: int) -> bool:
    """attention_verify.cu continues_run."""
    if row <= 0 or row >= len(lens):
        return False
    prev = int(lens[row - 1])
    if prev < 1 or lens[row] != prev + 1:
        return False
    pg = (prev - 1) // bs
    return tables[row, pg] == tables[row - 1, pg]


def _leading_yes(flags: list[bool]) -> int:
    n = 0
    while n < len(flags) and flags[n]:
        n += 1
    return n


def kernel_model(x: dict[str, np.ndarray], g, num_splits: int, window: int,
                 min_chunk: int = 64) -> np.ndarray:
    """out [rows, hq, D] as attention_verify.cu computes it, block by block (each serving
    the pieces that start in its window of rows, skipping the rows it accounts for), in
    float32 (the tensor cores' sums as numpy's; P rounded to bf16 for the PV product). The
    tile products are einsum's loops, not BLAS: an element's sum then depends on its own
    operands only (numpy 2.4's float32 matmul gave a row 1-ulp different bits when the
    tile's other rows changed), as the row-invariance test needs."""
    lens, tables = x["kv_lens"], x["block_tables"]
    rows_total, hq, d = x["q"].shape
    group, bs = hq // g.hkv, g.block_size
    q = bf16_bits_to_f32(x["q"])
    kc = bf16_bits_to_f32(x["k_cache"]).reshape(-1, g.hkv, bs, d)
    vc = bf16_bits_to_f32(x["v_cache"]).reshape(-1, g.hkv, bs, d)
    out = np.full((rows_total, hq, d), np.nan, np.float32)
    parts: dict[tuple[int, int, int], tuple[np.float32, np.float32, np.ndarray]] = {}
    scale_log2 = np.float32(g.scale) * np.float32(1.4426950408889634)
    merges = []
    cap = min(av.VERIFY_MAX_STEP_ROWS, av.VERIFY_MAX_ROWS // group)
    blocks_z = -(-rows_total // window)
    span = -(-rows_total // blocks_z)                       # the kernel's window
    starts = []                                             # piece starts the blocks serve
    for z in range(blocks_z):
        r0, stop = z * span, min(z * span + span, rows_total)
        while r0 < stop:
            back = _leading_yes([_continues(lens, tables, r0 - i, bs) for i in range(32)])
            fwd = _leading_yes([_continues(lens, tables, r0 + 1 + i, bs) for i in range(32)])
            if back % cap:
                start = r0 - back % cap
                r0 = min(start + cap, r0 + fwd + 1)
                continue
            starts.append(r0)
            r0 += min(cap, fwd + 1)
    assert len(set(starts)) == len(starts)                  # each piece served once
    for kvh in range(g.hkv):
        for r0 in starts:
            fwd = _leading_yes([_continues(lens, tables, r0 + 1 + i, bs) for i in range(32)])
            n = min(cap, fwd + 1)
            rule = [av.verify_split_rule(int(lens[r0 + j]), num_splits, min_chunk)
                    for j in range(n)]
            used = max(a for _, a in rule)
            # the kernel's first exit: splits past any a piece from r0 could use
            most = max(av.verify_split_rule(int(lens[r0]) + j, num_splits, min_chunk)[1]
                       for j in range(cap))
            assert used <= most
            for split in range(num_splits):
                lo = [split * c for c, _ in rule]
                hi = [min(lo[j] + c, int(lens[r0 + j])) if lo[j] < lens[r0 + j] else lo[j]
                      for j, (c, _) in enumerate(rule)]
                if split > 0 and split >= used:
                    continue
                keyed = [j for j in range(n) if lo[j] < hi[j]]
                lo_u = min((lo[j] for j in keyed), default=0)
                hi_u = max((hi[j] for j in keyed), default=0)
                n_tiles = -(-(hi_u - lo_u) // 64) if keyed else 0
                rows = n * group
                mt_count = 1 if rows <= 16 else 2 if rows <= 32 else 4
                table = tables[r0]  # the piece's rows share it
                keys = np.zeros((n_tiles * 64, d), np.float32)   # zero past the union
                vals = np.zeros((n_tiles * 64, d), np.float32)
                pos = np.arange(lo_u, hi_u)
                keys[:hi_u - lo_u] = kc[table[pos // bs], kvh, pos % bs]
                vals[:hi_u - lo_u] = vc[table[pos // bs], kvh, pos % bs]
                q_rows = np.zeros((mt_count * 16, d), np.float32)
                for i in range(rows):
                    q_rows[i] = q[r0 + i // group, kvh * group + i % group]
                first = np.array([lo[i // group] if i < rows else 2 ** 31 - 1
                                  for i in range(mt_count * 16)])
                last = np.array([hi[i // group] - 1 if i < rows else -1
                                 for i in range(mt_count * 16)])
                warp_parts = []
                for warp in range(4):
                    mt, sl = warp % mt_count, warp // mt_count
                    rs = slice(mt * 16, mt * 16 + 16)
                    m_run = np.full(16, -np.inf, np.float32)
                    l_run = np.zeros(16, np.float32)
                    o = np.zeros((16, d), np.float32)
                    for t in range(n_tiles):
                        for sub in range(mt_count):
                            k0 = sl * 16 * mt_count + sub * 16
                            kp = t * 64 + k0
                            s = np.einsum("ij,kj->ik", q_rows[rs], keys[kp:kp + 16])
                            key = lo_u + kp + np.arange(16)
                            outside = (key[None] < first[rs, None]) | (key[None] > last[rs, None])
                            s[outside] = -np.inf
                            m_new = np.maximum(m_run, s.max(axis=1) * scale_log2)
                            base = np.where(m_new == -np.inf, np.float32(0), m_new)
                            corr = np.exp2(m_run - base)
                            p = np.exp2(s * scale_log2 - base[:, None])
                            l_run = l_run * corr + p.sum(axis=1)
                            o = o * corr[:, None] + np.einsum("ij,jk->ik", round_bf16(p),
                                                              vals[kp:kp + 16])
                            m_run = m_new
                    warp_parts.append((m_run, l_run, o))
                for i in range(rows):
                    j, h = i // group, kvh * group + i % group
                    if rule[j][1] == 0:
                        if split == 0:
                            out[r0 + j, h] = 0
                        continue
                    if lo[j] >= hi[j]:
                        continue
                    ws = [warp_parts[i // 16 + w * mt_count] for w in range(4 // mt_count)]
                    mx = max(m[i % 16] for m, _, _ in ws)
                    wt = [np.exp2(m[i % 16] - mx) for m, _, _ in ws]
                    total = sum(l[i % 16] * w for (_, l, _), w in zip(ws, wt))
                    acc = sum(o[i % 16] * w for (_, _, o), w in zip(ws, wt))
                    if rule[j][1] == 1:
                        out[r0 + j, h] = acc / total
                    else:
                        parts[(r0 + j, h, split)] = (mx, total, acc / total)
            merges += [(r0 + j, kvh * group + i, rule[j][1]) for j in range(n)
                       for i in range(group) if rule[j][1] > 1]
    for row, h, act in merges:
        ms = [parts[(row, h, s)] for s in range(act)]
        mx = max(m for m, _, _ in ms)
        w = [l * np.exp2(m - mx) for m, l, _ in ms]
        out[row, h] = sum(wi * o for wi, (_, _, o) in zip(w, ms)) / sum(w)
    return out


@pytest.mark.parametrize("shape", case_defs.VERIFY_SHAPES, ids=lambda s: s[0])
def test_kernel_model_meets_the_case_tolerance(shape) -> None:
    """Every row written exactly once, within the case's tolerance of the float64 oracle."""
    case = case_defs.verify_case(np.random.default_rng(11), *shape)
    g, seqs, num_splits = shape[1], shape[2], shape[3]
    window = shape[5] if len(shape) > 5 and shape[5] else 1 + max(d for _, d in seqs)
    min_chunk = shape[6] if len(shape) > 6 else 64
    expected = case.oracle(case.inputs)["out"]
    got = kernel_model(case.inputs, g, num_splits, window, min_chunk)
    assert not np.isnan(got).any()
    atol, rtol = case.outputs["out"].tol
    assert (np.abs(got - expected) <= atol + rtol * np.abs(expected)).all()


def test_a_rows_bits_do_not_depend_on_the_other_rows_of_its_step() -> None:
    """The same sequence verified with 3 drafts (one piece of 4 rows, one m16 tile at group
    4) and its rows alone or in pairs: each row's output is the same bits (chunking from
    its own kv_len, tiles at absolute positions, fully masked tiles leave it as it was)."""
    g = case_defs.Geometry(32, 8, 128, 16)
    for history, splits in ((509, 33), (573, 9), (60, 2)):
        case = case_defs.verify_case(np.random.default_rng(3), "x", g, [(history, 3)], splits)
        whole = kernel_model(case.inputs, g, splits, 4)
        for rows in ([0], [1, 2], [3], [2, 3]):
            x = dict(case.inputs)
            for name in ("kv_lens", "block_tables", "q"):
                x[name] = case.inputs[name][rows]
            got = kernel_model(x, g, splits, len(rows))
            assert np.array_equal(got, whole[rows]), (history, rows)


# ---- launch and routing ----------------------------------------------------------------

class _HopperMock(MockGpuBackend):
    """A mock device whose loaded PTX set has attention and attention_verify."""

    def __init__(self) -> None:
        super().__init__()
        self.opt_ins: list[tuple[str, int]] = []

    @property
    def module_names(self) -> list[str]:
        return ["attention", "attention_verify"]

    def set_max_dynamic_shared(self, handle, nbytes: int) -> None:
        self.opt_ins.append((handle.func, nbytes))


def test_launch_geometry() -> None:
    dev = _HopperMock()
    kc = KernelCache(dev, KernelRoutes.from_env({}))
    ptrs = [dev.alloc(1 << 12) for _ in range(9)]
    av.decode_attention_verify(kc, 0, *ptrs, 8, 32, 8, 128, 16, 40, 33, 128 ** -0.5)
    av.decode_attention_verify(kc, 0, *ptrs, 8, 32, 8, 128, 16, 40, 33, 128 ** -0.5,
                               rows_per_block=3)
    rec, windowed = dev.drain_launches()
    assert windowed.grid == (33, 8, 3)   # ceil(8 / 3) windows
    assert (rec.module, rec.func) == ("attention_verify", "decode_attn_verify_bf16")
    assert rec.grid == (33, 8, 8) and rec.block == (128, 1, 1)
    assert rec.shared == av.verify_smem_bytes(128)
    assert dev.opt_ins == [("decode_attn_verify_bf16", av.verify_smem_bytes(256))]
    with pytest.raises(ValueError, match="head_dim=96"):
        av.decode_attention_verify(kc, 0, *ptrs, 8, 32, 8, 96, 16, 40, 33, 0.1)
    with pytest.raises(ValueError, match="group of at most 64"):
        av.decode_attention_verify(kc, 0, *ptrs, 8, 128, 1, 128, 16, 40, 33, 0.1)
    assert rec.args["min_chunk"] == windowed.args["min_chunk"] == 64
    av.decode_attention_verify(kc, 0, *ptrs, 8, 32, 8, 128, 16, 40, 33, 0.1, min_chunk=256)
    (rec,) = dev.drain_launches()
    assert rec.args["min_chunk"] == 256
    for bad in (0, 96, 32):
        with pytest.raises(ValueError, match="min_chunk"):
            av.decode_attention_verify(kc, 0, *ptrs, 8, 32, 8, 128, 16, 40, 33, 0.1,
                                       min_chunk=bad)


@pytest.mark.parametrize("value, ok", [("128", True), ("256", True), ("64", True),
                                       ("96", False), ("0", False), ("x", False)])
def test_the_min_keys_switch_takes_whole_tiles(value, ok) -> None:
    env = {"ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS": value}
    if ok:
        assert KernelRoutes.from_env(env).decode_attn_verify_min_keys == int(value)
    else:
        with pytest.raises(ValueError, match="ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS"):
            KernelRoutes.from_env(env)


@pytest.mark.parametrize("backend, env, hq, hkv, d, keys, uses", [
    (_HopperMock, {}, 32, 8, 128, 4, True),
    (_HopperMock, {}, 16, 2, 256, 8, True),
    (_HopperMock, {}, 32, 8, 96, 4, False),
    (_HopperMock, {}, 32, 8, 128, 1, False),                  # not a verification
    (_HopperMock, {}, 32, 8, 128, 33, False),                 # longer than the run search
    (_HopperMock, {"ATLAS_DECODE_ATTN_VERIFY": "0"}, 32, 8, 128, 4, False),
    (MockGpuBackend, {}, 32, 8, 128, 4, False),               # module not loaded
])
def test_routing_rule(backend, env, hq, hkv, d, keys, uses) -> None:
    kc = KernelCache(backend(), KernelRoutes.from_env(env))
    assert av.uses_verify(kc, hq, hkv, d, keys) is uses


@pytest.mark.parametrize("env, seqs, uses", [
    ({}, 1, True),
    ({}, 2, False),        # a batch verifies rows apart (gpu20: b8 35.05 us vs 17.49)
    ({"ATLAS_DECODE_ATTN_VERIFY_MAX_BATCH": "8"}, 8, True),
    ({"ATLAS_DECODE_ATTN_VERIFY_MAX_BATCH": "8"}, 9, False),
    ({"ATLAS_DECODE_ATTN_VERIFY_MAX_BATCH": "0"}, 1, False),
])
def test_the_kernel_serves_verifications_of_at_most_the_switchs_sequences(env, seqs, uses):
    kc = KernelCache(_HopperMock(), KernelRoutes.from_env(env))
    assert av.uses_verify(kc, 32, 8, 128, 4, seqs) is uses


def test_a_malformed_batch_switch_is_named() -> None:
    with pytest.raises(ValueError, match="ATLAS_DECODE_ATTN_VERIFY_MAX_BATCH"):
        KernelRoutes.from_env({"ATLAS_DECODE_ATTN_VERIFY_MAX_BATCH": "two"})


def _speculating_runner(monkeypatch, backend: str, env: dict[str, str]):
    """A speculating runner on the unclustered verification entries unless `env` says
    otherwise (the clustered default is test_attention_verify_cluster.py's)."""
    env = {"ATLAS_DECODE_ATTN_VERIFY_CLUSTER": "0", **env}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    cls = MockGpuBackend if backend == "mock" else HostBackend
    monkeypatch.setattr(cls, "module_names", property(lambda self: ["attention_verify"]))
    return load_runner(FIXTURE, backend=backend, max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32, num_draft_tokens=3, batch_invariant=False)


def _assert_oracle_speculation_changes_no_token(runner) -> None:
    """Greedy output of two prompts with the oracle drafting (K = 3, acceptance 0.7) equals
    the plain output, and the drafts were neither all accepted nor all rejected."""
    def generate(speculator=None):
        engine = LLMEngine(runner, max_prefill_tokens=32, speculator=speculator)
        return [c.token_ids for c in engine.generate(reqs)]

    reqs = [EngineRequest(p, GREEDY, 12) for p in ([5, 9, 200, 17, 5, 9], [44, 45, 46])]
    plain = generate()
    spec = Speculator(OracleDrafter({tuple(r.prompt_ids): t for r, t in zip(reqs, plain)},
                                    0.7, runner.vocab_size, seed=5), 3)
    assert generate(spec) == plain
    assert 0 < spec.accepted < spec.drafted


def _verification_graph(runner):
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(2, [3, 4, 5, 6], 5, [0], GREEDY, num_draft=3,
                             history=PenaltyHistory([1, 2, 3, 4, 5]))])
    runner.release(2)
    (replay,) = dev.graph_launches
    return replay.graph


def test_verification_steps_take_the_verification_kernel(monkeypatch) -> None:
    runner = _speculating_runner(monkeypatch, "mock", {})
    kv_heads, layers = runner.model.dims.kv_heads, runner.cfg.num_hidden_layers
    graph = _verification_graph(runner)
    names = [r.func for r in graph]
    assert runner.verify_kernel and runner.invariant_rows == 0
    assert names.count("qk_norm_rope_kv_bf16") == layers
    attn = [r for r in graph if r.func.startswith("decode_attn")]
    assert [r.func for r in attn] == ["decode_attn_verify_bf16"] * layers
    # one sequence's 4 rows: batch 1's split count, one window of 4 rows, one-tile splits
    assert all(r.grid == (runner.limits.decode_splits(1, kv_heads), kv_heads, 1) for r in attn)
    assert {r.args["min_chunk"] for r in attn} == {64}


def test_the_model_launches_the_switchs_minimum_chunk(monkeypatch) -> None:
    runner = _speculating_runner(monkeypatch, "mock", {"ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS": "256"})
    attn = [r for r in _verification_graph(runner) if r.func == "decode_attn_verify_bf16"]
    assert len(attn) == runner.cfg.num_hidden_layers
    assert {r.args["min_chunk"] for r in attn} == {256}


def _verification_graph_of_two(runner):
    """The graph replay of a verification of two sequences, 4 rows each (bucket 8)."""
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(2, [3, 4, 5, 6], 5, [0], GREEDY, num_draft=3,
                             history=PenaltyHistory([1, 2, 3, 4, 5])),
                    SeqChunk(3, [7, 8, 9, 10], 5, [1], GREEDY, num_draft=3,
                             history=PenaltyHistory([1, 2, 3, 4, 5]))])
    runner.release(2)
    runner.release(3)
    (replay,) = dev.graph_launches
    return replay.graph


@pytest.mark.parametrize("env, kernel", [({}, False),
                                         ({"ATLAS_DECODE_ATTN_VERIFY_MAX_BATCH": "2"}, True)])
def test_a_batch_of_verifications_attends_rows_apart_by_default(monkeypatch, env, kernel):
    runner = _speculating_runner(monkeypatch, "mock", env)
    kv_heads, layers = runner.model.dims.kv_heads, runner.cfg.num_hidden_layers
    assert runner.verify_kernel and runner.invariant_rows == 0
    attn = [r for r in _verification_graph_of_two(runner) if r.func.startswith("decode_attn")]
    assert len(attn) == layers
    if kernel:   # two sequences' 8 rows: batch 2's split count, two windows of 4 rows
        assert {r.func for r in attn} == {"decode_attn_verify_bf16"}
        assert all(r.grid == (runner.limits.decode_splits(2, kv_heads), kv_heads, 2)
                   for r in attn)
    else:        # 8 rows, each a sequence of its own: the 8-row decode split count
        assert "decode_attn_verify_bf16" not in {r.func for r in attn}
        assert runner.verify_splits(8) == runner.decode_splits(8)
    # one sequence stays on the kernel either way
    assert [r.func for r in _verification_graph(runner) if r.func.startswith("decode_attn")] \
        == ["decode_attn_verify_bf16"] * layers


def test_the_rope_switch_folds_qk_norm_rope_kv_into_the_verification_kernel(monkeypatch):
    runner = _speculating_runner(monkeypatch, "mock", {"ATLAS_DECODE_ATTN_VERIFY_ROPE": "1"})
    layers, d = runner.cfg.num_hidden_layers, runner.model.dims
    graph = _verification_graph(runner)
    names = [r.func for r in graph]
    assert "qk_norm_rope_kv_bf16" not in names
    fused = [r for r in graph if r.func.startswith("decode_attn")]
    assert [r.func for r in fused] == ["decode_attn_verify_rope_bf16"] * layers
    b = runner.bufs
    assert all((r.args["qkv"], r.args["q"], r.args["positions"], r.args["slots"]) ==
               (b.qkv, b.q, b.positions, b.slots) for r in fused)
    assert {(r.args["eps"], r.args["min_chunk"]) for r in fused} == {(d.eps, 64)}
    # plain decode steps keep their rope-fused decode kernel
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(5, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    (replay,) = dev.graph_launches
    assert "decode_attn_verify_rope_bf16" not in [r.func for r in replay.graph]


@pytest.mark.parametrize("q_pitch, rotary, offset, fits", [
    (128, 128, False, True), (256, 128, False, False), (128, 64, False, False),
    (128, 128, True, False)])
def test_the_rope_entry_takes_the_classic_layout_only(q_pitch, rotary, offset, fits) -> None:
    assert av.rope_fits(32, 8, 128, q_pitch, rotary, offset) is fits


def test_rope_launch_arguments_and_checks() -> None:
    dev = _HopperMock()
    kc = KernelCache(dev, KernelRoutes.from_env({}))
    p = [dev.alloc(1 << 12) for _ in range(15)]
    av.decode_attention_verify_rope(kc, 0, *p, 8, 32, 8, 128, 16, 40, 33, 0.1, 1e-6,
                                    rows_per_block=4, min_chunk=128)
    (rec,) = dev.drain_launches()
    assert (rec.func, rec.grid, rec.shared) == ("decode_attn_verify_rope_bf16", (33, 8, 2),
                                                av.verify_smem_bytes(128))
    assert (rec.args["qkv"], rec.args["q"], rec.args["out"]) == (p[0], p[1], p[14])
    assert (rec.args["min_chunk"], rec.args["eps"]) == (128, 1e-6)
    with pytest.raises(ValueError, match="decode_attention_verify_rope: qkv pointer"):
        av.decode_attention_verify_rope(kc, 0, p[0] + 8, *p[1:], 8, 32, 8, 128, 16, 40, 33,
                                        0.1, 1e-6)


def test_oracle_speculation_on_the_rope_entry_changes_no_token(monkeypatch) -> None:
    """Host backend, the rope entry's reference: greedy output with the oracle drafting
    equals the plain output."""
    runner = _speculating_runner(monkeypatch, "host", {"ATLAS_DECODE_ATTN_VERIFY_ROPE": "1"})
    assert runner.model._verify_rope_fused()
    _assert_oracle_speculation_changes_no_token(runner)


def test_the_switch_restores_one_row_a_sequence(monkeypatch) -> None:
    runner = _speculating_runner(monkeypatch, "mock", {"ATLAS_DECODE_ATTN_VERIFY": "0"})
    names = [r.func for r in _verification_graph(runner)]
    assert not runner.verify_kernel and runner.invariant_rows >= 4
    assert "decode_attn_verify_bf16" not in names
    assert names.count("qk_norm_rope_kv_bf16") == runner.cfg.num_hidden_layers


def test_oracle_speculation_on_the_verification_kernel_changes_no_token(monkeypatch) -> None:
    """Host backend, the kernel's reference: greedy output with the oracle drafting equals
    the plain output (the rows' attention is each row's decode attention)."""
    runner = _speculating_runner(monkeypatch, "host", {})
    assert runner.verify_kernel
    _assert_oracle_speculation_changes_no_token(runner)


# ---- batch 1 decodes on the tensor-core split-K kernel, its verifications stay here ------
# (the tensor-core kernel's verification entry, session 13, measured slower and was removed:
# docs/kernels.md "Removed paths")

def _long_speculating_runner(monkeypatch, backend: str, env: dict[str, str]):
    """A speculating runner whose loaded set has attention_long and attention_verify."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    cls = MockGpuBackend if backend == "mock" else HostBackend
    monkeypatch.setattr(cls, "module_names", property(
        lambda self: ["attention_verify", "attention_long"]))
    return load_runner(FIXTURE, backend=backend, max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32, num_draft_tokens=3, batch_invariant=False)


def test_batch_one_verifies_on_the_verification_kernel_beside_tensor_core_decode(
        monkeypatch) -> None:
    """Batch 1 decodes on the tensor-core kernel (min batch 1), and a verification of one
    sequence's 4 rows attends on the verification kernel's clustered entry (qk_norm_rope_kv's
    work in its blocks, one window of the 4 rows), nothing on attention_long."""
    runner = _long_speculating_runner(monkeypatch, "mock", {})
    d, layers = runner.model.dims, runner.cfg.num_hidden_layers
    assert runner.verify_kernel and runner.invariant_rows == 0
    graph = _verification_graph(runner)
    assert "qk_norm_rope_kv_bf16" not in [r.func for r in graph]
    assert not [r.func for r in graph if r.module == "attention_long"]
    attn = [r for r in graph if r.func.startswith("decode_attn")]
    assert [r.func for r in attn] == ["decode_attn_verify_cluster_bf16"] * layers
    slots = av.cluster_tile_slots(d.heads, d.kv_heads, 4)
    assert {r.grid for r in attn} == {(av.VERIFY_CLUSTER_BLOCKS, d.kv_heads * slots, 1)}
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(5, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    runner.release(5)
    (replay,) = dev.graph_launches
    plain = [r.func for r in replay.graph if r.func.startswith("decode_attn")]
    assert plain[:1] == ["decode_attn_long_rope_early_exact_d128_bf16"]  # the plain step's kernel
    assert "decode_attn_verify_cluster_bf16" not in plain


@pytest.mark.parametrize("env, kernel", [
    ({}, "decode_attn_verify_cluster_bf16"),
    ({"ATLAS_DECODE_ATTN_VERIFY_CLUSTER": "0"}, "decode_attn_verify_bf16"),
])
def test_verifications_beside_tensor_core_decode_take_the_verification_kernel(
        monkeypatch, env, kernel) -> None:
    runner = _long_speculating_runner(monkeypatch, "mock", env)
    attn = [r.func for r in _verification_graph(runner) if r.func.startswith("decode_attn")]
    assert attn == [kernel] * runner.cfg.num_hidden_layers


def test_oracle_speculation_beside_tensor_core_decode_changes_no_token(monkeypatch) -> None:
    """Host backend, the kernels' references: greedy output with the oracle drafting equals
    the plain output, plain steps on the tensor-core kernel and verifications on the
    verification kernel."""
    runner = _long_speculating_runner(monkeypatch, "host", {})
    model, d = runner.model, runner.model.dims
    assert av.uses_verify(model.kc, d.heads, d.kv_heads, d.head_dim, 4)
    assert attention_long.uses_long(model.kc, d.heads, d.kv_heads, d.head_dim,
                                    model.max_blocks * model.block_size)
    _assert_oracle_speculation_changes_no_token(runner)
