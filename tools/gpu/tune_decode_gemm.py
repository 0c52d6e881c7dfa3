#!/usr/bin/env python3
"""The decode GEMM's tuner against its model, per published shape (GPU machine): the A/B of
ATLAS_DECODE_GEMM_TUNE.

For each projection of the published dense widths (Qwen3 0.6B .. 32B, Qwen3-30B-A3B's
attention, Llama 3.2 1B / 3B, Llama 3.1 8B; gate_up as the engine runs it, ending with its
SwiGLU) at 16, 32, 64 and 128 rows:
* the model's pick (matmul_decode.launch_split at decode_groups' default: what
  ATLAS_DECODE_GEMM_TUNE=0 launches) and the tuner's (matmul_decode.tuned_pick, timing every
  candidate as the engine does at startup: the call's own operands, back to back, into a
  fresh in-memory table unless --table names a file to read and extend);
* both picks timed again the kernel table's way, cold: a CUDA graph of launches cycling
  through copies of the weight until 256 MiB pass between two reads of one copy, median of
  replays between events (the tuner's own numbers, read warm from L2 where the weight fits,
  are printed beside them as "tuner us").
Ratio = model us / tuned us (above 1: the tuner's pick is faster). Routes switches apply
(ATLAS_DECODE_GEMM_TMA=0 tunes the cp.async kernel; ANY_SPLIT / OCCUPANCY change the model).

    python3 tools/gpu/tune_decode_gemm.py [-k FILTER] [--rows 16,32,64,128] [--plain]
        [--out FILE.json] [--table FILE.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from atlas.bench.kernel_shapes import DECODE_GEMM_WIDTHS, ModelDims  # noqa: E402
from atlas.kernels.registry import load_registry  # noqa: E402
from atlas.runtime.cuda import CudaBackend  # noqa: E402
from atlas.runtime.kernel_abi import GEMM_DECODE_SM90, GEMM_DECODE_TMA  # noqa: E402
from atlas.runtime.ops import KernelCache, decode_gemm_tune as tune  # noqa: E402
from atlas.runtime.ops import matmul_decode as md  # noqa: E402
from atlas.core.cold_reads import rotation_copies  # noqa: E402
from atlas.runtime.ops.decode_gemm_tune import (MAX_COPIES, ROTATE_BYTES,  # noqa: E402
                                                DecodeGemmTuner, Pick, TuneTable)

#: the Llama widths beside the kernel table's Qwen3 ones (DECODE_GEMM_WIDTHS)
LLAMA_WIDTHS = (
    ModelDims("llama-3.2-1b", hidden=2048, heads=32, kv_heads=8, head_dim=64,
              intermediate=8192, vocab=128256),
    ModelDims("llama-3.2-3b", hidden=3072, heads=24, kv_heads=8, head_dim=128,
              intermediate=8192, vocab=128256),
    ModelDims("llama-3.1-8b", hidden=4096, heads=32, kv_heads=8, head_dim=128,
              intermediate=14336, vocab=128256),
)
#: launches a cold timing graph holds at least, and its timed replays
COLD_LAUNCHES = 20
COLD_REPS = 5


@dataclass(frozen=True)
class Projection:
    """One product of a model's layer: n outputs, k inputs, whether it ends with the SwiGLU."""

    model: str
    name: str
    n: int
    k: int
    swiglu: bool


def projections(plain: bool = False) -> list[Projection]:
    """The published widths' decode GEMM products, in the kernel table's order, then Llama's;
    `plain`: each gate_up also without its SwiGLU (the kernel table's "... gate_up ... dgemm"
    rows)."""
    out = []
    widths = [(d, names) for d, names in DECODE_GEMM_WIDTHS]
    widths += [(d, ("qkv", "o_proj", "gate_up", "down")) for d in LLAMA_WIDTHS]
    for dims, names in widths:
        every = {"qkv": (dims.qkv_out, dims.hidden, False),
                 "o_proj": (dims.hidden, dims.attn_out, False),
                 "gate_up": (2 * dims.intermediate, dims.hidden, True),
                 "down": (dims.hidden, dims.intermediate, False)}
        for name in names:
            n, k, swiglu = every[name]
            out.append(Projection(dims.name, "gate_up+swiglu" if swiglu else name, n, k,
                                  swiglu))
            if swiglu and plain:
                out.append(Projection(dims.name, name, n, k, False))
    return out


def decode_modules() -> dict[str, bytes]:
    """Both decode GEMM modules' PTX, from the first built target that has them."""
    registry = load_registry()
    names = {GEMM_DECODE_SM90.module, GEMM_DECODE_TMA.module}
    for target in registry.targets():
        ps = registry.select_target(target.hw, target.model, target.quant)
        if names <= set(ps.modules):
            return {name: ps.modules[name].image() for name in names}
    raise SystemExit(f"no built PTX set holds {sorted(names)} (atlas kernels build)")


