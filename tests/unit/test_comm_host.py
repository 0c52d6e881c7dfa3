"""The host collectives between real processes over TCP, against numpy on the same inputs,
and the failure of a group whose peer dies (a clear CommError, never a hang)."""

from __future__ import annotations

import multiprocessing as mp
import socket

import numpy as np
import pytest

from atlas.comm import CommError, HostComm, ReduceOp, SingleComm, WorldSpec, connect_world
from atlas.core.dtype import DType
from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from atlas.runtime.host import HostBackend

N = 37  # elements per rank: odd, so no path relies on alignment


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _inputs(rank: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(100 + rank)
    return {"f32": rng.standard_normal(N).astype(np.float32),
            "bf16": f32_to_bf16_bits(rng.standard_normal(N).astype(np.float32)),
            "i32": rng.integers(-1000, 1000, N).astype(np.int32)}


def _a2a_counts(world: int) -> np.ndarray:
    """counts[src][dst]: uneven, with zeros, so offsets are exercised."""
    return np.array([[(3 * s + 5 * d) % 4 for d in range(world)] for s in range(world)])


def _worker(rank: int, world: int, port: int, out: "mp.Queue") -> None:
    gpu = HostBackend(references={})
    comm = connect_world(WorldSpec(rank, world, "127.0.0.1", port, timeout_s=30), gpu)
    assert isinstance(comm, HostComm)
    s = gpu.default_stream()
    res: dict[str, np.ndarray] = {}
    for key, arr in _inputs(rank).items():
        dtype = {"f32": DType.FP32, "bf16": DType.BF16, "i32": DType.I32}[key]
        for op in (ReduceOp.SUM, ReduceOp.MAX):
            buf = gpu.upload(arr)
            comm.all_reduce(buf, N, dtype, s, op)
            res[f"all_reduce_{op.value}_{key}"] = gpu.download(buf, arr.dtype, N)
        recv = gpu.alloc(arr.nbytes * world)
        comm.all_gather(gpu.upload(arr), recv, N, dtype, s)
        res[f"all_gather_{key}"] = gpu.download(recv, arr.dtype, N * world)
    big = np.concatenate([_inputs(rank)["f32"]] * world) * np.float32(rank + 1)
    recv = gpu.alloc(4 * N)
    comm.reduce_scatter(gpu.upload(big), recv, N, DType.FP32, s)
    res["reduce_scatter"] = gpu.download(recv, np.float32, N)
    counts = _a2a_counts(world)
    send = np.arange(counts[rank].sum(), dtype=np.int32) + 1000 * rank
    recv = gpu.alloc(4 * max(int(counts[:, rank].sum()), 1))
    comm.all_to_all(gpu.upload(send), list(counts[rank]), recv, list(counts[:, rank]),
                    DType.I32, s)
    res["all_to_all"] = gpu.download(recv, np.int32, int(counts[:, rank].sum()))
    buf = gpu.upload(_inputs(rank)["bf16"])
    comm.broadcast(buf, N, DType.BF16, world - 1, s)
    res["broadcast"] = gpu.download(buf, np.uint16, N)
    comm.barrier()
    comm.close()
    out.put((rank, res))


def _run_group(world: int) -> list[dict[str, np.ndarray]]:
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, out)) for r in range(world)]
    for p in procs:
        p.start()
    got = dict(out.get(timeout=60) for _ in range(world))
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    return [got[r] for r in range(world)]


