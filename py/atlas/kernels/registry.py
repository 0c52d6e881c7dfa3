"""Find the built PTX sets at run time and pick the one for the model being served.

Where the sets are, first match wins:
1. `$ATLAS_KERNELS_DIR` (an explicit choice; it must exist);
2. Bazel runfiles: `$RUNFILES_DIR/<workspace>/kernels/`, or the `kernels/` directory beside
   this package when it runs from a runfiles tree (`bazel run //py/atlas_cli:serve`);
3. the default build directory `<repo>/build/kernels` (`atlas kernels build`).
A source tree's `kernels/` never holds `*.ptxset.json`, so (2) cannot mistake it for sets.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from atlas.core.target import KernelTarget

from .ptxset import PTXSET_SUFFIX, PtxSet
from .tree import ModelMatch, pick_model_leaf

KERNELS_DIR_ENV = "ATLAS_KERNELS_DIR"
DEFAULT_BUILD_DIR = Path("build") / "kernels"
# Not resolved: in a Bazel runfiles tree this file is a symlink into the source tree.
_PACKAGE_ROOT = Path(__file__).absolute().parents[3]  # <root>/py/atlas/kernels/registry.py


class KernelsNotFound(FileNotFoundError):
    """No PTX sets were found, or the requested target is not among them."""


def _has_sets(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob(f"*{PTXSET_SUFFIX}"))


def find_kernels_dir(env: Mapping[str, str] | None = None,
                     package_root: Path = _PACKAGE_ROOT) -> Path:
    """The directory holding the PTX sets, by the search order in the module docstring."""
    env = os.environ if env is None else env
    explicit = env.get(KERNELS_DIR_ENV)
    if explicit:
        if not Path(explicit).is_dir():
            raise KernelsNotFound(f"{KERNELS_DIR_ENV}={explicit} is not a directory")
        return Path(explicit)
    candidates = []
    if env.get("RUNFILES_DIR"):
        candidates += sorted(Path(env["RUNFILES_DIR"]).glob("*/kernels"))
    candidates += [package_root / "kernels", package_root / DEFAULT_BUILD_DIR]
    for directory in candidates:
        if _has_sets(directory):
            return directory
    raise KernelsNotFound(
        "no PTX sets found; run `atlas kernels build` (or `bazel build //kernels:all`), or "
        f"set {KERNELS_DIR_ENV}. Searched: {', '.join(str(c) for c in candidates)}")


class PtxRegistry:
    """The PTX sets of one build, by target."""

    def __init__(self, sets: Mapping[KernelTarget, PtxSet], origin: Path) -> None:
        self._sets = dict(sorted(sets.items(), key=lambda kv: kv[0].name))
        self.origin = origin

    @classmethod
    def load(cls, directory: Path) -> "PtxRegistry":
        sets = {}
        for path in sorted(directory.glob(f"*{PTXSET_SUFFIX}")):
            ptx_set = PtxSet.from_json(path.read_bytes(), origin=str(path))
            sets[ptx_set.target] = ptx_set
        return cls(sets, directory)

    def targets(self) -> list[KernelTarget]:
        return list(self._sets)

    def select_target(self, hw: str, model: str, quant: str) -> PtxSet:
        """The set for exactly hw/model/quant; otherwise fail fast naming those that exist."""
        target = KernelTarget(hw, model, quant)
        found = self._sets.get(target)
        if found is None:
            known = ", ".join(t.name for t in self._sets) or "(none)"
            raise KernelsNotFound(f"no PTX set for {target} in {self.origin}; built targets: "
                                  f"{known}")
        return found

    def model_matches(self) -> dict[KernelTarget, tuple[ModelMatch, ...]]:
        return {t: s.model_matches for t, s in self._sets.items()}

    def select_model_leaf(self, hw: str, model_type: str, hidden_size: int,
                          quant: str) -> PtxSet:
        """The set serving a checkpoint (exact hidden size beats a family default)."""
        target = pick_model_leaf(self.model_matches(), hw, model_type, hidden_size, quant)
        return self._sets[target]


def load_registry(env: Mapping[str, str] | None = None) -> PtxRegistry:
    return PtxRegistry.load(find_kernels_dir(env))


def select_target(hw: str, model: str, quant: str,
                  env: Mapping[str, str] | None = None) -> PtxSet:
    """`PtxRegistry.select_target` over the sets found by `find_kernels_dir`."""
    return load_registry(env).select_target(hw, model, quant)
