"""Ship compile-time variant PTX sets to the device machine as deltas, and list the cubins a
set of PTX sets needs (tools/gpu/prep_device.sh, tools/gpu/call_head.sh).

A variant set (`atlas kernels build -D NAME=VALUE`) differs from the default one in the few
modules the define reaches; carrying it whole would double the PTX a call carries (the device
tool's working tree is capped at 64 MiB). So prep writes each variant set as its header plus
only the modules whose PTX differs from the default set of the same file name, and the call
rebuilds the full set from the two.

    python3 ptxset_delta.py split DEFAULT_DIR VARIANT_DIR OUT_DIR   # on the CPU machine
    python3 ptxset_delta.py merge DEFAULT_DIR DELTA_DIR OUT_DIR     # on the device machine
    python3 ptxset_delta.py cubins SET_DIR...                       # <sha256>.cubin names
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

SUFFIX = ".ptxset.json"


def split(default: dict, variant: dict) -> dict:
    """The variant's header and the modules whose PTX differs from the default's."""
    base = default["modules"]
    return {**variant, "modules": {name: module for name, module in variant["modules"].items()
                                   if base.get(name, {}).get("ptx") != module["ptx"]}}


def merge(default: dict, delta: dict) -> dict:
    """The full variant set: the default's modules with the delta's replacing theirs."""
    return {**delta, "modules": {**default["modules"], **delta["modules"]}}


def cubin_names(sets: list[dict]) -> list[str]:
    """tools/build_sass.py's file names of every module of these sets."""
    return sorted({hashlib.sha256(m["ptx"].encode()).hexdigest() + ".cubin"
                   for s in sets for m in s["modules"].values()})


def _pairs(left: Path, right: Path, out: Path, fn) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(right.glob(f"*{SUFFIX}")):
        other = left / path.name
        if not other.is_file():
            raise SystemExit(f"ptxset_delta: {other} missing (the default set of {path.name})")
        result = fn(json.loads(other.read_text()), json.loads(path.read_text()))
        (out / path.name).write_text(json.dumps(result, sort_keys=True))
        print(f"{path.name}: {len(result['modules'])} modules")


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] in ("split", "merge"):
        _pairs(Path(argv[1]), Path(argv[2]), Path(argv[3]), split if argv[0] == "split" else merge)
        return 0
    if len(argv) >= 2 and argv[0] == "cubins":
        sets = [json.loads(p.read_text()) for d in argv[1:] for p in Path(d).glob(f"*{SUFFIX}")]
        print("\n".join(cubin_names(sets)))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
