"""How long a CUDA process spends turning one PTX set into loaded modules.

The driver JIT-compiles every module's PTX to SASS at cuModuleLoadData; Atlas loads a set's
modules on one thread each (CudaBackend.load_modules) and keeps the driver's JIT cache large
enough to hold a set (runtime/cuda.py JIT_CACHE_BYTES). This prints, for one set, a cold
load side by side, a warm load from the JIT cache and (--serial) a cold load one module at a
time, the way Atlas loaded them before; each in a fresh process, the cache in a temporary
directory.

    python3 tools/gpu/bench_startup.py --target hopper/common/bf16
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import json, os, sys, time
from atlas.kernels.registry import load_registry
from atlas.runtime.cuda import CudaBackend
hw, model, quant = sys.argv[1].split("/")
ptx_set = load_registry().select_target(hw, model, quant)
images = {name: m.image() for name, m in ptx_set.modules.items()}
t0 = time.perf_counter()
backend = CudaBackend()
t1 = time.perf_counter()
if sys.argv[2] == "serial":
    for name, image in images.items():
        backend.load_module(name, image)
else:
    backend.load_modules(images)
t2 = time.perf_counter()
print(json.dumps({"modules": len(images), "context_s": t1 - t0, "load_s": t2 - t1}))
"""


def run_child(target: str, mode: str, cache: Path, disable: bool) -> dict:
    env = {**os.environ, "CUDA_CACHE_PATH": str(cache),
           "CUDA_CACHE_DISABLE": "1" if disable else "0"}
    out = subprocess.run([sys.executable, "-c", _CHILD, target, mode], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="hopper/common/bf16", help="hw/model/quant of the set")
    ap.add_argument("--serial", action="store_true", help="also time a serial cold load")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        rows = [("cold, one at a time", run_child(args.target, "serial", cache, True))
                ] if args.serial else []
        # the empty cache makes this load cold; it fills the cache for the next one
        rows += [("cold, side by side", run_child(args.target, "parallel", cache, False)),
                 ("warm (JIT cache)", run_child(args.target, "parallel", cache, False))]
    print(f"PTX set {args.target}: {rows[0][1]['modules']} modules, {os.cpu_count()} host cores")
    print(f"{'load':24s} {'seconds':>8s}")
    for label, r in rows:
        print(f"{label:24s} {r['load_s']:8.1f}")
    if args.out:
        args.out.write_text(json.dumps({label: r for label, r in rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
