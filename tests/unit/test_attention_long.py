"""The long-context split-K decode attention (attention_long): its reference and check cases,
the routing rule and launch geometry, the wave-filling split count, and a model of the
kernel's copy / key / ring index math. There is no GPU in CI; the device check of the kernel
is tools/gpu/check_kernels.py over the same cases."""

from __future__ import annotations

import re
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
            w = np.exp(np.array(ms) - max(ms))
            out[b, h] = (w[:, None] * np.array(nums)).sum(axis=0) / (w * np.array(ls)).sum()
    return {"out": out, "part_o": part_o}


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
    (value,) = re.findall(rf"constexpr int {name} = (\d+);", SOURCE.read_text())
    return int(value)


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


@pytest.mark.parametrize("d, nbytes", [(64, 48 * 1024), (128, 96 * 1024)])
def test_shared_memory(d: int, nbytes: int) -> None:
    """3 stages of K and V [64][D] bf16; the warps' merge (o [4][16][D], m and l [4][16]
    f32) fits in the ring; two blocks fit on an SM."""
    assert attention_long.long_smem_bytes(d) == nbytes
    assert (4 * 16 * d + 2 * 4 * 16) * 4 <= nbytes
    assert 2 * (nbytes + 1024) <= 228 * 1024


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
            env: dict[str, str] | None = None, long: bool | None = None):
    kc = KernelCache(dev, KernelRoutes.from_env(env or {}))
    ptrs = [dev.alloc(1 << 12) for _ in range(9)]  # q ... part_ml, counters, out
    attention.decode_attention(kc, 0, *ptrs, 4, hq, hkv, d, 16, max_blocks, 7, d ** -0.5,
                               long=long)
    return dev.drain_launches()


def test_long_tables_take_the_long_kernel_then_the_combine() -> None:
    dev = _HopperMock()
    partials, combine = _launch(dev, max_blocks=1024)  # 16,384 keys
    assert (partials.module, partials.func) == ("attention_long", "decode_attn_long_bf16")
    assert partials.grid == (7, 8, 4) and partials.block == (128, 1, 1)
    assert partials.shared == attention_long.long_smem_bytes(128)
    assert partials.args["num_splits"] == 7 and partials.args["max_blocks"] == 1024
    assert combine.func == "decode_attn_combine_bf16"
    assert dev.opt_ins == [("decode_attn_long_bf16", attention_long.long_smem_bytes(128))]


@pytest.mark.parametrize("max_blocks, hq, hkv, d, env, func", [
    (1023, 32, 8, 128, None, "decode_attn_bf16"),              # 16,368 keys: below the rule
    (4096, 32, 8, 256, None, "decode_attn_bf16"),              # D 256: not compiled
    (4096, 34, 2, 128, None, "decode_attn_bf16"),              # group 17 > 16 rows
    (4096, 32, 2, 64, None, "decode_attn_long_bf16"),          # group 16, D 64
    (4096, 32, 8, 128, {"ATLAS_DECODE_ATTN_LONG": "0"}, "decode_attn_bf16"),
    (256, 32, 8, 128, {"ATLAS_DECODE_ATTN_LONG_MIN_KEYS": "4096"}, "decode_attn_long_bf16"),
])
def test_routing_rule(max_blocks, hq, hkv, d, env, func) -> None:
    assert _launch(_HopperMock(), max_blocks, hq, hkv, d, env)[0].func == func


def test_no_module_no_long_kernel_and_forcing_checks_the_geometry() -> None:
    assert _launch(MockGpuBackend(), 4096)[0].func == "decode_attn_bf16"
    assert _launch(_HopperMock(), 4096, long=False)[0].func == "decode_attn_bf16"
    with pytest.raises(ValueError, match="head_dim=256"):
        _launch(_HopperMock(), 16, d=256, long=True)


# ---- split count --------------------------------------------------------------------------

@pytest.mark.parametrize("batch, max_seq_len, splits", [
    (1, 32768, 33), (8, 32768, 8), (32, 32768, 2), (64, 32768, 1), (128, 32768, 1),
    (1, 16384, 32), (8, 16384, 8), (2, 32768, 30),
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
            if blocks >= slots and s < top:
                waves = -(-blocks // slots)
                assert blocks >= attention_long.LONG_WAVE_EFFICIENCY * waves * slots


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
