"""The TMA decode GEMM's stream-K entries (gemm_decode_tma.cu "Stream-K", ops/matmul_decode.py
STREAMK): the unit partition the kernel walks (transliterated: every unit computed once, every
partial consumed by exactly one owner, in block order), the tuner's candidate and tie rule,
the workspace, and the launch a tuned stream-K pick makes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from atlas.runtime.ops import KernelCache, matmul_decode
from atlas.runtime.ops import decode_gemm_tune as tune
from atlas.runtime.ops.decode_gemm_tune import TuneEntry, TuneKey
from atlas.runtime.ops.matmul_decode import STREAMK

from test_decode_gemm_tune import _operands, _TimedMock

KERNEL = Path(__file__).resolve().parents[2] / "kernels/hopper/common/gemm_decode_tma.cu"


def _start(units: int, j: int, blocks: int) -> int:
    """streamk_start: the first unit of block j."""
    return units * j // blocks


def _walk(tiles: int, k_tiles: int, blocks: int) -> dict[int, list[tuple[str, int, int, int]]]:
    """Each block's segments as the kernel's consumer loop walks them: (what it does with the
    segment: "store", "publish" or "own", tile, first k-tile, end k-tile)."""
    units = tiles * k_tiles
    out: dict[int, list[tuple[str, int, int, int]]] = {}
    for b in range(blocks):
        u, u1 = _start(units, b, blocks), _start(units, b + 1, blocks)
        segs = []
        while u < u1:
            tile = u // k_tiles
            kt_begin = u - tile * k_tiles
            kt_end = kt_begin + (u1 - u) if u1 - u < k_tiles - kt_begin else k_tiles
            what = ("publish" if kt_begin > 0 else "own" if kt_end < k_tiles else "store")
            segs.append((what, tile, kt_begin, kt_end))
            u += kt_end - kt_begin
        out[b] = segs
    return out


def _owner_reads(b: int, tile: int, k_tiles: int, units: int, blocks: int) -> list[int]:
    """The blocks whose partials owner b adds for `tile`, in the kernel's order."""
    tile_end = (tile + 1) * k_tiles
    reads, j = [], b + 1
    while j < blocks and _start(units, j, blocks) < tile_end:
        if _start(units, j + 1, blocks) != _start(units, j, blocks):
            reads.append(j)
        j += 1
    return reads


@pytest.mark.parametrize("tiles, k_tiles, blocks", [
    (48, 64, 132),    # Qwen3-8B qkv at 64 rows: every tile over ~3 blocks
    (32, 192, 132),   # down (k = 12,288)
    (192, 64, 132),   # gate_up: 1.45 tiles a block
    (8, 64, 11), (5, 9, 7), (2, 64, 40), (1, 4, 9), (1187, 64, 132), (3, 1, 5),
])
def test_every_unit_once_and_every_partial_read_by_one_owner(tiles, k_tiles, blocks) -> None:
    units = tiles * k_tiles
    walk = _walk(tiles, k_tiles, blocks)
    covered: dict[int, list[tuple[int, int]]] = {t: [] for t in range(tiles)}
    readers: dict[int, list[int]] = {}
    for b, segs in walk.items():
        for i, (what, tile, kt0, kt1) in enumerate(segs):
            covered[tile].append((kt0, kt1))
            if what == "publish":
                assert i == 0, "only a block's first segment starts inside a tile"
            if what == "own":
                assert i == len(segs) - 1, "the owner's segment is the block's last"
                for j in _owner_reads(b, tile, k_tiles, units, blocks):
                    readers.setdefault(j, []).append(b)
                    what_j, tile_j, _, _ = walk[j][0]
                    assert (what_j, tile_j) == ("publish", tile)
    for tile, spans in covered.items():
        spans.sort()
        assert spans[0][0] == 0 and spans[-1][1] == k_tiles
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), "no gap, no overlap"
    publishers = {b for b, segs in walk.items() if segs and segs[0][0] == "publish"}
    assert set(readers) == publishers
    assert all(len(owners) == 1 for owners in readers.values())
    # the owner's sum runs over the tile's k-tiles in order: its own, then each reader's
    for b, segs in walk.items():
        if segs and segs[-1][0] == "own":
            _, tile, _, end = segs[-1]
            for j in _owner_reads(b, tile, k_tiles, units, blocks):
                assert walk[j][0][2] == end
                end = walk[j][0][3]
            assert end == k_tiles


