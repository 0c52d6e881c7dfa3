"""The RMSNorm launches' geometry. Block size (ops/norm.rmsnorm_threads): one 16-byte vector
a thread for a decode batch, RMSNORM_MAX_VECS for many rows. Grid (ops/norm.rmsnorm_grid): a
block a row, or ATLAS_NORM_ROWS_PER_BLOCK rows (default DEFAULT_NORM_ROWS_PER_BLOCK) of a
prefill's plain norm, which rmsnorm.cu's plain entries loop over."""

from __future__ import annotations

import pytest

from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, norm
from atlas.runtime.ops.routes import DEFAULT_NORM_ROWS_PER_BLOCK, KernelRoutes


@pytest.mark.parametrize("dim, threads", [(4096, 512), (1024, 128), (2560, 320), (8200, 1024)])
def test_decode_rows_take_one_vector_a_thread(dim: int, threads: int) -> None:
    assert norm.rmsnorm_threads(dim, 1) == threads
    assert norm.rmsnorm_threads(dim, norm.RMSNORM_LATENCY_ROWS) == threads
    # every vector of the row has a thread slot (rmsnorm.cu: dim <= 8 * kMaxVecs * threads)
    assert threads * norm.RMSNORM_MAX_VECS * 8 >= dim


def test_many_rows_take_the_throughput_block() -> None:
    assert norm.rmsnorm_threads(4096, norm.RMSNORM_LATENCY_ROWS + 1) == 128


def test_rows_a_block_parse_one_to_sixteen() -> None:
    parse = lambda v: KernelRoutes.from_env(  # noqa: E731
        {"ATLAS_NORM_ROWS_PER_BLOCK": v}).norm_rows_per_block
    assert KernelRoutes.from_env({}).norm_rows_per_block == DEFAULT_NORM_ROWS_PER_BLOCK == 3
    assert [parse(v) for v in ("1", "4", "16")] == [1, 4, 16]
    for bad in ("0", "17"):
        with pytest.raises(ValueError, match="ATLAS_NORM_ROWS_PER_BLOCK=.* outside 1..16"):
            parse(bad)
    with pytest.raises(ValueError, match="ATLAS_NORM_ROWS_PER_BLOCK"):
        parse("three")


@pytest.mark.parametrize("rows, per, grid", [(1, 4, 1), (norm.RMSNORM_LATENCY_ROWS, 4, 256),
                                             (2048, 1, 2048), (2048, 4, 512), (2048, 3, 683),
                                             (257, 16, 17)])
def test_the_plain_norm_grid(rows: int, per: int, grid: int) -> None:
    """Decode batches keep one block a row; many rows take `per` rows a block, the last
    block ragged, every row covered (the kernel loops blockIdx.x, + gridDim.x, ..)."""
    assert norm.rmsnorm_grid(rows, per) == grid
    assert grid * per >= rows if rows > norm.RMSNORM_LATENCY_ROWS else grid == rows


def test_only_the_plain_launches_loop_over_rows() -> None:
    """The routes' rows a block shrink the grid of the plain and pitched entries of a
    prefill; the add + RMSNorm (one row a block) and decode batches keep theirs."""
    dev = MockGpuBackend()
    kc = KernelCache(dev, KernelRoutes(norm_rows_per_block=4))
    p = dev.alloc(2 * 4096 * 2048)
    norm.rmsnorm(kc, 0, p, p, p, 2048, 4096, 1e-6)
    norm.rmsnorm_pitched(kc, 0, p, p, p, 2048, 1024, 2048, 1e-6)
    norm.add_rmsnorm(kc, 0, p, p, p, p, 2048, 4096, 1e-6)
    norm.rmsnorm(kc, 0, p, p, p, 8, 4096, 1e-6)
    launches = dev.drain_launches()
    assert [launch.grid[0] for launch in launches] == [512, 512, 2048, 8]
    assert [launch.block[0] for launch in launches] == [128, 32, 128, 512]
