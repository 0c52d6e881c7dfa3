"""What a PTX module's entry points declare about themselves, read from the PTX text.

Programmatic dependent launch is only safe for a kernel that executes `griddepcontrol.wait`
before touching what the previous kernel wrote (kernels/<hw>/common/atlas_common.cuh states
the contract). Rather than a hand-kept list of such kernels, the backend asks the compiled
PTX: an entry whose body, or the body of a function it calls (directly or through other
calls: a `__noinline__` device function holding the kernel's work), contains the instruction
opted in, every other entry is launched with full stream serialization. The
kernel-structure check uses the same scan to require the opt-in of every hot entry point.
"""

from __future__ import annotations

import re

PDL_WAIT = "griddepcontrol.wait"

# A top-level function header: `.entry name(` or `.func (ret) name(`, optionally preceded by
# linkage directives. Entries are what the driver launches; `.func` bodies end an entry's span.
_HEADER = re.compile(rb"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.(entry|func)[ \t]+"
                     rb"(?:\([^)]*\)[ \t]*)?([A-Za-z_$][\w$]*)[ \t]*\(", re.M)


# The callee of a `call` / `call.uni` instruction: after an optional return parameter list.
_CALL = re.compile(rb"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)")


def _bodies(text: bytes) -> dict[str, tuple[bytes, bytes]]:
    """Function name -> (kind, its text up to the next top-level function header)."""
    heads = list(_HEADER.finditer(text))
    out: dict[str, tuple[bytes, bytes]] = {}
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        name = m.group(2).decode()
        kind, body = out.get(name, (m.group(1), b""))
        out[name] = (kind, body + text[m.end():end])  # a declaration, then the definition
    return out


def entry_bodies(ptx: bytes | str) -> dict[str, bytes]:
    """Entry name -> its text up to the next top-level function header."""
    text = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
    return {name: body for name, (kind, body) in _bodies(text).items() if kind == b"entry"}


def pdl_entries(ptx: bytes | str) -> frozenset[str]:
    """Entries that wait on their programmatic dependency (may launch before the previous
    kernel in the stream completes): the wait in the entry's own body or in a function it
    reaches through calls."""
    text = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
    funcs = _bodies(text)

    def waits(name: str) -> bool:
        seen, todo = set(), [name]
        while todo:
            f = todo.pop()
            if f in seen or f not in funcs:
                continue
            seen.add(f)
            body = funcs[f][1]
            if PDL_WAIT.encode() in body:
                return True
            todo += [c.decode() for c in _CALL.findall(body)]
        return False

    return frozenset(name for name, (kind, _) in funcs.items() if kind == b"entry" and waits(name))


def entries_without_pdl(ptx: bytes | str) -> list[str]:
    """Entries that never wait on their programmatic dependency, sorted: the kernel
    structure check requires none (each would serialize the decode graph around it)."""
    return sorted(set(entry_bodies(ptx)) - pdl_entries(ptx))