def test_the_ring_and_partial_tile_fit_and_mirror_the_kernel() -> None:
    source = KERNEL.read_text()
    assert f"kStreamkMaxCols = {matmul_decode.STREAMK_MAX_COLS};" in source
    for cols in (16, 32, 64, 128):
        for groups in (1, 2):
            share = (matmul_decode.PAIR_BLOCK_SHARED
                     if matmul_decode.blocks_per_sm(cols, groups) == 2
                     else matmul_decode.SOLO_BLOCK_SHARED)
            stages = matmul_decode.streamk_stages(cols, groups)
            assert stages >= 3
            assert (matmul_decode.streamk_smem_bytes(cols, groups)
                    + matmul_decode.TMA_BARRIER_BYTES <= share)
    # Qwen3-8B at 64 rows keeps the whole 8-slot ring beside its partial tile
    assert matmul_decode.streamk_stages(64, 2) == matmul_decode.ring_stages(
        64, 2, matmul_decode.TMA_MAX_STAGES) == 8
    # the workspace: partials of two one-warpgroup blocks an SM (= one of two warpgroups)
    assert matmul_decode.streamk_flags_offset(132) == 132 * 2 * 128 * 64 * 4
    assert matmul_decode.streamk_workspace_bytes(132) == 132 * 2 * 128 * 64 * 4 + 264 * 4
    assert re.search(r"gemm_decode_tma_geglu_bf16_streamk\(", source)


def test_stream_k_is_a_candidate_of_the_tma_kernel_up_to_128_rows() -> None:
    picks = matmul_decode.valid_picks(64, 4096, tma=True, streamk=True)
    assert (STREAMK, 1) in picks and (STREAMK, 2) in picks
    assert (STREAMK, 2) not in matmul_decode.valid_picks(64, 4096, tma=True)
    assert all(s != STREAMK for s, _ in matmul_decode.valid_picks(129, 4096, True, True))
    assert all(s != STREAMK for s, _ in matmul_decode.valid_picks(64, 4096, False, True))


def test_ties_keep_a_cluster_split_and_a_faster_stream_k_wins() -> None:
    assert tune.choose({(2, 2): 100.0, (STREAMK, 2): 99.5, (3, 2): 99.8}, (4, 2)) == (2, 2)
    assert tune.choose({(2, 2): 100.0, (STREAMK, 2): 85.0}, (2, 2)) == (STREAMK, 2)
    assert TuneKey(64, 4096, 4096, False, 0, True, True, True).text().endswith(
        " persistent=1 streamk=1")


_QKV = (64, 6144, 4096)  # Qwen3-8B qkv at 64 rows: 48 two-warpgroup tiles x 64 k-tiles


def test_a_tuned_stream_k_pick_launches_every_block_with_the_workspace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATLAS_TUNE_CACHE", str(tmp_path / "tune.json"))
    dev = _TimedMock({("gemm_decode_tma_bf16_streamk", 288): 10.0})  # the rest: 100 us
    kc = KernelCache(dev)
    x, w, y = _operands(dev, *_QKV)
    matmul_decode.decode_gemm(kc, 5, x, w, y, *_QKV)
    last = dev.drain_launches()[-1]
    assert (last.func, last.block[0], last.stream) == ("gemm_decode_tma_bf16_streamk", 288, 5)
    assert last.grid[0] == min(kc.facts.sm_count, 48 * 64)  # one two-warpgroup block an SM
    work = last.args["work"]
    assert last.args["flags"] == work + matmul_decode.streamk_flags_offset(kc.facts.sm_count)
    # one workspace for every launch of the cache (the tuner's timed ones too)
    matmul_decode.decode_gemm(kc, 5, x, w, y, 64, 4096, 4096)
    streamk = [r for r in dev.drain_launches() if r.func.endswith("_streamk")]
    streamk += [r for g in dev.graph_launches for r in g.graph if r.func.endswith("_streamk")]
    assert len(streamk) > 2 and all(r.args["work"] == work for r in streamk)


def test_a_stream_k_pick_inside_a_capture_without_a_workspace_runs_the_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATLAS_TUNE_CACHE", str(tmp_path / "tune.json"))
    dev = _TimedMock()
    kc = KernelCache(dev)
    assert kc.decode_tune is not None
    key = TuneKey(64, *_QKV[1:], False, 0, True, True, True)
    kc.decode_tune.table.put(
        tune.table_key(kc.facts.name, kc.facts.sm_count, "gemm_decode_tma-sha", key),
        TuneEntry(STREAMK, 2, 10.0, 2, 2, 14.0, 10.0))
    x, w, y = _operands(dev, *_QKV)
    dev.begin_capture(7)
    matmul_decode.decode_gemm(kc, 7, x, w, y, *_QKV)
    dev.end_capture(7)
    assert all(not r.func.endswith("_streamk") for g in [dev.launches] for r in g)
    # outside the capture the table's pick runs, and its workspace is made then
    matmul_decode.decode_gemm(kc, 5, x, w, y, *_QKV)
    assert dev.drain_launches()[-1].func == "gemm_decode_tma_bf16_streamk"


def test_the_switch_keeps_stream_k_out_of_the_candidates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATLAS_TUNE_CACHE", str(tmp_path / "tune.json"))
    monkeypatch.setenv("ATLAS_DECODE_GEMM_STREAMK", "0")
    dev = _TimedMock({("gemm_decode_tma_bf16_streamk", 288): 1.0})
    kc = KernelCache(dev)
    x, w, y = _operands(dev, *_QKV)
    matmul_decode.decode_gemm(kc, 5, x, w, y, *_QKV)
    timed = {r.func for g in dev.graph_launches for r in g.graph}
    assert timed and not any(f.endswith("_streamk") for f in timed)