def cold_us(kc: KernelCache, stream: int, events: list, x: int, weights: list[int], y: int,
            m: int, p: Projection, tma: bool, pick: Pick) -> float:
    """Microseconds a launch at `pick` takes with its weight cold: tune.time_picks over a
    graph of launches that cycle through `weights` (copies of one weight)."""
    cycle = itertools.cycle(weights)

    def launch(candidate: Pick, on: int) -> None:
        md.launch_pick(kc, on, x, next(cycle), y, m, p.n, p.k, False, p.swiglu, tma, candidate)

    iters = len(weights) * -(-COLD_LAUNCHES // len(weights))
    return tune.time_picks(kc.backend, stream, [pick], launch, events, warmup=len(weights),
                           iters=iters, reps=COLD_REPS)[pick]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", dest="select", action="append",
                    help="only rows whose 'model projection' contains this (repeatable)")
    ap.add_argument("--rows", default="16,32,64,128", help="batch rows (m) per projection")
    ap.add_argument("--plain", action="store_true", help="also each gate_up without its "
                    "SwiGLU epilogue (the kernel table's rows)")
    ap.add_argument("--table", type=Path, help="tune into this table file (default: a fresh "
                    "temporary one, so every key is timed)")
    ap.add_argument("--out", type=Path, help="write the rows as JSON here too")
    args = ap.parse_args()
    rows_m = [int(v) for v in args.rows.split(",")]
    picked = [p for p in projections(args.plain) if not args.select
              or any(s in f"{p.model} {p.name}" for s in args.select)]
    t_start = time.perf_counter()
    backend = CudaBackend(modules=decode_modules())
    kc = KernelCache(backend)
    table = TuneTable(None) if args.table is None else TuneTable.load(args.table)
    kc.decode_tune = DecodeGemmTuner.open(backend, kc.facts, kc.routes, table)
    if kc.decode_tune is None or not md.tunes(kc):
        raise SystemExit("the tuner is off: unset ATLAS_DECODE_GEMM_TUNE, _SPLIT and _WIDE")
    tma = md.uses_tma(kc)
    module = (GEMM_DECODE_TMA if tma else GEMM_DECODE_SM90).module
    stream = backend.create_stream()
    events = [backend.create_event() for _ in range(2 * COLD_REPS)]
    print(f"device: {backend.device_info()}\nkernel: "
          f"{'gemm_decode_tma' if tma else 'gemm_decode_sm90'}; {len(picked)} projections x "
          f"m {rows_m}; table {args.table or 'fresh, in memory'}", flush=True)
    results = []
    for p in picked:
        wbytes = p.n * p.k * 2
        copies = rotation_copies(wbytes, ROTATE_BYTES, MAX_COPIES)
        pool = backend.alloc(copies * wbytes)
        x = backend.alloc(max(rows_m) * p.k * 2)
        y = backend.alloc(max(rows_m) * p.n * 2)
        backend.memset(pool, 0x3C, copies * wbytes)  # bf16 0x3C3C: 0.0115, finite
        backend.memset(x, 0x3C, max(rows_m) * p.k * 2)
        weights = [pool + i * wbytes for i in range(copies)]
        for m in rows_m:
            groups = md.decode_groups(m, None, tma)
            model = (md.launch_split(kc, m, p.n, p.k, False, p.swiglu, tma, groups), groups)
            tuned = md.tuned_pick(kc, stream, x, weights[0], y, m, p.n, p.k, False, p.swiglu,
                                  tma)
            entry = kc.decode_tune.entry(module, md.tune_key(kc, m, p.n, p.k, False,
                                                             md.Glu(p.swiglu), tma))
            model_us = cold_us(kc, stream, events, x, weights, y, m, p, tma, model)
            tuned_us = (model_us if tuned == model
                        else cold_us(kc, stream, events, x, weights, y, m, p, tma, tuned))
            row = {"shape": f"{p.model} {p.name}", "m": m, "n": p.n, "k": p.k,
                   "model": list(model), "model_us": model_us, "tuned": list(tuned),
                   "tuned_us": tuned_us, "ratio": model_us / tuned_us,
                   "tuner_model_us": entry.model_us if entry else None,
                   "tuner_us": entry.us if entry else None,
                   "tune_ms": entry.tune_ms if entry else None}
            results.append(row)
            print(f"  {row['shape']:<28} m {m:3d}: model {model} {model_us:8.2f} us, tuned "
                  f"{tuned} {tuned_us:8.2f} us, x{row['ratio']:.3f}", flush=True)
        backend.synchronize()
        for ptr in (pool, x, y):
            backend.free(ptr)
    print("\n| shape | m | model pick (split, groups) | model us | tuned pick | tuned us | "
          "ratio | tuner us (model / tuned, warm) | tune ms |\n|---|---|---|---|---|---|---|"
          "---|---|")
    for r in results:
        warm = (f"{r['tuner_model_us']:.2f} / {r['tuner_us']:.2f}" if r["tuner_us"] is not None
                else "-")
        print(f"| {r['shape']} | {r['m']} | {tuple(r['model'])} | {r['model_us']:.2f} | "
              f"{tuple(r['tuned'])} | {r['tuned_us']:.2f} | {r['ratio']:.3f} | {warm} | "
              f"{r['tune_ms'] if r['tune_ms'] is not None else '-'} |")
    changed = [r for r in results if r["tuned"] != r["model"]]
    total_model = sum(r["model_us"] for r in results)
    total_tuned = sum(r["tuned_us"] for r in results)
    print(f"\n{len(changed)} of {len(results)} picks changed; sum of cold times model "
          f"{total_model:.1f} us, tuned {total_tuned:.1f} us (x{total_model / total_tuned:.3f});"
          f" worst ratio {min(r['ratio'] for r in results):.3f}; "
          f"{time.perf_counter() - t_start:.1f} s")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
