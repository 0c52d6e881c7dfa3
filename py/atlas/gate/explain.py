"""The advisory plane: a reviewer's summary of a change. It never reaches a verdict.

`atlas gate explain` sorts the changed paths into categories and shows, for every kernel
path, which targets' include closures it reaches, and lists every target in the tree,
untouched ones included (listing only the affected ones would turn "ungated" into
"unaffected" by omission). Nothing here is imported by `check`; a test holds that line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from .coverage import (KERNELS_DIR, invalidated_by, is_bench_thresholds, is_boundary_file,
                       is_under, on_boundary)

#: categories in the order they are printed; the first whose test accepts a path wins
CATEGORIES: tuple[str, ...] = (
    "gate machinery (re-opens every gate)",
    "thresholds (BENCH.toml)",
    "kernel sources and build inputs",
    "host code and build on the boundary",
    "tests",
    "docs",
    "CI",
    "elsewhere (off the boundary)",
)


def category(path: str) -> str:
    if is_boundary_file(path):
        return CATEGORIES[0]
    if is_bench_thresholds(path):
        return CATEGORIES[1]
    if is_under(path, KERNELS_DIR):
        return CATEGORIES[2]
    if on_boundary(path):
        return CATEGORIES[3]
    if is_under(path, "tests"):
        return CATEGORIES[4]
    if is_under(path, "docs") or path.endswith(".md"):
        return CATEGORIES[5]
    if is_under(path, "ci") or is_under(path, ".ci"):
        return CATEGORIES[6]
    return CATEGORIES[7]


def categorize(paths: Iterable[str]) -> dict[str, list[str]]:
    """Category -> sorted paths, categories in CATEGORIES order, empty ones left out."""
    groups: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    for path in sorted(set(paths)):
        groups[category(path)].append(path)
    return {c: ps for c, ps in groups.items() if ps}


def reach(paths: Iterable[str], closures: Mapping[str, frozenset[str]]) -> dict[str, list[str]]:
    """Kernel path -> the targets whose closure holds it (empty: compiled by no target)."""
    return {p: sorted(t for t, files in closures.items() if p in files)
            for p in sorted(set(paths)) if is_under(p, KERNELS_DIR)}


@dataclass(frozen=True)
class Explanation:
    base: str
    groups: Mapping[str, list[str]]
    reached: Mapping[str, list[str]]
    targets: Mapping[str, frozenset[str]]
    unresolved: Mapping[str, str]  # target -> why its closure could not be listed
    floor: frozenset[str]

    def lines(self) -> list[str]:
        out = [f"advisory summary of changes since {self.base} (decides nothing; "
               f"`atlas gate check` does)"]
        if not self.groups:
            out.append("  no changed paths")
        for name, paths in self.groups.items():
            out.append(f"  {name}: {len(paths)}")
            out += [f"    {p}" for p in paths]
        if self.reached:
            out.append("kernel paths and the targets they reach:")
            out += [f"  {p} -> {', '.join(ts) or 'no target compiles it'}"
                    for p, ts in self.reached.items()]
        touched = {t for ts in self.reached.values() for t in ts}
        out.append("every target in the tree:")
        for target in sorted({*self.targets, *self.unresolved}):
            if target in self.unresolved:
                out.append(f"  {target}: closure unresolvable: {self.unresolved[target]}")
            else:
                out.append(f"  {target}: {'touched' if target in touched else 'untouched'}")
        gates = ", ".join(sorted(self.floor)) or "none"
        out.append(f"path floor alone would re-open: {gates}")
        return out


def explain(base: str, paths: Iterable[str], closures: Mapping[str, frozenset[str]],
            unresolved: Mapping[str, str]) -> Explanation:
    paths = sorted(set(paths))
    return Explanation(base, categorize(paths), reach(paths, closures), closures, unresolved,
                       frozenset(invalidated_by(paths)))
