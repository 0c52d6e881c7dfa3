#!/usr/bin/env python3
"""Micro-benchmark of the matrix and attention kernels against their floors (GPU machine).

Times each shape of docs/kernels.md as a CUDA graph of back-to-back launches (so Python
launch cost is out of the numbers), rotating through enough weight copies that the working
set exceeds L2, and prints time, achieved GB/s or TFLOP/s, and the fraction of the measured
ceilings (4,267 GB/s copy, 790 TFLOP/s bf16 unless overridden). Inputs are random (never
zeros). A benchmark, not a test: it asserts nothing about speed; correctness is
tools/gpu/check_kernels.py's job.

    python3 tools/gpu/bench_kernels.py [--model qwen3-8b] [--ptx-dir DIR] [--out FILE] [-k TEXT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "py"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from atlas.runtime.gpu import DevicePtr, GpuBackend, Stream  # noqa: E402
from atlas.runtime.ops import KernelCache, attention, matmul  # noqa: E402

#: working set per timed shape: weights rotate through copies until this many bytes
ROTATE_BYTES = 256 << 20
LAUNCHES_PER_GRAPH = 20

Launch = Callable[[KernelCache, Stream, int], None]  # (kc, stream, copy index)


@dataclass
class Row:
    name: str
    us: float
    floor_us: float
    rate: float
    unit: str
    fraction: float


def random_fill(backend: GpuBackend, nbytes: int, rng: np.random.Generator) -> DevicePtr:
    """A device buffer of small random bf16 values (uniform(-1, 1) bit patterns)."""
    n = max(nbytes // 2, 1)
    vals = rng.uniform(-1, 1, n).astype(np.float32).view(np.uint32) >> np.uint32(16)
    return backend.upload(vals.astype(np.uint16))


def time_graph(backend: GpuBackend, kc: KernelCache, launch: Launch, copies: int,
               repeats: int = 7) -> float:
    """Median microseconds per launch of a captured graph of LAUNCHES_PER_GRAPH launches."""
    stream = backend.create_stream()
    for i in range(copies):  # warm up: module load, first-touch
        launch(kc, stream, i)
    backend.synchronize(stream)
    backend.begin_capture(stream)
    for i in range(LAUNCHES_PER_GRAPH):
        launch(kc, stream, i % copies)
    graph = backend.end_capture(stream)
    start, end = backend.create_event(), backend.create_event()
    times = []
    for _ in range(repeats):
        backend.record_event(start, stream)
        backend.launch_graph(graph, stream)
        backend.record_event(end, stream)
        backend.synchronize(stream)
        times.append(backend.event_elapsed_ms(start, end) * 1e3 / LAUNCHES_PER_GRAPH)
    backend.destroy_graph(graph)
    return statistics.median(times[1:])


def bench_gemv(backend: GpuBackend, kc: KernelCache, rng: np.random.Generator, name: str,
               m: int, n: int, k: int, out_f32: bool, bw: float) -> Row:
    wbytes = n * k * 2
    copies = max(1, min(8, -(-ROTATE_BYTES // wbytes)))
    ws = [random_fill(backend, wbytes, rng) for _ in range(copies)]
    x = random_fill(backend, m * k * 2, rng)
    y = backend.alloc(m * n * 4)
    try:
        us = time_graph(backend, kc, lambda c, s, i: matmul.linear(c, s, x, ws[i], y, m, n, k,
                                                                   out_f32), copies)
    finally:
        for p in (*ws, x, y):
            backend.free(p)
    moved = wbytes + m * k * 2 + m * n * (4 if out_f32 else 2)
    floor = moved / bw * 1e6
    return Row(name, us, floor, moved / us / 1e3, "GB/s", floor / us)


def bench_gemm(backend: GpuBackend, kc: KernelCache, rng: np.random.Generator, name: str,
               m: int, n: int, k: int, bw: float, flops_peak: float) -> Row:
    a = random_fill(backend, m * k * 2, rng)
    w = random_fill(backend, n * k * 2, rng)
    c = backend.alloc(m * n * 2)
    try:
        us = time_graph(backend, kc, lambda cc, s, i: matmul.linear(cc, s, a, w, c, m, n, k), 1)
    finally:
        for p in (a, w, c):
            backend.free(p)
    flops, moved = 2 * m * n * k, 2 * (m * k + n * k + m * n)
    floor = max(flops / flops_peak, moved / bw) * 1e6
    if flops / flops_peak >= moved / bw:
        return Row(name, us, floor, flops / us / 1e6, "TFLOP/s", floor / us)
    return Row(name, us, floor, moved / us / 1e3, "GB/s", floor / us)


def paged(backend: GpuBackend, rng: np.random.Generator, kv_lens: list[int], hkv: int,
          d: int, block_size: int) -> tuple[DevicePtr, DevicePtr, DevicePtr, DevicePtr, int]:
    """K/V pools holding each sequence's history in shuffled blocks, its tables and lens."""
    need = [-(-n // block_size) for n in kv_lens]
    max_blocks = max(need)
    ids = rng.permutation(sum(need)).astype(np.int32)
    tables = np.zeros((len(kv_lens), max_blocks), dtype=np.int32)
    at = 0
    for b, nb in enumerate(need):
        tables[b, :nb] = ids[at:at + nb]
        at += nb
    pool = sum(need) * hkv * block_size * d * 2
    return (random_fill(backend, pool, rng), random_fill(backend, pool, rng),
            backend.upload(tables), backend.upload(np.asarray(kv_lens, dtype=np.int32)),
            max_blocks)


def bench_prefill(backend: GpuBackend, kc: KernelCache, rng: np.random.Generator, name: str,
                  t: int, hq: int, hkv: int, d: int, flops_peak: float) -> Row:
    k, v, tables, lens, max_blocks = paged(backend, rng, [t], hkv, d, 16)
    q = random_fill(backend, t * hq * d * 2, rng)
    out = backend.alloc(t * hq * d * 2)
    cu = backend.upload(np.asarray([0, t], dtype=np.int32))
    try:
        us = time_graph(backend, kc, lambda c, s, i: attention.prefill_attention(
            c, s, q, k, v, tables, cu, lens, out, 1, hq, hkv, d, 16, max_blocks, d ** -0.5, t), 1)
    finally:
        for p in (k, v, tables, lens, q, out, cu):
            backend.free(p)
    flops = 2 * d * t * (t + 1) * hq  # QK^T and PV over the causal half
    floor = flops / flops_peak * 1e6
    return Row(name, us, floor, flops / us / 1e6, "TFLOP/s", floor / us)


def bench_decode(backend: GpuBackend, kc: KernelCache, rng: np.random.Generator, name: str,
                 batch: int, kv_len: int, hq: int, hkv: int, d: int, splits: int,
                 bw: float) -> Row:
    k, v, tables, lens, max_blocks = paged(backend, rng, [kv_len] * batch, hkv, d, 16)
    q = random_fill(backend, batch * hq * d * 2, rng)
    part_o = backend.alloc(batch * hq * splits * d * 4)
    part_ml = backend.alloc(batch * hq * splits * 2 * 4)
    out = backend.alloc(batch * hq * d * 2)
    try:
        us = time_graph(backend, kc, lambda c, s, i: attention.decode_attention(
            c, s, q, k, v, tables, lens, part_o, part_ml, out, batch, hq, hkv, d, 16,
            max_blocks, splits, d ** -0.5), 1)
    finally:
        for p in (k, v, tables, lens, q, part_o, part_ml, out):
            backend.free(p)
    moved = 2 * batch * kv_len * hkv * d * 2
    floor = moved / bw * 1e6
    return Row(name, us, floor, moved / us / 1e3, "GB/s", floor / us)


def suite(backend: GpuBackend, rng: np.random.Generator, bw: float, peak: float
          ) -> Iterator[tuple[str, Callable[[], Row]]]:
    """(name, run) for every shape, so a name filter skips the work of unselected shapes."""
    kc = KernelCache(backend)
    gemv = [("qwen3-8b qkv", 6144, 4096), ("qwen3-8b o_proj", 4096, 4096),
            ("qwen3-8b gate|up", 24576, 4096), ("qwen3-8b down", 4096, 12288),
            ("qwen3-0.6b qkv", 4096, 1024), ("qwen3-0.6b o_proj", 1024, 2048),
            ("qwen3-0.6b gate|up", 6144, 1024), ("qwen3-0.6b down", 1024, 3072),
            ("smollm2 qkv", 960, 576), ("smollm2 o_proj", 576, 576),
            ("smollm2 gate|up", 3072, 576), ("smollm2 down", 576, 1536)]
    for label, n, k in gemv:
        for m in (1, 4, 8):
            name = f"gemv m{m} {label} {n}x{k}"
            yield name, lambda name=name, n=n, k=k, m=m: bench_gemv(
                backend, kc, rng, name, m, n, k, False, bw)
    for label, n, k in [("qwen3-8b lm head", 151936, 4096), ("qwen3-0.6b lm head", 151936, 1024),
                        ("smollm2 lm head", 49152, 576)]:
        name = f"gemv m1 f32 {label} {n}x{k}"
        yield name, lambda name=name, n=n, k=k: bench_gemv(backend, kc, rng, name, 1, n, k,
                                                           True, bw)
    for m in (16, 64, 256, 2048):
        for label, n, k in [("qkv", 6144, 4096), ("gate|up", 24576, 4096), ("down", 4096, 12288)]:
            name = f"gemm m{m} qwen3-8b {label} {n}x{k}"
            yield name, lambda name=name, m=m, n=n, k=k: bench_gemm(
                backend, kc, rng, name, m, n, k, bw, peak)
    for t, hq, hkv, d in [(512, 32, 8, 128), (2048, 32, 8, 128), (8192, 32, 8, 128),
                          (2048, 16, 8, 64)]:
        name = f"prefill T{t} hq{hq} hkv{hkv} D{d}"
        yield name, lambda name=name, t=t, hq=hq, hkv=hkv, d=d: bench_prefill(
            backend, kc, rng, name, t, hq, hkv, d, peak)
    for batch, kv_len, splits in [(1, 4096, 32), (8, 4096, 4), (32, 4096, 1), (1, 32768, 64)]:
        name = f"decode b{batch} kv{kv_len} hq32 hkv8 D128 splits{splits}"
        yield name, lambda name=name, b=batch, n=kv_len, s=splits: bench_decode(
            backend, kc, rng, name, b, n, 32, 8, 128, s, bw)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptx-dir", type=Path, help="*.ptxset.json or *.ptx files (default: the "
                    "built kernel registry)")
    ap.add_argument("--model", default="qwen3-8b", help="leaf whose PTX set to time")
    ap.add_argument("--bandwidth-gbs", type=float, default=4267.0)
    ap.add_argument("--peak-tflops", type=float, default=790.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-k", dest="select", help="only shapes whose name contains this text")
    ap.add_argument("--out", type=Path, help="JSON result path")
    args = ap.parse_args()

    from atlas.runtime.cuda import CudaBackend
    from check_kernels import load_sources

    sources = [s for s in load_sources(args.ptx_dir, "hopper")
               if args.ptx_dir is not None or s.name.split("/")[1] == args.model]
    if not sources:
        raise SystemExit(f"no hopper PTX set for model {args.model}")
    backend = CudaBackend(modules=sources[0].modules)
    rng = np.random.default_rng(args.seed)
    rows = []
    print(f"PTX set {sources[0].name}; ceilings {args.bandwidth_gbs:.0f} GB/s, "
          f"{args.peak_tflops:.0f} TFLOP/s")
    for name, run in suite(backend, rng, args.bandwidth_gbs * 1e9, args.peak_tflops * 1e12):
        if args.select and args.select not in name:
            continue
        row = run()
        rows.append(row)
        print(f"{row.name:<48} {row.us:>10.2f} us  floor {row.floor_us:>9.2f} us  "
              f"{row.rate:>8.1f} {row.unit:<7} {100 * row.fraction:>5.1f}%", flush=True)
    if args.out:
        args.out.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
