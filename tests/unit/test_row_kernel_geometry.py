"""The row-wise kernels' launch geometry. RMSNorm block size (ops/norm.rmsnorm_threads):
one 16-byte vector a thread for a decode batch unless ATLAS_NORM_DECODE_VECS says otherwise
(the A/B of the batch-1 add + RMSNorm's time), RMSNORM_MAX_VECS for many rows whatever it
says. Grid (ops/norm.rmsnorm_grid, ops/embedding.embedding_geometry): a block a row, or
ATLAS_ROWS_PER_BLOCK rows of a prefill's plain norm and embedding gather."""

from __future__ import annotations

import pytest

from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, embedding, norm
from atlas.runtime.ops.routes import KernelRoutes


def test_the_switch_parses_one_to_four_vectors() -> None:
    parse = lambda v: KernelRoutes.from_env({"ATLAS_NORM_DECODE_VECS": v}).norm_decode_vecs  # noqa
    assert KernelRoutes.from_env({}).norm_decode_vecs == 1
    assert [parse(v) for v in ("1", "2", "4")] == [1, 2, 4]
    for bad in ("0", "5"):
        with pytest.raises(ValueError, match="ATLAS_NORM_DECODE_VECS=.* outside 1..4"):
            parse(bad)
    with pytest.raises(ValueError, match="ATLAS_NORM_DECODE_VECS"):
        parse("four")


@pytest.mark.parametrize("dim, vecs, threads", [(4096, 1, 512), (4096, 2, 256), (4096, 4, 128),
                                                (1024, 4, 32), (2560, 4, 96), (2560, 1, 320)])
def test_decode_rows_take_the_vectors_a_thread(dim: int, vecs: int, threads: int) -> None:
    assert norm.rmsnorm_threads(dim, 1, vecs) == threads
    assert norm.rmsnorm_threads(dim, norm.RMSNORM_LATENCY_ROWS, vecs) == threads
    # every vector of the row has a thread slot (rmsnorm.cu: dim <= 8 * kMaxVecs * threads)
    assert threads * vecs * 8 >= dim


@pytest.mark.parametrize("vecs", [1, 2, 4])
def test_many_rows_keep_the_throughput_block(vecs: int) -> None:
    assert norm.rmsnorm_threads(4096, norm.RMSNORM_LATENCY_ROWS + 1, vecs) == 128


@pytest.mark.parametrize("rows", [1, 8, 2048])
def test_the_launch_builders_follow_the_routes(rows: int) -> None:
    """Only the block size moves: the entry, grid and arguments are the default's."""
    recs = {}
    for vecs in (1, 4):
        dev = MockGpuBackend()
        kc = KernelCache(dev, KernelRoutes(norm_decode_vecs=vecs))
        p = dev.alloc(2 * 4096 * rows)
        norm.add_rmsnorm(kc, 0, p, p, p, p, rows, 4096, 1e-6)
        norm.rmsnorm(kc, 0, p, p, p, rows, 4096, 1e-6)
        recs[vecs] = dev.drain_launches()
    for one, four in zip(recs[1], recs[4]):
        assert (one.func, one.grid, one.args) == (four.func, four.grid, four.args)
        assert one.block[0] == (512 if rows <= norm.RMSNORM_LATENCY_ROWS else 128)
        assert four.block[0] == 128


def test_rows_a_block_parse_one_to_sixteen() -> None:
    parse = lambda v: KernelRoutes.from_env({"ATLAS_ROWS_PER_BLOCK": v}).copy_rows_per_block  # noqa
    assert KernelRoutes.from_env({}).copy_rows_per_block == 1
    assert [parse(v) for v in ("1", "4", "16")] == [1, 4, 16]
    for bad in ("0", "17"):
        with pytest.raises(ValueError, match="ATLAS_ROWS_PER_BLOCK=.* outside 1..16"):
            parse(bad)


@pytest.mark.parametrize("rows, per, grid", [(1, 4, 1), (norm.RMSNORM_LATENCY_ROWS, 4, 256),
                                             (2048, 1, 2048), (2048, 4, 512), (2048, 3, 683),
                                             (257, 16, 17)])
def test_the_plain_norm_grid(rows: int, per: int, grid: int) -> None:
    """Decode batches keep one block a row; many rows take `per` rows a block, the last
    block ragged, every row covered (the kernel loops blockIdx.x, + gridDim.x, ..)."""
    assert norm.rmsnorm_grid(rows, per) == grid
    assert grid * per >= rows if rows > norm.RMSNORM_LATENCY_ROWS else grid == rows


def test_only_the_plain_launches_loop_over_rows() -> None:
    """ATLAS_ROWS_PER_BLOCK shrinks the grid of the plain and pitched entries of a
    prefill; the add + RMSNorm (one row a block) and decode batches keep theirs."""
    dev = MockGpuBackend()
    kc = KernelCache(dev, KernelRoutes(copy_rows_per_block=4))
    p = dev.alloc(2 * 4096 * 2048)
    norm.rmsnorm(kc, 0, p, p, p, 2048, 4096, 1e-6)
    norm.rmsnorm_pitched(kc, 0, p, p, p, 2048, 1024, 2048, 1e-6)
    norm.add_rmsnorm(kc, 0, p, p, p, p, 2048, 4096, 1e-6)
    norm.rmsnorm(kc, 0, p, p, p, 8, 4096, 1e-6)
    grids = [launch.grid[0] for launch in dev.drain_launches()]
    assert grids == [512, 512, 2048, 8]


@pytest.mark.parametrize("n, dim, per, grid, threads", [
    (1, 4096, 4, (1, 4), 32), (64, 4096, 4, (64, 4), 32),       # decode: a row over 4 warps
    (2048, 4096, 1, (2048, 1), 128), (2048, 4096, 4, (512, 1), 128),
    (2047, 4096, 3, (683, 1), 128), (70, 8200, 2, (35, 3), 96)])
def test_the_embedding_grid(n: int, dim: int, per: int, grid: tuple[int, int],
                            threads: int) -> None:
    """Decode batches keep a block (or several) a row; many rows take `per` rows a block
    (embedding.cu loops over them), every row covered, the row's split unchanged."""
    assert embedding.embedding_geometry(n, dim, per) == (grid, threads)
    assert grid[0] * per >= n


def test_the_embedding_launch_follows_the_routes() -> None:
    dev = MockGpuBackend()
    kc = KernelCache(dev, KernelRoutes(copy_rows_per_block=4))
    p = dev.alloc(2 * 4096 * 2048)
    embedding.embedding(kc, 0, p, p, p, 2048, 4096, 1000)
    embedding.embedding(kc, 0, p, p, p, 8, 4096, 1000)
    assert [launch.grid[:2] for launch in dev.drain_launches()] == [(512, 1), (8, 4)]
