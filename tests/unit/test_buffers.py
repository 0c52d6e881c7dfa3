"""BufferArena: one allocation, aligned named slices, and planning rules."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.dtype import DType
from atlas.runtime.buffers import BufferArena
from atlas.runtime.host import HostBackend
from atlas.runtime.mock import MockGpuBackend


def _planned() -> BufferArena:
    arena = BufferArena()
    arena.reserve("hidden", DType.BF16, (3, 100))   # 600 bytes
    arena.reserve("logits", DType.FP32, (2, 7))     # 56 bytes
    arena.reserve("ids", DType.I32, 5)              # 20 bytes
    arena.reserve("packed", DType.E2M1, (3,))       # 2 bytes (sub-byte tail rounds up)
    return arena


def test_slices_are_aligned_and_do_not_overlap() -> None:
    arena = _planned()
    slices = list(arena)
    assert [s.offset for s in slices] == [0, 768, 1024, 1280]
    assert [s.nbytes for s in slices] == [600, 56, 20, 2]
    assert arena.nbytes == 1536
    for a, b in zip(slices, slices[1:]):
        assert a.offset + a.nbytes <= b.offset


def test_one_allocation_backs_every_buffer() -> None:
    mock = MockGpuBackend()
    arena = _planned()
    base = arena.allocate(mock)
    assert mock.live_allocations == {base: arena.nbytes}
    assert arena["hidden"] == base and arena["logits"] == base + 768
    assert arena["ids"] % 256 == 0


def test_buffers_hold_data_independently_on_the_host_backend() -> None:
    host = HostBackend(references={})
    arena = _planned()
    arena.allocate(host)
    host.copy_h2d(arena["logits"], np.arange(14, dtype=np.float32))
    host.copy_h2d(arena["ids"], np.full(5, -3, dtype=np.int32))
    assert host.download(arena["logits"], np.float32, 14).tolist() == list(range(14))
    assert host.download(arena["ids"], np.int32, 5).tolist() == [-3] * 5


def test_planning_rules() -> None:
    arena = _planned()
    with pytest.raises(ValueError, match="reserved twice"):
        arena.reserve("ids", DType.I32, 5)
    with pytest.raises(RuntimeError, match="before allocate"):
        _ = arena["ids"]
    with pytest.raises(KeyError, match="no arena buffer 'nope'; reserved: hidden"):
        arena.slice("nope")
    mock = MockGpuBackend()
    arena.allocate(mock)
    with pytest.raises(RuntimeError, match="cannot reserve 'late'"):
        arena.reserve("late", DType.BF16, 4)
    with pytest.raises(RuntimeError, match="already allocated"):
        arena.allocate(mock)
    arena.release()
    assert mock.live_allocations == {}
    with pytest.raises(RuntimeError, match="after release"):
        _ = arena["ids"]


def test_describe_lists_every_buffer_and_the_total() -> None:
    text = _planned().describe()
    assert "hidden" in text and "(3, 100)" in text and text.splitlines()[-1].startswith("total")


def test_empty_and_invalid_reservations() -> None:
    arena = BufferArena()
    assert arena.reserve("none", DType.BF16, (0, 8)).nbytes == 0
    with pytest.raises(ValueError, match="negative"):
        arena.reserve("bad", DType.BF16, (-1,))
    with pytest.raises(ValueError, match="power of two"):
        BufferArena(alignment=100)
    base = arena.allocate(MockGpuBackend())
    assert arena["none"] == base