@pytest.mark.parametrize("world", [2, 3])
def test_host_collectives_match_numpy(world: int) -> None:
    results = _run_group(world)
    ins = [_inputs(r) for r in range(world)]
    f32_sum = np.zeros(N, np.float32)
    for r in range(world):  # rank order, float32: what the host backend promises
        f32_sum = f32_sum + ins[r]["f32"]
    bf16_sum = np.zeros(N, np.float32)
    for r in range(world):
        bf16_sum = bf16_sum + bf16_bits_to_f32(ins[r]["bf16"])
    expect = {
        "all_reduce_sum_f32": f32_sum,
        "all_reduce_max_f32": np.max([i["f32"] for i in ins], axis=0),
        "all_reduce_sum_bf16": f32_to_bf16_bits(bf16_sum),
        "all_reduce_max_bf16": f32_to_bf16_bits(
            np.max([bf16_bits_to_f32(i["bf16"]) for i in ins], axis=0)),
        "all_reduce_sum_i32": np.sum([i["i32"] for i in ins], axis=0).astype(np.int32),
        "all_reduce_max_i32": np.max([i["i32"] for i in ins], axis=0),
        "all_gather_f32": np.concatenate([i["f32"] for i in ins]),
        "all_gather_bf16": np.concatenate([i["bf16"] for i in ins]),
        "all_gather_i32": np.concatenate([i["i32"] for i in ins]),
    }
    counts = _a2a_counts(world)
    for rank, res in enumerate(results):
        for key, want in expect.items():
            np.testing.assert_array_equal(res[key], want, err_msg=f"rank {rank} {key}")
        rs = np.zeros(N, np.float32)
        for r in range(world):
            rs = rs + ins[r]["f32"] * np.float32(r + 1)
        np.testing.assert_allclose(res["reduce_scatter"], rs, rtol=1e-6)
        want_a2a = []
        for src in range(world):
            start = counts[src][:rank].sum()
            want_a2a.append(np.arange(start, start + counts[src][rank]) + 1000 * src)
        np.testing.assert_array_equal(res["all_to_all"], np.concatenate(want_a2a))
        np.testing.assert_array_equal(res["broadcast"], ins[world - 1]["bf16"])


def _dying_peer(port: int) -> None:
    gpu = HostBackend(references={})
    connect_world(WorldSpec(1, 2, "127.0.0.1", port, timeout_s=30), gpu)
    # exits without taking part in the collective: its socket closes with the process


def test_a_dead_peer_fails_the_collective_with_its_rank() -> None:
    ctx = mp.get_context("fork")
    port = _free_port()
    peer = ctx.Process(target=_dying_peer, args=(port,))
    peer.start()
    gpu = HostBackend(references={})
    comm = connect_world(WorldSpec(0, 2, "127.0.0.1", port, timeout_s=30), gpu)
    peer.join(timeout=30)
    buf = gpu.upload(np.ones(4, np.float32))
    with pytest.raises(CommError, match="rank 1"):
        comm.all_reduce(buf, 4, DType.FP32, gpu.default_stream())
    comm.close()


def _hung_peer(port: int, release: "mp.Event") -> None:
    gpu = HostBackend(references={})
    comm = connect_world(WorldSpec(1, 2, "127.0.0.1", port, timeout_s=30), gpu)
    release.wait(30)  # alive, connected, never answering: a hung worker
    comm.close()


def test_a_hung_peer_fails_rank_0s_collective_within_the_bound() -> None:
    ctx = mp.get_context("fork")
    port = _free_port()
    release = ctx.Event()
    peer = ctx.Process(target=_hung_peer, args=(port, release))
    peer.start()
    gpu = HostBackend(references={})
    comm = connect_world(WorldSpec(0, 2, "127.0.0.1", port, timeout_s=30, op_timeout_s=0.5),
                         gpu)
    buf = gpu.upload(np.ones(4, np.float32))
    try:
        with pytest.raises(CommError, match=r"rank 1 did not answer within 0.5 s \(hung"):
            comm.all_reduce(buf, 4, DType.FP32, gpu.default_stream())
    finally:
        release.set()
        peer.join(timeout=30)
        comm.close()


def test_rendezvous_names_the_missing_ranks() -> None:
    gpu = HostBackend(references={})
    with pytest.raises(CommError, match=r"ranks \[1, 2\] did not connect"):
        connect_world(WorldSpec(0, 3, "127.0.0.1", _free_port(), timeout_s=0.5), gpu)


def test_single_rank_copies_and_checks_counts() -> None:
    gpu = HostBackend(references={})
    comm = connect_world(WorldSpec(), gpu)
    assert isinstance(comm, SingleComm)
    s = gpu.default_stream()
    src = gpu.upload(np.arange(5, dtype=np.float32))
    dst = gpu.alloc(20)
    comm.all_gather(src, dst, 5, DType.FP32, s)
    np.testing.assert_array_equal(gpu.download(dst, np.float32, 5), np.arange(5))
    with pytest.raises(ValueError, match="expects 4"):
        comm.all_to_all(src, [5], dst, [4], DType.I32, s)
    with pytest.raises(ValueError, match="2 entries"):
        comm.all_to_all(src, [1, 1], dst, [2], DType.I32, s)
    with pytest.raises(ValueError, match="outside a world"):
        WorldSpec(rank=2, world_size=2)
