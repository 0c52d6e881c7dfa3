"""The kernel tree's structural rules, as pure checks over the files (no compiler).

* A leaf file that shadows a `common/` file must differ from it: an identical shadow is a
  copy that silently stops tracking fixes to the common kernel.
* No two private (non-symlink) source files may be byte-identical: leaves that want the same
  shadow share one file through a relative symlink, so a fix lands in both.
* Symlinks inside `kernels/` are relative, point at a file inside `kernels/`, and are never
  directories (a directory symlink makes quoted-include resolution ambiguous; see
  `sources.py`).
* Every model directory (MODEL.toml) is run by some leaf: its own `<quant>/` or the
  hardware's baseline `common/<quant>/`; otherwise its MODEL.toml reaches no PTX set.
* (Over built sets, `identical_ptx_sets`) no two leaves of one arch compile to the same
  modules: such a leaf specializes nothing and only costs compile time.

`ci/kernel_structure.py` runs these and adds the compiler checks (every module compiles for
its leaf's arch, ptxas spill report); `parse_ptxas_spills` reads ptxas's `-v` output.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from .ptxset import PtxSet
from .tree import (COMMON_DIR, HARDWARE_TOML, KERNELS_DIR, MODEL_TOML, hw_dir, leaf_dir,
                   list_targets, served_model_dirs)

SOURCE_SUFFIXES = (".cu", ".cuh")


@dataclass(frozen=True)
class Violation:
    path: str  # repo-relative
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: [{self.rule}] {self.message}"


@dataclass(frozen=True)
class Spill:
    """ptxas's report for one function that spills registers to local memory."""

    function: str
    stores: int
    loads: int


def _rel(repo_root: Path, path: Path) -> str:
    return path.relative_to(repo_root).as_posix()


def _check_symlinks(repo_root: Path) -> list[Violation]:
    found = []
    kernels = repo_root / KERNELS_DIR
    for dirpath, dirnames, filenames in os.walk(kernels):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            if not path.is_symlink():
                continue
            rel, pointee = _rel(repo_root, path), os.readlink(path)
            if os.path.isabs(pointee):
                found.append(Violation(rel, "symlink", f"absolute symlink to {pointee}; "
                                       "share files with relative symlinks"))
            elif path.is_dir():
                found.append(Violation(rel, "symlink", "directory symlink; link files instead"))
            elif not path.exists():
                found.append(Violation(rel, "symlink", f"dangling symlink to {pointee}"))
            elif not path.resolve().is_relative_to(kernels.resolve()):
                found.append(Violation(rel, "symlink", f"points outside {KERNELS_DIR}/"))
    return found


def _leaf_sources(repo_root: Path) -> list[Path]:
    """Every source file in every leaf directory, sorted."""
    return sorted(p for t in list_targets(repo_root) for p in leaf_dir(repo_root, t).iterdir()
                  if p.suffix in SOURCE_SUFFIXES and p.is_file())


def _check_identical_shadows(repo_root: Path) -> list[Violation]:
    found = []
    for path in _leaf_sources(repo_root):
        hw = path.relative_to(repo_root / KERNELS_DIR).parts[0]
        common = hw_dir(repo_root, hw) / COMMON_DIR / path.name
        if common.is_file() and common.read_bytes() == path.read_bytes():
            found.append(Violation(_rel(repo_root, path), "identical-shadow",
                                   f"byte-identical to {_rel(repo_root, common)}; delete the "
                                   "shadow, the common file is used without it"))
    return found


def _check_private_copies(repo_root: Path) -> list[Violation]:
    by_bytes: dict[bytes, list[Path]] = defaultdict(list)
    for path in sorted((repo_root / KERNELS_DIR).rglob("*")):
        if path.suffix in SOURCE_SUFFIXES and path.is_file() and not path.is_symlink():
            by_bytes[path.read_bytes()].append(path)
    found = []
    for paths in by_bytes.values():
        if len(paths) > 1:
            first, *rest = paths
            for copy in rest:
                link = os.path.relpath(first, copy.parent)
                found.append(Violation(_rel(repo_root, copy), "private-copy",
                                       f"byte-identical private copy of "
                                       f"{_rel(repo_root, first)}; share it: "
                                       f"ln -sf {link} {_rel(repo_root, copy)}"))
    return found


def _check_unserved_models(repo_root: Path) -> list[Violation]:
    served = {(t.hw, m) for t in list_targets(repo_root)
              for m in served_model_dirs(repo_root, t)}
    found = []
    for model_toml in sorted((repo_root / KERNELS_DIR).glob(f"*/*/{MODEL_TOML}")):
        hw, model = model_toml.parent.parent.name, model_toml.parent.name
        if (model_toml.parent.parent / HARDWARE_TOML).is_file() and (hw, model) not in served:
            found.append(Violation(_rel(repo_root, model_toml), "unserved-model",
                                   f"no leaf runs this model: add {KERNELS_DIR}/{hw}/"
                                   f"{COMMON_DIR}/<quant>/KERNEL.toml or a <quant>/ leaf here"))
    return found


def check_tree(repo_root: Path) -> list[Violation]:
    """Every structural violation in the kernel tree at `repo_root`, sorted by path."""
    found = (_check_symlinks(repo_root) + _check_identical_shadows(repo_root)
             + _check_private_copies(repo_root) + _check_unserved_models(repo_root))
    return sorted(found, key=lambda v: (v.path, v.rule))


def identical_ptx_sets(sets: list[PtxSet]) -> list[Violation]:
    """A violation for every leaf whose modules (names and PTX bytes) equal an earlier
    leaf's of the same arch: it specializes nothing. Skip-build sets (no PTX) are ignored."""
    first: dict[tuple[str, tuple[tuple[str, str], ...]], PtxSet] = {}
    found = []
    for ptx_set in sorted(sets, key=lambda s: s.target.name):
        if ptx_set.skipped:
            continue
        key = (ptx_set.arch, tuple(sorted((n, m.sha256) for n, m in ptx_set.modules.items())))
        twin = first.setdefault(key, ptx_set)
        if twin is not ptx_set:
            path = f"{KERNELS_DIR}/{ptx_set.target.name}"
            found.append(Violation(path, "identical-ptx",
                                   f"compiles to the same PTX as {KERNELS_DIR}/"
                                   f"{twin.target.name} ({len(ptx_set.modules)} modules): it "
                                   "specializes nothing; fold it into that leaf (keep its "
                                   "MODEL.toml and BENCH.toml, drop its <quant>/ directory)"))
    return found


_FUNCTION = re.compile(r"Function properties for (\S+)")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas_spills(output: str) -> list[Spill]:
    """The functions of a `ptxas -v` report that spill (stores or loads > 0)."""
    spills, function = [], None
    for line in output.splitlines():
        if (m := _FUNCTION.search(line)) is not None:
            function = m.group(1)
        elif function is not None and (m := _SPILLS.search(line)) is not None:
            stores, loads = int(m.group(1)), int(m.group(2))
            if stores or loads:
                spills.append(Spill(function, stores, loads))
            function = None
    return spills
