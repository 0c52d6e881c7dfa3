"""Precompiled SASS beside the PTX: skip the driver's cold JIT on a fresh machine.

A PTX set is the build's artifact; the driver compiles each module to SASS at load time and
caches it per machine. A fresh machine (a container, a CI runner with a GPU, a benchmark host)
pays that whole compile in its first process: about three minutes for the Hopper common set
on an H200 host, most of it one large module. `tools/build_sass.py` runs ptxas ahead of time
for the set's exact arch and names each cubin after the SHA-256 of the PTX it came from; when
`ATLAS_SASS_DIR` points at such a directory, CudaBackend loads the cubin whose name matches a
module's PTX and JIT-compiles only modules without one. A cubin is found by the content of the
PTX, so a stale directory can never hand a module the SASS of other source.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Mapping

SASS_DIR_ENV = "ATLAS_SASS_DIR"
CUBIN_SUFFIX = ".cubin"


def sass_name(ptx: bytes) -> str:
    """The cubin file name of a PTX image (trailing NULs are not part of the source)."""
    return hashlib.sha256(ptx.rstrip(b"\0")).hexdigest() + CUBIN_SUFFIX


def find_sass(ptx: bytes, env: Mapping[str, str] | None = None) -> bytes | None:
    """The precompiled cubin of this PTX under $ATLAS_SASS_DIR, or None."""
    root = (os.environ if env is None else env).get(SASS_DIR_ENV)
    if not root:
        return None
    path = Path(root) / sass_name(ptx)
    return path.read_bytes() if path.is_file() else None
