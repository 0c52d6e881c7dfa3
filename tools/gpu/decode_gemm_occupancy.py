"""How many blocks of each decode GEMM launch shape the device holds at once, as the driver
computes it (cuOccupancyMaxActiveClusters), against the slots matmul_decode.decode_split
assumes (sm_count x blocks_per_sm).

The split rule sizes a grid to one wave of resident blocks. A cluster's blocks must be
co-scheduled within one GPC, and two rings of ~100 KB share an SM only if the scheduler packs
them so; if the driver reports fewer resident blocks for a split than the rule assumes, that
split's grid runs in more waves than planned (the narrow projections' 1.6-1.9 TB/s at batch 64
against the unsplit LM head's 3.7, gpu18). One line per (kernel, N, warpgroups, split; the
TMA kernel's every cluster size 1..8), then a table of the split the TMA kernel's rule picks
from those counts for each of the kernel table's "... dgemm" rows (the decode GEMM widths at
16 and 64 rows), over the powers of two (the default) and over every cluster size
(ATLAS_DECODE_GEMM_ANY_SPLIT=1), with the blocks each grid has:

    python3 tools/gpu/decode_gemm_occupancy.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from atlas.bench.kernel_shapes import table_shapes
from atlas.kernels.registry import load_registry
from atlas.runtime.cuda import CudaBackend
from atlas.runtime.kernel_abi import GEMM_DECODE_SM90, GEMM_DECODE_TMA
from atlas.runtime.ops import matmul_decode as md
from atlas.runtime.ops.routes import DECODE_GEMM_SPLITS, DECODE_GEMM_TMA_SPLITS


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write the table as JSON here too")
    args = ap.parse_args()
    registry = load_registry()
    modules = {GEMM_DECODE_SM90.module, GEMM_DECODE_TMA.module}
    images: dict[str, bytes] = {}
    for target in registry.targets():
        ps = registry.select_target(target.hw, target.model, target.quant)
        if modules <= set(ps.modules):
            images = {name: ps.modules[name].image() for name in modules}
            break
    if not images:
        raise SystemExit(f"no PTX set holds both {sorted(modules)}")
    backend = CudaBackend(modules=images)
    sm_count = backend.device_facts().sm_count
    rows = []
    for tma in (False, True):
        kernel = "tma" if tma else "cp.async"
        max_shared = md.TMA_MAX_SHARED if tma else md.DECODE_MAX_SHARED
        max_stages = md.TMA_MAX_STAGES if tma else md.DECODE_MAX_STAGES
        for split in DECODE_GEMM_TMA_SPLITS if tma else DECODE_GEMM_SPLITS:
            sig = md.entry_point(split, tma=tma)
            handle = backend.kernel(sig.module, sig.func)
            backend.set_max_dynamic_shared(handle, max_shared)
            for groups in md.DECODE_GROUPS:
                for cols in md.DECODE_COLS:
                    if not tma and groups == 2 and cols < md.WIDE_MIN_COLS:
                        continue  # the cp.async kernel runs one warpgroup there
                    smem = md.smem_bytes(cols, groups, max_stages)
                    threads = md.DECODE_THREADS * groups + (md.TMA_PRODUCER_THREADS if tma
                                                            else 0)
                    clusters = backend.max_active_clusters(handle, threads, smem, split)
                    planned = sm_count * md.blocks_per_sm(cols, groups)
                    rows.append({"kernel": kernel, "cols": cols, "groups": groups,
                                 "split": split, "threads": threads, "shared": smem,
                                 "resident_blocks": clusters * split, "planned": planned})
                    print(f"{kernel:8s} N {cols:3d} G {groups} split {split}: "
                          f"{clusters * split:4d} resident blocks ({clusters} clusters), "
                          f"rule plans {planned}", flush=True)
    backend.close()
    resident = {(r["cols"], r["groups"], r["split"]): r["resident_blocks"]
                for r in rows if r["kernel"] == "tma"}
    print("\n| row | G | tiles | split (powers of two) | blocks | split (any) | blocks |\n"
          "|---|---|---|---|---|---|---|")
    for row in (r for r in table_shapes() if r.label.endswith(" dgemm")):
        groups = md.decode_groups(row.m, row.wide, tma=True)
        counts = {s: resident[md.decode_cols(row.m), groups, s] for s in DECODE_GEMM_TMA_SPLITS}
        tiles = -(-row.n // (md.DECODE_ROWS * groups))
        picks = [md.decode_split(row.m, row.n, row.k, sm_count, None, groups, counts, splits)
                 for splits in (DECODE_GEMM_SPLITS, DECODE_GEMM_TMA_SPLITS)]
        print(f"| {row.label} | {groups} | {tiles} | "
              + " | ".join(f"{s} | {tiles * s}" for s in picks) + " |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
