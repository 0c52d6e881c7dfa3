"""A target's sources: its modules, their include closure, and the closure hash.

This is the ONE definition of "what a target compiles". The build (Bazel and
`atlas kernels build`), the runtime registry and the merge-lattice gate all call it, because
two definitions that drift make every attested hash mismatch, and a mismatch looks exactly
like "the kernels changed".

Modules: every `*.cu` in `kernels/<hw>/common/` plus the leaf's own `*.cu`; a leaf file
shadows the common file of the same stem whole-file; KERNEL.toml `[modules]` renames a stem.

Include closure: quoted `#include "..."` lines are followed transitively, relative to the
directory of the including file *as it is named in the tree*. That is what nvcc does: a
symlink `gb10/common/x.cu -> ../../hopper/common/x.cu` that includes `"y.cuh"` compiles
`gb10/common/y.cuh`, not `hopper/common/y.cuh`. So every file is recorded under its
as-named repo-relative path with the bytes read through any symlink (the bytes actually
compiled). Angle-bracket includes are not followed (the compiler version covers them);
`#if` is not evaluated, so an include in an untaken branch is walked anyway, which costs
re-runs, never soundness. An unresolvable quoted include is a hard error naming file and line.

Reachability: `closure_paths` also lists the tree files each symlink points at (following
relative file symlinks hop by hop), so a gate asking "which targets can an edit to
hopper/common/x.cu reach" finds the gb10 targets that compile it through a symlink.
Those link targets are not hashed separately: their bytes already are.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from pathlib import Path

from atlas.core.target import KernelTarget

from .tree import (COMMON_DIR, KernelTreeError, hw_dir, leaf_dir, leaf_toml_paths,
                   load_kernel)

CLOSURE_SCHEMA = "atlas-closure-v1"
SOURCE_SUFFIX = ".cu"
_QUOTED_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.MULTILINE)
_MAX_LINK_HOPS = 32


class SourceError(KernelTreeError):
    """A leaf's sources cannot be resolved (missing include, bad rename, escaping path)."""


def _rel(repo_root: Path, path: Path) -> str:
    return path.relative_to(repo_root).as_posix()


def leaf_modules(repo_root: Path, target: KernelTarget) -> dict[str, Path]:
    """Module name -> source path as it sits in the tree (symlinks not resolved), sorted."""
    common = {p.stem: p for p in (hw_dir(repo_root, target.hw) / COMMON_DIR).glob(
        f"*{SOURCE_SUFFIX}")}
    own = {p.stem: p for p in leaf_dir(repo_root, target).glob(f"*{SOURCE_SUFFIX}")}
    stems = {**common, **own}  # the leaf's file shadows the common one whole-file
    renames = load_kernel(repo_root, target).modules
    unknown = sorted(set(renames) - set(stems))
    if unknown:
        raise SourceError(f"{target}: KERNEL.toml [modules] renames {', '.join(unknown)}, "
                          f"which no .cu file of this leaf provides")
    modules: dict[str, Path] = {}
    for stem in sorted(stems):
        path = stems[stem]
        if not path.is_file():
            raise SourceError(f"{_rel(repo_root, path)} is a broken symlink")
        name = renames.get(stem, stem)
        if name in modules:
            raise SourceError(f"{target}: module {name!r} comes from both "
                              f"{_rel(repo_root, modules[name])} and {_rel(repo_root, path)}")
        modules[name] = path
    return dict(sorted(modules.items()))


def _resolve_include(repo_root: Path, including: str, line: int, name: str) -> str:
    """The repo-relative path a quoted include names, as the compiler will open it."""
    where = f"{including}:{line}: #include \"{name}\""
    if posixpath.isabs(name):
        raise SourceError(f"{where}: absolute include paths are not allowed")
    joined = posixpath.join(posixpath.dirname(including), name)
    lexical = posixpath.normpath(joined)
    if lexical == ".." or lexical.startswith("../"):
        raise SourceError(f"{where}: resolves outside the repository")
    physical = repo_root / joined  # the OS resolves `..` through directories, as nvcc does
    if not physical.is_file():
        raise SourceError(f"{where}: no such file ({lexical})")
    if not os.path.samefile(physical, repo_root / lexical):
        raise SourceError(f"{where}: a directory symlink makes this path ambiguous "
                          f"(share files with file symlinks, not directory symlinks)")
    return lexical


