"""Compile every module of the built PTX sets to SASS ahead of time (ptxas), for ATLAS_SASS_DIR.

    python3 tools/build_sass.py --kernels build/kernels --out build/sass [-j N]

Each distinct PTX image becomes `<sha256 of the PTX>.cubin` for its set's arch (see
py/atlas/kernels/sass.py: the runtime loads a cubin only for the exact PTX it was made from).
Cubins already present are kept, so re-running after a rebuild compiles only what changed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "py"))

from atlas.kernels.registry import PtxRegistry  # noqa: E402
from atlas.kernels.sass import sass_name  # noqa: E402


def compile_one(ptx: bytes, arch: str, out: Path) -> float:
    """ptxas one image into out (written atomically); the seconds it took."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "module.ptx"
        src.write_bytes(ptx.rstrip(b"\0"))
        dst = Path(tmp) / "module.cubin"
        subprocess.run(["ptxas", f"-arch={arch}", "-O3", str(src), "-o", str(dst)], check=True)
        os.replace(dst, out)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=Path, required=True, help="directory of *.ptxset.json")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    registry = PtxRegistry.load(args.kernels)
    todo: dict[str, tuple[str, bytes, str]] = {}
    for target in registry.targets():
        ptx_set = registry.select_target(target.hw, target.model, target.quant)
        for name, module in ptx_set.modules.items():
            image = module.image()
            todo.setdefault(sass_name(image), (name, image, ptx_set.arch))
    args.out.mkdir(parents=True, exist_ok=True)
    pending = {k: v for k, v in todo.items() if not (args.out / k).is_file()}
    print(f"build_sass: {len(todo)} distinct modules, {len(pending)} to compile")
    # the largest first: the slowest compile should not start last
    order = sorted(pending.items(), key=lambda kv: -len(kv[1][1]))
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futures = [(v[0], pool.submit(compile_one, v[1], v[2], args.out / k)) for k, v in order]
        for name, fut in futures:
            print(f"  {name}: {fut.result():.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
