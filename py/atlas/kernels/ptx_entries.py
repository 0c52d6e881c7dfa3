"""What a PTX module's entry points declare about themselves, read from the PTX text.

Programmatic dependent launch is only safe for a kernel that executes `griddepcontrol.wait`
before touching what the previous kernel wrote (kernels/<hw>/common/atlas_common.cuh states
the contract). Rather than a hand-kept list of such kernels, the backend asks the compiled
PTX: an entry whose body contains the instruction opted in, every other entry is launched
with full stream serialization. The kernel-structure check uses the same scan to require
the opt-in of every hot entry point.
"""

from __future__ import annotations

import re

PDL_WAIT = "griddepcontrol.wait"

# A top-level function header: `.entry name(` or `.func (ret) name(`, optionally preceded by
# linkage directives. Entries are what the driver launches; `.func` bodies end an entry's span.
_HEADER = re.compile(rb"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.(entry|func)[ \t]+"
                     rb"(?:\([^)]*\)[ \t]*)?([A-Za-z_$][\w$]*)[ \t]*\(", re.M)


def entry_bodies(ptx: bytes | str) -> dict[str, bytes]:
    """Entry name -> its text up to the next top-level function header."""
    text = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
    heads = list(_HEADER.finditer(text))
    bodies: dict[str, bytes] = {}
    for i, m in enumerate(heads):
        if m.group(1) != b"entry":
            continue
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        bodies[m.group(2).decode()] = text[m.end():end]
    return bodies


def pdl_entries(ptx: bytes | str) -> frozenset[str]:
    """Entries that wait on their programmatic dependency (may launch before the previous
    kernel in the stream completes)."""
    return frozenset(name for name, body in entry_bodies(ptx).items()
                     if PDL_WAIT.encode() in body)


def entries_without_pdl(ptx: bytes | str) -> list[str]:
    """Entries that never wait on their programmatic dependency, sorted: the kernel
    structure check requires none (each would serialize the decode graph around it)."""
    return sorted(set(entry_bodies(ptx)) - pdl_entries(ptx))