def include_closure(repo_root: Path, source: str) -> dict[str, bytes]:
    """Repo-relative path -> bytes of `source` and everything it includes, transitively."""
    closure: dict[str, bytes] = {}
    pending = [source]
    while pending:
        rel = pending.pop()
        if rel in closure:
            continue
        data = closure[rel] = (repo_root / rel).read_bytes()
        for match in _QUOTED_INCLUDE.finditer(data):
            line = data.count(b"\n", 0, match.start()) + 1
            name = match.group(1).decode("utf-8", errors="replace")
            pending.append(_resolve_include(repo_root, rel, line, name))
    return closure


def module_closures(repo_root: Path, target: KernelTarget) -> dict[str, dict[str, bytes]]:
    """Module name -> the include closure of its source."""
    return {name: include_closure(repo_root, _rel(repo_root, path))
            for name, path in leaf_modules(repo_root, target).items()}


def closure_files(repo_root: Path, target: KernelTarget) -> dict[str, bytes]:
    """Everything the closure hash covers: all modules' closures plus the leaf's TOML files."""
    files: dict[str, bytes] = {}
    for closure in module_closures(repo_root, target).values():
        files.update(closure)
    for rel in leaf_toml_paths(repo_root, target):
        files[rel] = (repo_root / rel).read_bytes()
    return dict(sorted(files.items()))


def link_targets(repo_root: Path, rel: str) -> list[str]:
    """The tree paths a file symlink chain passes through (empty for a regular file).
    An absolute link leaves the tree's own structure (e.g. Bazel's sandbox) and ends the walk;
    `ci/kernel_structure.py` rejects absolute links inside the tree itself."""
    hops: list[str] = []
    current = rel
    for _ in range(_MAX_LINK_HOPS):
        path = repo_root / current
        if not path.is_symlink():
            return hops
        pointee = os.readlink(path)
        if os.path.isabs(pointee):
            return hops
        current = posixpath.normpath(posixpath.join(posixpath.dirname(current), pointee))
        if current == ".." or current.startswith("../"):
            raise SourceError(f"{rel}: symlink points outside the repository")
        hops.append(current)
    raise SourceError(f"{rel}: symlink chain longer than {_MAX_LINK_HOPS} hops")


def closure_paths(repo_root: Path, target: KernelTarget) -> list[str]:
    """Sorted repo-relative paths whose edit can change this target: every hashed file plus
    the tree files its symlinks point at."""
    paths = set()
    for rel in closure_files(repo_root, target):
        paths.add(rel)
        paths.update(link_targets(repo_root, rel))
    return sorted(paths)


def digest_closure(files: dict[str, bytes], arch: str, compiler_version: str,
                   flags: list[str]) -> str:
    """sha256 over schema, arch, compiler, flags (in order), then sorted paths and bytes.
    Every field is length-prefixed, so no two different inputs share a byte stream."""
    h = hashlib.sha256()

    def field(tag: bytes, data: bytes) -> None:
        h.update(tag + b"\0" + str(len(data)).encode() + b"\0" + data)

    field(b"schema", CLOSURE_SCHEMA.encode())
    field(b"arch", arch.encode())
    field(b"compiler", compiler_version.encode())
    for flag in flags:
        field(b"flag", flag.encode())
    for rel in sorted(files):
        field(b"path", rel.encode())
        field(b"bytes", files[rel])
    return h.hexdigest()


def closure_hash(repo_root: Path, target: KernelTarget, arch: str, compiler_version: str,
                 flags: list[str]) -> str:
    """The include-closure hash of `target` compiled for `arch` by `compiler_version` with
    `flags`. Verification passes the values stored in a record, so only a source change can
    move it."""
    return digest_closure(closure_files(repo_root, target), arch, compiler_version, flags)
