"""The long-context split-K decode attention (attention_long): its reference and check cases,
the routing rule and launch geometry, the wave-filling split count, and a model of the
kernel's copy / key / ring index math. There is no GPU in CI; the device check of the kernel
is tools/gpu/check_kernels.py over the same cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, round_bf16
from atlas.model.step_inputs import decode_splits
from atlas.runtime.cases.attention import _token_kv
from atlas.runtime.cases import attention_long as case_defs
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, attention, attention_long
from atlas.runtime.ops.routes import DEFAULT_DECODE_ATTN_LONG_MIN_KEYS, KernelRoutes
# the elementwise kernels' check that a .cu file declares exactly its module's ABI entries
from test_gemm_decode_sm90 import _constant as _kernel_constant
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

SOURCE = Path(__file__).resolve().parents[2] / "kernels/hopper/common/attention_long.cu"
CASES = case_defs.long_decode_cases(np.random.default_rng(7))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def _bf16_p_model(case, g, kv_lens: list[int], num_splits: int) -> dict[str, np.ndarray]:
    """The oracle's partials and output with each probability rounded to bf16 before the PV
    product (relative to its split's max) and the sums from the unrounded values: what the
    kernel's one-bf16 P changes."""
    x = case.inputs
    q = bf16_bits_to_f32(x["q"]).astype(np.float64)
    out = np.zeros_like(q)
    part_o = np.zeros(case.outputs["part_o"].shape)
    for b, n in enumerate(kv_lens):
        k, v = _token_kv(x, b, g)
        chunk, active = attention.decode_split_rule(n, num_splits)
        for h in range(g.hq):
            kvh = h // (g.hq // g.hkv)
            s = k[:, kvh] @ q[b, h] * g.scale
            nums, ls, ms = [], [], []
            for i in range(active):
                lo, hi = i * chunk, min((i + 1) * chunk, n)
                m = s[lo:hi].max()
                e = np.exp(s[lo:hi] - m)
                nums.append(round_bf16(e.astype(np.float32)).astype(np.float64) @ v[lo:hi, kvh])
                ls.append(e.sum())
                ms.append(m)
                part_o[b, h, i] = nums[-1] / ls[-1]
            if not active:  # no keys: zeros
                continue
            w = np.exp(np.array(ms) - max(ms))
            out[b, h] = (w[:, None] * np.array(nums)).sum(axis=0) / (w * np.array(ls)).sum()
    return {"out": out[..., :g.proj], "part_o": part_o}


@pytest.mark.parametrize("shape", case_defs.LONG_DECODE_SHAPES, ids=lambda s: s[0])
def test_bf16_probabilities_meet_the_case_tolerances(shape) -> None:
    """The widened tolerances cover one-bf16 P (the oracle with P rounded is within them)."""
    case = case_defs.long_decode_case(np.random.default_rng(11), *shape)
    _, g, kv_lens, num_splits = shape
    expected = case.oracle(case.inputs)
    got = _bf16_p_model(case, g, kv_lens, num_splits)
    for name in ("out", "part_o"):
        atol, rtol = case.outputs[name].tol
        mask = case.compare_mask.get(name, np.ones(expected[name].shape, bool))
        diff = np.abs(got[name] - expected[name])[mask]
        assert (diff <= atol + rtol * np.abs(expected[name][mask])).all(), name


def test_cases_cover_groups_dims_and_lengths() -> None:
    shapes = case_defs.LONG_DECODE_SHAPES
    assert {c.module for c in CASES} == {"attention_long"}
    assert {g.hq // g.hkv for _, g, _, _ in shapes} >= {1, 2, 3, 4, 8, 16}
    assert {g.head_dim for _, g, _, _ in shapes} == set(attention_long.LONG_HEAD_DIMS)
    assert {g.block_size for _, g, _, _ in shapes} >= {7, 16, 32}
    rules = [(n, *attention.decode_split_rule(n, s)) for _, _, lens, s in shapes for n in lens]
    assert max(chunk for _, chunk, _ in rules) > 20 * attention_long.LONG_TILE_KEYS  # laps
    # a last split with fewer keys than one warp's 16, beside a 1-key sequence
    assert any(n - (active - 1) * chunk < 16 for n, chunk, active in rules if n > chunk)
    assert any(n == 1 for n, _, _ in rules)


def test_cuda_entry_points_declare_exactly_the_abi() -> None:
    _declares_abi("attention_long")


def _constant(name: str) -> int:
    return _kernel_constant(name, SOURCE)


def test_launch_constants_match_the_kernel() -> None:
    assert attention_long.LONG_THREADS == _constant("kThreads")
    assert attention_long.LONG_TILE_KEYS == _constant("kBKV")
    assert attention_long.LONG_STAGES == _constant("kStages")
    assert attention_long.LONG_MAX_GROUP == _constant("kMaxGroup")
    assert attention.DECODE_MIN_KEYS_PER_SPLIT == _constant("kMinKeysPerSplit")
    assert "__launch_bounds__(kThreads, 2)" in SOURCE.read_text()
    assert attention_long.LONG_BLOCKS_PER_SM == 2
    assert DEFAULT_DECODE_ATTN_LONG_MIN_KEYS == attention_long.LONG_CONTEXT_KEYS
    from atlas.bench.kernel_shapes import LONG_CONTEXT_KEYS
    assert LONG_CONTEXT_KEYS == attention_long.LONG_CONTEXT_KEYS


@pytest.mark.parametrize("d, rope, nbytes, per_sm", [
    (64, False, 48 * 1024, 2), (128, False, 96 * 1024, 2), (256, False, 192 * 1024 + 8448, 1),
    (64, True, 48 * 1024 + 2304 + 768, 2), (128, True, 96 * 1024 + 4352 + 1536, 2)])
def test_shared_memory(d: int, rope: bool, nbytes: int, per_sm: int) -> None:
    """3 stages of K and V [64][D] bf16 (and at D 256 or with rope the [16][D + 8] bf16 Q
    tile, with rope the stage: the step's k and v rows and the two norm weights, D bf16
    each, and the cos/sin row, D f32); the warps' merge (o [4][16][D], m and l [4][16] f32)
    fits in the ring; the blocks of an SM fit."""
    assert attention_long.long_smem_bytes(d, rope) == nbytes
    assert attention_long.long_blocks_per_sm(d) == per_sm
    assert (4 * 16 * d + 2 * 4 * 16) * 4 <= 3 * 2 * 64 * d * 2
    assert per_sm * (nbytes + 1024) <= 228 * 1024
    assert f"__launch_bounds__(kThreads, {per_sm})" in SOURCE.read_text()


# ---- routing and launch ------------------------------------------------------------------

class _HopperMock(MockGpuBackend):
    """A mock device whose loaded PTX set has attention and attention_long."""

    def __init__(self) -> None:
        super().__init__()
        self.opt_ins: list[tuple[str, int]] = []

    @property
    def module_names(self) -> list[str]:
        return ["attention", "attention_long"]

    def set_max_dynamic_shared(self, handle, nbytes: int) -> None:
        self.opt_ins.append((handle.func, nbytes))


def _launch(dev: MockGpuBackend, max_blocks: int, hq: int = 32, hkv: int = 8, d: int = 128,
            env: dict[str, str] | None = None, long: bool | None = None, num_seqs: int = 4,
            splits: int = 7):
    kc = KernelCache(dev, KernelRoutes.from_env(env or {}))
    ptrs = [dev.alloc(1 << 12) for _ in range(9)]  # q ... part_ml, counters, out
    attention.decode_attention(kc, 0, *ptrs, num_seqs, hq, hkv, d, 16, max_blocks, splits,
                               d ** -0.5, long=long)
    return dev.drain_launches()


def test_long_tables_take_the_long_kernel_then_the_combine() -> None:
    """7 splits' partials, then the combine launch (no counters) with
    ATLAS_DECODE_ATTN_LONG_MERGE=0; by default at 4 sequences (routes.
    DEFAULT_DECODE_ATTN_LONG_MERGE_MAX_SEQS) the kernel merges them itself (the counters
    passed, no combine)."""
    dev = _HopperMock()
    partials, combine = _launch(dev, max_blocks=1024,  # 16,384 keys
                                env={"ATLAS_DECODE_ATTN_LONG_MERGE": "0"})
    assert (partials.module, partials.func) == ("attention_long", "decode_attn_long_bf16")
    assert partials.grid == (7, 8, 4) and partials.block == (128, 1, 1)
    assert partials.shared == attention_long.long_smem_bytes(128)
    assert partials.args["num_splits"] == 7 and partials.args["max_blocks"] == 1024
    assert partials.args["counters"] == 0
    assert combine.func == "decode_attn_combine_early_bf16"  # 4 sequences
    assert combine.args["num_splits"] == 7
    assert dev.opt_ins == [("decode_attn_long_bf16", attention_long.long_smem_bytes(128))]
    for env in (None, {"ATLAS_DECODE_ATTN_LONG_MERGE": "1"}):
        (partials,) = _launch(dev, max_blocks=1024, env=env)
        assert partials.args["counters"] and partials.args["out"]


@pytest.mark.parametrize("hq, hkv, d, merges", [
    (16, 8, 128, True),    # 64 items (Qwen3-0.6B's heads): one a thread of the last block
    (32, 8, 128, True),    # 128 (Qwen3-8B's): one a thread
    (32, 4, 128, False),   # 256: two a thread, the combine
    (16, 2, 256, False),   # Qwen3.5-35B-A3B's 512 (gpu93 / gpu94: the combine 0.7% faster)
])
def test_batch_one_merges_in_kernel_only_one_item_a_thread(hq, hkv, d, merges) -> None:
    kc = KernelCache(HostBackend(), KernelRoutes())
    g = hq // hkv
    assert attention_long.merges_splits(kc, 19, 1, g, d, rope=False) is merges
    # the rope-fused entries always merge at batch 1 (gpu94: Qwen3-30B-A3B +4.2% without)
    assert attention_long.merges_splits(kc, 19, 1, g, d, rope=True)
    # batches of up to 8 merge as batch 1 does (gpu106), larger ones on the combine
    assert attention_long.merges_splits(kc, 19, 8, g, d, rope=True)
    assert attention_long.merges_splits(kc, 19, 8, g, d, rope=False) is merges
    assert not attention_long.merges_splits(kc, 19, 9, g, d, rope=True)
    assert not attention_long.merges_splits(kc, 1, 1, g, d, rope=False)  # one split
    for value, forced in (("1", True), ("0", False)):
        routes = KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LONG_MERGE": value})
        kc = KernelCache(HostBackend(), routes)
        assert attention_long.merges_splits(kc, 19, 1, g, d, rope=False) is forced
        assert attention_long.merges_splits(kc, 19, 1, g, d, rope=True) is forced


def test_batch_one_launches_merge_or_combine_never_both() -> None:
    """At batch 1 over long tables: the rope-fused entry (Qwen3-30B-A3B's heads) merges in
    its last split and no combine follows; the plain D-256 entry (Qwen3.5's group of 8) gets
    no counters and the combine follows. A launch both merging and combined would re-merge
    whole-tile partials under the combine's 32-key split rule."""
    dev = _HopperMock()
    kc = KernelCache(dev, KernelRoutes())
    ptrs = [dev.alloc(1 << 12) for _ in range(14)]  # qkv ... counters, out
    attention.decode_attention_rope(kc, 0, *ptrs, 1, 32, 4, 128, 16, 1024, 16, 128 ** -0.5,
                                    1e-6)
    (merged,) = dev.drain_launches()
    assert merged.func.startswith("decode_attn_long_rope") and merged.args["counters"]
    (partials, combine) = _launch(dev, max_blocks=1024, hq=16, hkv=2, d=256, num_seqs=1)
    assert partials.func == "decode_attn_long_d256_bf16" and partials.args["counters"] == 0
    assert combine.func == "decode_attn_combine_bf16"


@pytest.mark.parametrize("max_blocks, hq, hkv, d, env, func", [
    (1023, 32, 8, 128, {"ATLAS_DECODE_ATTN_LONG_MIN_BATCH": "0"},
     "decode_attn_bf16"),                                      # 16,368 keys: below the rule
    (4096, 16, 2, 256, None, "decode_attn_long_d256_bf16"),    # D 256: its own entry point
    (4096, 34, 2, 128, None, "decode_attn_bf16"),              # group 17 > 16 rows
    (4096, 32, 2, 64, None, "decode_attn_long_bf16"),          # group 16, D 64
    (4096, 32, 8, 128, {"ATLAS_DECODE_ATTN_LONG": "0"}, "decode_attn_bf16"),
    (256, 32, 8, 128, {"ATLAS_DECODE_ATTN_LONG_MIN_KEYS": "4096"}, "decode_attn_long_bf16"),
])
def test_routing_rule(max_blocks, hq, hkv, d, env, func) -> None:
    assert _launch(_HopperMock(), max_blocks, hq, hkv, d, env)[0].func == func


def test_no_module_no_long_kernel_and_forcing_checks_the_geometry() -> None:
    assert _launch(MockGpuBackend(), 4096)[0].func == "decode_attn_bf16"
    assert _launch(MockGpuBackend(), 64, num_seqs=64)[0].func == "decode_attn_bf16"
    assert _launch(_HopperMock(), 4096, long=False)[0].func == "decode_attn_bf16"
    with pytest.raises(ValueError, match="group 17"):
        _launch(_HopperMock(), 16, hq=34, hkv=2, long=True)


# ---- batched decode: routing by batch, the split count, no combine after one split -------

@pytest.mark.parametrize("num_seqs, hq, hkv, d, splits, env, want", [
    # Qwen3-8B batch 64 (the throughput step) at an 8,192-key engine: one split, no combine
    (64, 32, 8, 128, 1, None, [("decode_attn_long_bf16", (1, 8, 64))]),
    # batch 8: the model's 5 (2x SMs for the CUDA-core kernel) -> 4 (256 of 264 slots),
    # merged by the last split (gpu106); with ATLAS_DECODE_ATTN_LONG_MERGE=0 by the combine
    (8, 32, 8, 128, 5, None, [("decode_attn_long_bf16", (4, 8, 8))]),
    (8, 32, 8, 128, 5, {"ATLAS_DECODE_ATTN_LONG_MERGE": "0"},
     [("decode_attn_long_bf16", (4, 8, 8)), ("decode_attn_combine_early_bf16", (1, 32, 8))]),
    # Qwen3.5-35B-A3B's D 256 at batch 8: 17 -> 8 (128 blocks of 132 one-per-SM slots)
    (8, 16, 2, 256, 17, None,
     [("decode_attn_long_d256_bf16", (8, 2, 8)), ("decode_attn_combine_early_bf16", (1, 16, 8))]),
    (8, 16, 2, 256, 17, {"ATLAS_DECODE_ATTN_LONG_MERGE": "1"},
     [("decode_attn_long_d256_bf16", (8, 2, 8))]),
    # batch 1 too (session 13's default, min batch 1): 8 kv heads fill no wave, so the most
    # splits the 512 keys and the given count allow, merged by the last split (no combine
    # launch in batch 1's latency chain) unless the merge switch is off
    (1, 32, 8, 128, 5, None, [("decode_attn_long_bf16", (5, 8, 1))]),
    (1, 32, 8, 128, 5, {"ATLAS_DECODE_ATTN_LONG_MERGE": "0"},
     [("decode_attn_long_bf16", (5, 8, 1)), ("decode_attn_combine_bf16", (1, 32, 1))]),
    # below the batch rule (session 12's min batch 2): batch 1's kernels, num_splits as given
    (1, 32, 8, 128, 5, {"ATLAS_DECODE_ATTN_LONG_MIN_BATCH": "2"},
     [("decode_attn_bf16", (5, 8, 1))]),
    # the switch back to the session-7 routing
    (64, 32, 8, 128, 1, {"ATLAS_DECODE_ATTN_LONG_MIN_BATCH": "0"},
     [("decode_attn_bf16", (1, 8, 64))]),
    (16, 32, 8, 128, 3, {"ATLAS_DECODE_ATTN_LONG_MIN_BATCH": "32"},
     [("decode_attn_bf16", (3, 8, 16))]),
])
def test_batches_route_to_the_long_kernel(num_seqs, hq, hkv, d, splits, env, want) -> None:
    launches = _launch(_HopperMock(), 512, hq, hkv, d, env, num_seqs=num_seqs, splits=splits)
    assert [(r.func, r.grid) for r in launches] == want
    if want[0][0].startswith("decode_attn_long"):
        assert launches[0].args["num_splits"] == want[0][1][0]
        assert launches[0].shared == attention_long.long_smem_bytes(d)
    if len(want) == 2:
        assert launches[1].args["num_splits"] == want[0][1][0]  # the combine's stride


def test_batched_splits_may_use_the_buffers_capacity() -> None:
    """max_splits (the partial buffers' splits a row) lifts the cap of the model's count:
    batch 48 at D 128 gets 2 splits (768 blocks, 97% of 3 waves) instead of 1 (384, 73% of
    2); without it the model's 1 stands."""
    dev = _HopperMock()
    kc = KernelCache(dev)
    ptrs = [dev.alloc(1 << 12) for _ in range(9)]
    for max_splits, want in ((33, [(2, 8, 48), (1, 32, 48)]), (0, [(1, 8, 48)])):
        attention.decode_attention(kc, 0, *ptrs, 48, 32, 8, 128, 16, 512, 1, 0.088,
                                   max_splits=max_splits)
        assert [r.grid for r in dev.drain_launches()] == want


def test_rope_fuses_into_the_long_kernel_one_key_a_sequence() -> None:
    """Where decode_attention takes the long kernel, decode_attention_rope runs its rope
    entry: one key a sequence (a fused verification step unfuses), head_dim 64 / 128."""
    kc = KernelCache(_HopperMock())
    assert all(attention.rope_fusable(kc, 32, 8, 128, 128, 128, False, 8192, n)
               for n in (1, 7, 8, 64))
    assert not attention.rope_fusable(kc, 32, 8, 128, 128, 128, False, 8192, 8, step_keys=4)
    assert not attention.rope_fusable(kc, 32, 8, 128, 128, 128, False, 8192, 1, step_keys=4)
    assert not attention.rope_fusable(kc, 16, 2, 256, 256, 256, False, 8192, 2)
    assert not attention.rope_fusable(kc, 16, 2, 256, 256, 256, False, 8192, 1)
    assert not attention.rope_fusable(kc, 32, 8, 128, 128, 64, False, 8192, 64)  # partial
    # batch 1 on the CUDA-core kernels (min batch 2): its rope-fused kernel takes both
    old = KernelCache(_HopperMock(), KernelRoutes.from_env(
        {"ATLAS_DECODE_ATTN_LONG_MIN_BATCH": "2"}))
    assert attention.rope_fusable(old, 32, 8, 128, 128, 128, False, 8192, 1, step_keys=4)
    assert attention.rope_fusable(old, 16, 2, 256, 256, 256, False, 8192, 1)


def _rope_launch(env: dict[str, str] | None, num_seqs: int, splits: int, max_blocks: int = 512,
                 long: bool | None = None):
    dev = _HopperMock()
    kc = KernelCache(dev, KernelRoutes.from_env(env or {}))
    ptrs = [dev.alloc(1 << 12) for _ in range(14)]  # qkv ... counters, out
    attention.decode_attention_rope(kc, 0, *ptrs, num_seqs, 32, 8, 128, 16, max_blocks,
                                    splits, 0.088, 1e-6, long=long)
    return dev.drain_launches()


@pytest.mark.parametrize("num_seqs, splits, env, want", [
    # batches of exact heads on the staged entry's one-dim twin (gpu135)
    (64, 1, None, [("decode_attn_long_rope_staged_exact_d128_bf16", (1, 8, 64))]),
    (8, 5, None, [("decode_attn_long_rope_staged_exact_d128_bf16", (4, 8, 8))]),  # merged
    (8, 5, {"ATLAS_DECODE_ATTN_LONG_MERGE": "0"},
     [("decode_attn_long_rope_staged_exact_d128_bf16", (4, 8, 8)),
      ("decode_attn_combine_early_bf16", (1, 32, 8))]),
    (64, 1, {"ATLAS_DECODE_ATTN_LONG_BATCHED_ONE_DIM": "0"},
     [("decode_attn_long_rope_staged_bf16", (1, 8, 64))]),
    # the waiting prologue's twin: the same grid, shared memory and arguments
    (64, 1, {"ATLAS_DECODE_ATTN_LONG_STAGED": "0"},
     [("decode_attn_long_rope_wait_bf16", (1, 8, 64))]),
    (8, 5, {"ATLAS_DECODE_ATTN_LONG_STAGED": "0", "ATLAS_DECODE_ATTN_LONG_MERGE": "1"},
     [("decode_attn_long_rope_wait_bf16", (4, 8, 8))]),
    # merged by its last split; one sequence reads all but the rows before its wait (heads
    # of head_dim elements without sinks: the exact twin)
    (1, 5, None, [("decode_attn_long_rope_early_exact_d128_bf16", (5, 8, 1))]),
    (1, 5, {"ATLAS_DECODE_ATTN_LONG_EARLY": "0"},
     [("decode_attn_long_rope_staged_exact_d128_bf16", (5, 8, 1))]),
    (1, 5, {"ATLAS_DECODE_ATTN_LONG_MIN_BATCH": "2"}, [("decode_attn_rope_bf16", (5, 8, 1))]),
    (64, 1, {"ATLAS_DECODE_ATTN_LONG_MIN_BATCH": "0"}, [("decode_attn_rope_bf16", (1, 8, 64))]),
])
def test_rope_batches_route_to_the_long_rope_entry(num_seqs, splits, env, want) -> None:
    launches = _rope_launch(env, num_seqs, splits)
    assert [(r.func, r.grid) for r in launches] == want
    if want[0][0].startswith("decode_attn_long_rope"):
        first = launches[0]
        assert first.shared == attention_long.long_smem_bytes(128, rope=True)
        assert first.args["out"] and first.args["eps"] == pytest.approx(1e-6)
        # the split counters where the kernel merges several splits itself
        assert bool(first.args["counters"]) == (len(want) == 1 and want[0][1][0] > 1)


def test_rope_at_d256_keeps_the_cuda_core_kernel() -> None:
    """The rope entry has no D 256 (Qwen3.5's partial rotary never fuses): a batch-8 D-256
    decode_attention_rope stays on decode_attn_rope_bf16."""
    dev = _HopperMock()
    ptrs = [dev.alloc(1 << 12) for _ in range(14)]
    attention.decode_attention_rope(KernelCache(dev), 0, *ptrs, 8, 16, 2, 256, 16, 512, 3,
                                    0.06, 1e-6)
    assert [r.func for r in dev.drain_launches()] == ["decode_attn_rope_bf16"]


def test_rope_long_context_batch_one_keeps_the_models_splits() -> None:
    """A long-context engine (16,384-key tables) at batch 1 takes the rope entry on the
    model's split count (the wave-filling count is the same 30 there) on the early entry,
    its last split merging (batch 1's default); with the merge off, the combine after it."""
    (merged,) = _rope_launch(None, 1, 30, max_blocks=1024)
    assert (merged.func, merged.grid) == ("decode_attn_long_rope_early_exact_d128_bf16",
                                          (30, 8, 1))
    assert merged.args["counters"] != 0
    (partials, combine) = _rope_launch({"ATLAS_DECODE_ATTN_LONG_MERGE": "0"}, 1, 30,
                                       max_blocks=1024)
    assert combine.args["num_splits"] == 30 and partials.args["counters"] == 0


def test_one_split_launches_write_the_output() -> None:
    """The kernel's `out` argument is decode_attention's; a one-split launch gets no
    counters (nothing to merge), a forced launch keeps num_splits as given."""
    dev = _HopperMock()
    (one,) = _launch(dev, 64, long=True, splits=1)
    assert one.func == "decode_attn_long_bf16" and one.args["num_splits"] == 1
    assert one.args["out"] and one.args["out"] != one.args["part_o"]
    assert one.args["counters"] == 0
    partials, _ = _launch(dev, 64, long=True, num_seqs=64, splits=3)
    assert partials.args["num_splits"] == 3


# ---- split count --------------------------------------------------------------------------

@pytest.mark.parametrize("batch, max_seq_len, splits", [
    (1, 32768, 30), (8, 32768, 4), (32, 32768, 1), (64, 32768, 1), (128, 32768, 1),
    (1, 16384, 30), (8, 16384, 4), (2, 32768, 15), (16, 32768, 2),
    (1, 8192, 33), (8, 8192, 5), (32, 8192, 2),  # below LONG_CONTEXT_KEYS: the 2x-SMs rule
])
def test_decode_splits(batch: int, max_seq_len: int, splits: int) -> None:
    assert decode_splits(batch, 8, max_seq_len, 132) == splits


def test_long_splits_fill_whole_waves_and_never_exceed_batch_one() -> None:
    slots = 132 * attention_long.LONG_BLOCKS_PER_SM
    for kv_heads in (1, 2, 4, 8):
        top = decode_splits(1, kv_heads, 32768, 132)
        for batch in range(1, 257):
            s = decode_splits(batch, kv_heads, 32768, 132)
            assert 1 <= s <= top
            blocks = batch * kv_heads * s
            if s < top:
                waves = -(-blocks // slots)
                assert blocks >= attention_long.LONG_WAVE_EFFICIENCY * waves * slots


@pytest.mark.parametrize("pairs, d, cap, splits", [
    (512, 128, 1, 1), (64, 128, 5, 4), (16, 256, 17, 8), (32, 256, 9, 4), (128, 256, 3, 1),
    (32, 128, 9, 8), (16, 128, 17, 15), (64, 256, 2, 2), (8, 128, 64, 16),
])
def test_batched_splits_fill_whole_waves(pairs: int, d: int, cap: int, splits: int) -> None:
    """(sequence, kv head) pairs x splits fill the slots of d's blocks per SM to >= 90% in
    whole waves, at most the cap and max_seq_len // 512 (8,192 keys: 16)."""
    got = attention_long.long_decode_splits(pairs, 8192, 132, cap=cap,
                                            blocks_per_sm=attention_long.long_blocks_per_sm(d))
    assert got == splits


# ---- model of the kernel's index math -----------------------------------------------------

def test_copies_cover_each_tile_once() -> None:
    """Thread t copies chunk t % C of rows t / C + j * (128 / C), j < R: every (row, chunk)
    of a [64][D] tile exactly once."""
    threads, keys = attention_long.LONG_THREADS, attention_long.LONG_TILE_KEYS
    for d in attention_long.LONG_HEAD_DIMS:
        chunks = d // 8
        rows_per_thread = keys * chunks // threads
        seen = [(t // chunks + j * (threads // chunks), t % chunks)
                for t in range(threads) for j in range(rows_per_thread)]
        assert sorted(seen) == [(r, c) for r in range(keys) for c in range(chunks)]


def test_warp_fragments_cover_each_key_once() -> None:
    """S's C fragments: warp w, lane (g, c), n-tile j, element e hold key w * 16 + j * 8 +
    2c + e of the tile (rows g and g + 8 are heads): the 4 warps' 16 keys cover the 64."""
    keys = sorted(w * 16 + j * 8 + 2 * c + e
                  for w in range(4) for c in range(4) for j in range(2) for e in range(2))
    assert keys == list(range(attention_long.LONG_TILE_KEYS))


@pytest.mark.parametrize("n_tiles", [1, 2, 3, 4, 9])
def test_ring_schedule(n_tiles: int) -> None:
    """Replays the ring: prologue groups 0..S-2 hold tiles 0..S-2; iteration t waits until
    at most S-2 groups are pending, then (after the barrier) issues tile t + S - 1 into the
    slot tile t - 1 used. Tile t must be complete and in slot t % S when read, and no copy
    may land in a slot whose tile is unread."""
    stages = attention_long.LONG_STAGES
    groups: list[list[int]] = [[t] if t < n_tiles else [] for t in range(stages - 1)]
    slot: dict[int, int] = {t: t for t in range(min(stages - 1, n_tiles))}
    for t in range(n_tiles):
        complete = len(groups) - (stages - 2)
        assert t in [x for grp in groups[:complete] for x in grp]
        assert slot[t % stages] == t
        nxt = t + stages - 1
        if nxt < n_tiles:
            assert nxt % stages == (t - 1) % stages  # the slot read by the previous iteration
            slot[nxt % stages] = nxt
        groups.append([nxt] if nxt < n_tiles else [])


@pytest.mark.parametrize("num_seqs, splits, env, want", [
    (1, 30, {}, "decode_attn_long_rope_early_trace_bf16"),   # what batch 1 runs, traced
    # before an o_proj of LATE_TRIGGER_MIN_O_BYTES (model/load.py sets the route)
    (1, 30, {"ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER": "1"},
     "decode_attn_long_rope_early_late_trace_bf16"),
    (64, 1, {}, "decode_attn_long_rope_staged_trace_bf16"),  # what batches run, traced
])
def test_a_traced_rope_launch_takes_the_twin_of_what_the_routes_run(num_seqs, splits, env,
                                                                     want) -> None:
    dev = _HopperMock()
    kc = KernelCache(dev, KernelRoutes.from_env(env))
    ptrs = [dev.alloc(1 << 12) for _ in range(15)]  # qkv ... counters, out, trace
    attention.decode_attention_rope(kc, 0, *ptrs[:14], num_seqs, 32, 8, 128, 16, 512, splits,
                                    0.088, 1e-6, trace=ptrs[14], long=True)
    (launch,) = dev.drain_launches()
    assert launch.func == want and launch.grid == (splits, 8, num_seqs)
    assert launch.args["trace"] == ptrs[14]


def test_a_traced_d256_launch_takes_its_twin_and_others_refuse() -> None:
    """decode_attention's trace on the long kernel: Qwen3.5's D-256 entry runs its phase-traced
    twin (the combine after it, as untraced); a D-128 long launch has no plain traced twin."""
    dev = _HopperMock()
    kc = KernelCache(dev, KernelRoutes.from_env({}))
    ptrs = [dev.alloc(1 << 12) for _ in range(10)]  # q ... counters, out, trace
    attention.decode_attention(kc, 0, *ptrs[:9], 1, 16, 2, 256, 16, 1024, 19, 0.0625,
                               long=True, trace=ptrs[9])
    launch, combine = dev.drain_launches()
    assert launch.func == "decode_attn_long_d256_trace_bf16" and launch.grid == (19, 2, 1)
    assert launch.args["trace"] == ptrs[9] and launch.args["counters"] == 0
    assert combine.func == "decode_attn_combine_bf16"
    with pytest.raises(ValueError, match="traced twin"):
        attention.decode_attention(kc, 0, *ptrs[:9], 1, 32, 8, 128, 16, 1024, 19, 0.088,
                                   long=True, trace=ptrs[9])
