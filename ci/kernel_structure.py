#!/usr/bin/env python3
"""Kernel-structure check: the tree's rules, every module compiling, and register spills.

    python3 ci/kernel_structure.py [--strict] [--no-compile] [--jobs N] [--repo-root DIR]

1. Structure (atlas.kernels.structure): no shadow identical to its common file, no two
   private byte-identical sources (share with a relative symlink), symlinks relative and
   inside kernels/, every model directory run by some leaf.
2. Compile: every module of every leaf compiles for its leaf's arch with its leaf's flags
   (the real build, so kernels/gb10/common is compiled for sm_121 through the gb10 leaves).
   Two leaves whose PTX sets hold byte-identical modules fail: the second leaf specializes
   nothing, so it is five minutes of CI compiling the same thing (fold it into the other).
3. PDL: every entry point of every module executes `griddepcontrol.wait` (atlas::pdl_wait);
   one that does not is launched fully serialized and breaks the decode graph's overlap.
4. Spills: each distinct PTX is assembled to SASS (`nvcc -cubin -Xptxas -v`) and every
   function that spills registers is listed. Spills are reported, not failed, unless
   --strict: whether a spill matters depends on the kernel, and a reviewer decides.

Exit status is non-zero on any structure or compile violation (and on spills with --strict).
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).absolute().parents[1] / "py"))

from atlas.kernels.build import build_sets, default_cache_dir, default_jobs  # noqa: E402
from atlas.kernels.compiler import CompilerError  # noqa: E402
from atlas.kernels.ptx_entries import entries_without_pdl  # noqa: E402
from atlas.kernels.ptxset import PtxSet  # noqa: E402
from atlas.kernels.structure import (Spill, check_tree, identical_ptx_sets,  # noqa: E402
                                     parse_ptxas_spills)
from atlas.kernels.tree import list_targets  # noqa: E402


def compile_all(repo_root: Path, jobs: int,
                cache_dir: Path | None) -> tuple[list[PtxSet], list[str]]:
    """Build every leaf at once (one pool over all modules); on a compile error, leaf by
    leaf, so one failure does not hide the others."""
    targets = list_targets(repo_root)
    try:
        return build_sets(repo_root, targets, skip=False, jobs=jobs, cache_dir=cache_dir), []
    except CompilerError:
        pass
    sets, failures = [], []
    for target in targets:
        try:
            sets += build_sets(repo_root, [target], skip=False, jobs=jobs, cache_dir=cache_dir)
        except CompilerError as exc:
            failures.append(f"{target}: {exc}")
    return sets, failures


def ptxas_spills(ptx: str, arch: str) -> list[Spill]:
    """Assemble one PTX module to SASS and return the functions that spill."""
    with tempfile.TemporaryDirectory(prefix="atlas-sass-") as tmp:
        src = Path(tmp) / "module.ptx"
        src.write_text(ptx, encoding="utf-8")
        cmd = ["nvcc", "-cubin", f"-arch={arch}", "-Xptxas", "-v", str(src),
               "-o", str(Path(tmp) / "module.cubin")]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise CompilerError(f"ptxas failed ({arch}):\n{result.stderr.strip()}")
    return parse_ptxas_spills(result.stdout + result.stderr)


def spill_report(sets: list[PtxSet], jobs: int) -> list[str]:
    """One line per spilling function, per distinct (arch, PTX); leaves sharing PTX share it."""
    distinct: dict[str, tuple[str, str, list[str]]] = {}
    for ptx_set in sets:
        for module in ptx_set.modules.values():
            key = hashlib.sha256(f"{ptx_set.arch}\0{module.sha256}".encode()).hexdigest()
            entry = distinct.setdefault(key, (ptx_set.arch, module.ptx, []))
            entry[2].append(f"{ptx_set.target}:{module.name}")
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = pool.map(lambda e: (e, ptxas_spills(e[1], e[0])), distinct.values())
        lines = []
        for (arch, _, users), spills in results:
            for s in spills:
                lines.append(f"{arch} {s.function}: {s.stores} B spill stores, {s.loads} B "
                             f"spill loads (in {', '.join(users)})")
    return sorted(lines)


def pdl_report(sets: list[PtxSet]) -> list[str]:
    """`target:module.entry` for every entry point that never waits on its dependency."""
    return sorted(f"{ptx_set.target}:{module.name}.{entry}"
                  for ptx_set in sets for module in ptx_set.modules.values()
                  for entry in entries_without_pdl(module.ptx))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="fail on register spills too")
    parser.add_argument("--no-compile", action="store_true",
                        help="structure rules only (no nvcc)")
    parser.add_argument("--jobs", "-j", type=int, default=default_jobs())
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir(),
                        help="compiled-PTX cache shared with `atlas kernels build`")
    parser.add_argument("--no-cache", action="store_true", help="compile every module")
    parser.add_argument("--repo-root", type=Path, default=Path(__file__).absolute().parents[1],
                        help="the checkout whose kernels/ to check (default: this one)")
    args = parser.parse_args()
    repo_root = args.repo_root.absolute()

    failed = False
    violations = check_tree(repo_root)
    for v in violations:
        print(f"FAIL {v}")
    failed |= bool(violations)
    print(f"structure: {len(violations)} violation(s)")
    if args.no_compile:
        return int(failed)

    sets, failures = compile_all(repo_root, args.jobs, None if args.no_cache else args.cache_dir)
    for failure in failures:
        print(f"FAIL compile {failure}")
    failed |= bool(failures)
    modules = sum(len(s.modules) for s in sets)
    print(f"compile: {len(sets)} leaf/leaves, {modules} module(s) built, "
          f"{len(failures)} leaf/leaves failed")

    twins = identical_ptx_sets(sets)
    for v in twins:
        print(f"FAIL {v}")
    print(f"identical PTX: {len(twins)} leaf/leaves with the same PTX as another")
    failed |= bool(twins)

    no_pdl = pdl_report(sets)
    for line in no_pdl:
        print(f"FAIL pdl {line}: no griddepcontrol.wait (call atlas::pdl_enter() first)")
    print(f"pdl: {len(no_pdl)} entry point(s) without a programmatic-dependency wait")
    failed |= bool(no_pdl)

    spills = spill_report(sets, args.jobs)
    for line in spills:
        print(f"{'FAIL' if args.strict else 'WARN'} spill {line}")
    print(f"spills: {len(spills)} function(s) spill registers"
          + ("" if args.strict else " (reported; --strict fails on them)"))
    failed |= args.strict and bool(spills)
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
