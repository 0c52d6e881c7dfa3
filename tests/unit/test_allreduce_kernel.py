"""The one-shot all-reduce (allreduce.cu): reference vs float64 oracle for one rank and for
both ranks of a two-rank world sharing one memory, the .cu entry point declares the ABI, the
launch builder's fixed grid and refusals, and a missing peer is an error, not a sum."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from atlas.runtime.cases import allreduce as allreduce_cases  # noqa: F401 (registers)
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import CASE_FACTORIES, check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, allreduce
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

CASES = CASE_FACTORIES["allreduce:allreduce_cases"](np.random.default_rng(3))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail
    if "out1" in result.outputs:  # both ranks hold the very same sum
        np.testing.assert_array_equal(result.outputs["out0"], result.outputs["out1"])


def test_entry_point_declares_the_abi() -> None:
    _declares_abi("allreduce")


def test_geometry_and_refusals() -> None:
    dev = MockGpuBackend()
    kc = KernelCache(dev)
    a = dev.alloc(1 << 20)
    allreduce.oneshot(kc, dev.default_stream(), a, a, a, 8, 8, 2, 1)
    (rec,) = dev.drain_launches()
    assert (rec.grid, rec.block) == ((allreduce.ONESHOT_BLOCKS, 1, 1),
                                     (allreduce.ONESHOT_THREADS, 1, 1))
    with pytest.raises(ValueError, match="exceed the workspace"):
        allreduce.oneshot(kc, dev.default_stream(), a, a, a, 16, 8, 2, 0)
    with pytest.raises(ValueError, match="rank 2 of world 2"):
        allreduce.oneshot(kc, dev.default_stream(), a, a, a, 8, 8, 2, 2)
    with pytest.raises(ValueError, match="count=12 must be a positive multiple of 8"):
        allreduce.oneshot(kc, dev.default_stream(), a, a, a, 12, 16, 1, 0)


def test_a_peer_that_never_arrived_is_an_error() -> None:
    dev = HostBackend()
    kc = KernelCache(dev)
    count = 64
    ws0, ws1 = (dev.upload(np.zeros(allreduce.workspace_bytes(count), np.uint8))
                for _ in range(2))
    peers = dev.upload(np.array([ws0, ws1], np.uint64))
    x = dev.upload(np.ones(count, np.uint16))
    with pytest.raises(RuntimeError, match=r"peers \[1\] have not arrived"):
        allreduce.oneshot(kc, dev.default_stream(), peers, x, x, count, count, 2, 0)
    assert bf16_bits_to_f32(dev.download(x, np.uint16, (count,))).max() > 0  # unchanged


def test_oneshot_group_of_one_on_the_host_backend() -> None:
    """The comm-side object: a world of one maps nothing, sums its own buffer (identity),
    reports no timeout, and frees what it allocated."""
    from atlas.comm.oneshot import OneShotAllReduce
    from atlas.comm.transport import Star
    dev = HostBackend()
    one = OneShotAllReduce(dev, Star.connect(0, 1, "127.0.0.1", 0), capacity=256)
    x = np.arange(1, 129, dtype=np.float32)
    buf = dev.upload(f32_to_bf16_bits(x))
    for _ in range(3):
        one.all_reduce(buf, 128, dev.default_stream())
    np.testing.assert_array_equal(bf16_bits_to_f32(dev.download(buf, np.uint16, (128,))), x)
    assert not one.timed_out()
    one.close()


def test_a_case_rerun_for_graph_capture_only_launches(monkeypatch) -> None:
    """The GPU graph check runs a module's first case eagerly, then again inside a stream
    capture on the same buffers: the rerun must enqueue nothing but kernels (CUDA
    invalidates a capture on a pageable host copy), and the replayed graph still sums."""
    case = CASES[0]
    assert case.name.startswith("allreduce_oneshot_w1_")
    dev = HostBackend()
    s = dev.default_stream()
    ptrs = {name: dev.upload(arr) for name, arr in case.inputs.items()}
    ptrs["out"] = dev.alloc(2 * case.outputs["out"].shape[0])
    case.run(dev, s, ptrs)
    copies: list[tuple] = []
    monkeypatch.setattr(dev, "copy_h2d", lambda *args, **kw: copies.append(args))
    dev.begin_capture(s)
    case.run(dev, s, ptrs)
    graph = dev.end_capture(s)
    assert not copies
    dev.memset(ptrs["out"], 0xFF, 2 * case.outputs["out"].shape[0])
    dev.launch_graph(graph, s)
    dev.synchronize(s)
    got = dev.download(ptrs["out"], np.uint16, case.outputs["out"].shape)
    np.testing.assert_array_equal(got, case.inputs["x"])
