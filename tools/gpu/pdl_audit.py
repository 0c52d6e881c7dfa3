"""Audit the built cubins for non-coherent loads that ptxas moved above a PDL wait.

    python3 tools/gpu/pdl_audit.py --kernels build/kernels --sass build/sass

The PDL contract (atlas_common.cuh) lets a kernel read only weights before its
griddepcontrol.wait. The compiler keeps the PTX in that order, but ptxas treats ld.global.nc
(a `const __restrict__` pointer's load) as reading memory nobody writes during the kernel and
may schedule it above the wait: it did for add_rmsnorm's late entries, whose wait has no
griddepcontrol.launch_dependents right after it (their delta row, the previous kernel's
output, was read before that kernel had finished). This compares, for every entry point with
a wait, the non-coherent global loads before the first wait in the PTX text with the
LDG...CONSTANT instructions before the first ACQBULK (the wait) in the SASS: more in the SASS
means some were hoisted. Text order is a heuristic over branches, so a report names entries
to read, not proven races. Needs cuobjdump (CUOBJDUMP, or on PATH); exits 1 on a finding.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from atlas.kernels.registry import PtxRegistry  # noqa: E402
from atlas.kernels.sass import sass_name  # noqa: E402

_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\(")
_SASS_FUNC = re.compile(r"\s+Function : (\w+)")
_SASS_INSN = re.compile(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
_NC_LOAD = re.compile(r"\bld\.global\.nc\b")
_CONST_LDG = re.compile(r"\bLDG\.E\S*\.CONSTANT\b")


@dataclass(frozen=True)
class Hoist:
    """An entry whose SASS loads more non-coherently before its wait than its PTX does."""
    module: str
    entry: str
    ptx_loads: int
    sass_loads: int


def ptx_loads_before_wait(ptx: str) -> dict[str, int]:
    """Per entry point with a griddepcontrol.wait: its ld.global.nc before the first wait."""
    out: dict[str, int] = {}
    starts = [(m.group(1), m.end()) for m in _ENTRY.finditer(ptx)]
    for i, (name, start) in enumerate(starts):
        body = ptx[start:starts[i + 1][1] if i + 1 < len(starts) else len(ptx)]
        head, wait, _ = body.partition("griddepcontrol.wait")
        if wait:
            out[name] = len(_NC_LOAD.findall(head))
    return out


def sass_loads_before_wait(sass: str) -> dict[str, int]:
    """Per function with an ACQBULK: its LDG...CONSTANT before the first one."""
    out: dict[str, int] = {}
    name, count, waited = None, 0, False
    for line in sass.splitlines():
        func = _SASS_FUNC.match(line)
        if func:
            name, count, waited = func.group(1), 0, False
            continue
        insn = _SASS_INSN.match(line)
        if name is None or insn is None or waited:
            continue
        if "ACQBULK" in insn.group(1):
            out[name], waited = count, True
        elif _CONST_LDG.search(insn.group(1)):
            count += 1
    return out


def hoists(module: str, ptx: str, sass: str) -> list[Hoist]:
    """The entries of one module whose SASS hoisted non-coherent loads above the wait."""
    sass_counts = sass_loads_before_wait(sass)
    return [Hoist(module, e, n, sass_counts[e]) for e, n in ptx_loads_before_wait(ptx).items()
            if sass_counts.get(e, 0) > n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=Path, required=True, help="directory of *.ptxset.json")
    ap.add_argument("--sass", type=Path, required=True, help="tools/build_sass.py's output")
    args = ap.parse_args(argv)
    cuobjdump = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not cuobjdump:
        print("pdl_audit: no cuobjdump (set CUOBJDUMP): not audited")
        return 0
    registry = PtxRegistry.load(args.kernels)
    images: dict[str, tuple[str, bytes]] = {}
    for target in registry.targets():
        ptx_set = registry.select_target(target.hw, target.model, target.quant)
        for name, module in ptx_set.modules.items():
            images.setdefault(sass_name(module.image()), (name, module.image()))
    found: list[Hoist] = []
    for cubin, (name, image) in sorted(images.items()):
        path = args.sass / cubin
        if not path.is_file():
            print(f"pdl_audit: {name}: no cubin {cubin} (run tools/build_sass.py)")
            return 1
        sass = subprocess.run([cuobjdump, "-sass", str(path)], check=True, capture_output=True,
                              text=True).stdout
        found += hoists(name, image.rstrip(b"\0").decode(), sass)
    for h in found:
        print(f"pdl_audit: {h.module} {h.entry}: {h.sass_loads} non-coherent loads before the "
              f"wait in SASS, {h.ptx_loads} in PTX")
    print(f"pdl_audit: {len(images)} modules, {len(found)} entries with hoisted loads")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
