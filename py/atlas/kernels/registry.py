"""Find the built PTX sets at run time and pick the one for the model being served.

Where the sets are, first match wins:
1. `$ATLAS_KERNELS_DIR` (an explicit choice; it must exist);
2. Bazel runfiles: `$RUNFILES_DIR/<workspace>/kernels/`, or the `kernels/` directory beside
   this package when it runs from a runfiles tree (`bazel run //py/atlas_cli:serve`);
3. the default build directory `<repo>/build/kernels` (`atlas kernels build`);
4. the sets packaged in an installed wheel, `atlas/kernels/ptxsets/` (build.package_sets).
A source tree's `kernels/` never holds `*.ptxset.json`, so (2) cannot mistake it for sets.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

from atlas.core.target import KernelTarget

from .ptxset import PTXSET_SUFFIX, PtxSet
from .tree import ServedModel, pick_model

KERNELS_DIR_ENV = "ATLAS_KERNELS_DIR"
#: The hardware whose MODEL.toml behavior a backend without a device (host, mock) uses: the
#: shipped, tested one.
DEFAULT_HOST_HARDWARE = "hopper"
DEFAULT_BUILD_DIR = Path("build") / "kernels"
#: Where a wheel carries its PTX sets, inside this package (setup.py writes them there).
PACKAGED_DIR = Path(__file__).absolute().parent / "ptxsets"
# Not resolved: in a Bazel runfiles tree this file is a symlink into the source tree.
_PACKAGE_ROOT = Path(__file__).absolute().parents[3]  # <root>/py/atlas/kernels/registry.py


class KernelsNotFound(FileNotFoundError):
    """No PTX sets were found, or the requested target is not among them."""


def _has_sets(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob(f"*{PTXSET_SUFFIX}"))


def find_kernels_dir(env: Mapping[str, str] | None = None,
                     package_root: Path = _PACKAGE_ROOT,
                     packaged: Path = PACKAGED_DIR) -> Path:
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
    candidates += [package_root / "kernels", package_root / DEFAULT_BUILD_DIR, packaged]
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

    def served_models(self) -> list[ServedModel]:
        """Every model directory the built sets run, each with the target running it."""
        return [m for s in self._sets.values() for m in s.models]

    def select_model(self, hw: str, model_type: str, hidden_size: int,
                     quant: str) -> tuple[PtxSet, ServedModel]:
        """The set serving a checkpoint, and the model directory (MODEL.toml behavior and
        presets) it serves it as: an exact hidden size beats a family default."""
        served = pick_model(self.served_models(), hw, model_type, hidden_size, quant)
        return self._sets[served.target], served

    def select_model_dir(self, hw: str, model: str, quant: str) -> tuple[PtxSet, ServedModel]:
        """The set running model directory `model` (e.g. `qwen3-8b`) in `quant` on `hw`,
        whether from its own leaf or the hardware's baseline leaf."""
        for served in self.served_models():
            if (served.target.hw, served.model, served.target.quant) == (hw, model, quant):
                return self._sets[served.target], served
        known = ", ".join(sorted(f"{m.target.hw}/{m.model}/{m.target.quant}"
                                 for m in self.served_models())) or "(none)"
        raise KernelsNotFound(f"no PTX set in {self.origin} runs model {hw}/{model} in "
                              f"{quant}; built models: {known}")

    def hardware_archs(self) -> dict[str, str]:
        """Hardware directory -> the arch its sets were compiled for."""
        return {t.hw: s.arch for t, s in self._sets.items()}


def load_registry(env: Mapping[str, str] | None = None) -> PtxRegistry:
    return PtxRegistry.load(find_kernels_dir(env))


def select_target(hw: str, model: str, quant: str,
                  env: Mapping[str, str] | None = None) -> PtxSet:
    """`PtxRegistry.select_target` over the sets found by `find_kernels_dir`."""
    return load_registry(env).select_target(hw, model, quant)


_ARCH = re.compile(r"sm_(\d+)(\d)(a?)")


def hardware_for_capability(archs: Mapping[str, str], capability: tuple[int, int]) -> str:
    """The hardware directory whose PTX a device of compute `capability` runs.

    `archs` maps hardware directory -> arch (`sm_90a`, `sm_121`). An arch-specific target
    (`a` suffix: wgmma, setmaxnreg) runs only on exactly its capability; a plain `sm_XY` also
    on later minors of the same major (the driver JITs PTX forward within a major). An exact
    match is preferred; none is an error naming what was built."""
    exact, compatible = [], []
    for hw, arch in sorted(archs.items()):
        m = _ARCH.fullmatch(arch)
        if m is None:
            continue
        major, minor, specific = int(m.group(1)), int(m.group(2)), bool(m.group(3))
        if (major, minor) == capability:
            exact.append(hw)
        elif not specific and major == capability[0] and minor < capability[1]:
            compatible.append(hw)
    for found in (exact, compatible):
        if found:
            return found[0]
    built = ", ".join(f"{hw} ({arch})" for hw, arch in sorted(archs.items())) or "(none)"
    raise KernelsNotFound(f"no PTX set runs on compute capability "
                          f"{capability[0]}.{capability[1]}; built: {built}")
