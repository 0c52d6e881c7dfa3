"""The kernel tree: leaves `kernels/<hw>/<model>/<quant>/` and the TOML files that describe them.

A leaf is a directory holding KERNEL.toml. Its hardware directory holds HARDWARE.toml (vendor,
arch, compiler flags, facts) and `common/` (the baseline kernels). `common/<quant>/` is the
hardware's baseline leaf: the common kernels, every shape taken at run time.

A model directory `kernels/<hw>/<model>/` holds MODEL.toml (which checkpoints it serves,
sampling presets, behavior) and BENCH.toml (gate thresholds, read by `atlas.gate`, never by the
build). It has a `<quant>/` leaf of its own only where its kernels diverge (a kernel reads the
leaf's defines, or a file shadows a common one); otherwise the baseline leaf `common/<quant>/`
runs it. Either way the MODEL.toml travels in the PTX set of the leaf that runs the model
(`served_models`), so a built artifact carries the behavior of every model it serves.

Leaf selection follows the ATLAS_TARGET_HW / ATLAS_TARGET_MODEL / ATLAS_TARGET_QUANT
wildcards (fnmatch). Every one defaults to `*`: a plain build covers every hardware directory,
because keeping the non-shipped ones compiling is the point of building them at all.

This module only reads files; it compiles nothing and decides nothing about sources (that is
`sources.py`).
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from atlas.core.config import canonical_model_type
from atlas.core.sampling import SamplingParams
from atlas.core.target import KernelTarget
from atlas.core.vendor import Vendor

KERNELS_DIR = "kernels"
COMMON_DIR = "common"
HARDWARE_TOML = "HARDWARE.toml"
MODEL_TOML = "MODEL.toml"
KERNEL_TOML = "KERNEL.toml"
BENCH_TOML = "BENCH.toml"

TARGET_ENV = ("ATLAS_TARGET_HW", "ATLAS_TARGET_MODEL", "ATLAS_TARGET_QUANT")


class KernelTreeError(ValueError):
    """The kernel tree is malformed, or a requested target/leaf does not exist."""


@dataclass(frozen=True)
class HardwareSpec:
    """HARDWARE.toml: what the compiler needs (vendor, arch, flags) plus descriptive facts."""

    hw: str
    vendor: Vendor
    arch: str
    compiler_flags: tuple[str, ...]
    facts: Mapping[str, Any]


@dataclass(frozen=True)
class ModelMatch:
    """One `[[model_types]]` entry: a canonical model_type, and a hidden size unless the
    directory is a family default that serves every size."""

    model_type: str
    hidden_size: int | None


@dataclass(frozen=True)
class ModelSpec:
    """MODEL.toml: which checkpoints this model directory serves and how the server treats them."""

    matches: tuple[ModelMatch, ...]
    presets: Mapping[str, SamplingParams]
    behavior: Mapping[str, Any]


@dataclass(frozen=True)
class ServedModel:
    """A model directory as a leaf serves it: the directory's name, the leaf whose kernels run
    it, and its MODEL.toml."""

    model: str
    target: KernelTarget
    spec: ModelSpec


@dataclass(frozen=True)
class KernelSpec:
    """KERNEL.toml: compile-time shape constants, extra flags, and module renames."""

    defines: Mapping[str, int | str]
    extra_flags: tuple[str, ...]
    modules: Mapping[str, str]  # source stem -> module name


@dataclass(frozen=True)
class Leaf:
    """Everything the TOML files say about one target."""

    target: KernelTarget
    hardware: HardwareSpec
    models: tuple[ServedModel, ...]  # the model directories this leaf's PTX set runs
    kernel: KernelSpec

    @property
    def flags(self) -> list[str]:
        """Compiler flags for every module of this leaf, arch excluded (it is passed alone):
        HARDWARE.toml's flags, then `-DNAME=VALUE` for each define (sorted), then extras."""
        defines = [f"-D{name}={value}" for name, value in sorted(self.kernel.defines.items())]
        return [*self.hardware.compiler_flags, *defines, *self.kernel.extra_flags]


# --- paths ---------------------------------------------------------------------------------

def hw_dir(repo_root: Path, hw: str) -> Path:
    return repo_root / KERNELS_DIR / hw


def leaf_dir(repo_root: Path, target: KernelTarget) -> Path:
    return repo_root / KERNELS_DIR / target.hw / target.model / target.quant


def leaf_toml_paths(repo_root: Path, target: KernelTarget) -> list[str]:
    """Repo-relative paths of the TOML files that enter a leaf's closure hash: HARDWARE.toml,
    KERNEL.toml and the MODEL.toml of every model the leaf serves (its PTX set carries them).
    Not BENCH.toml: nothing compiles it, and raising a bar must not invalidate the run that
    proved it."""
    base = f"{KERNELS_DIR}/{target.hw}"
    models = [f"{base}/{m}/{MODEL_TOML}" for m in served_model_dirs(repo_root, target)]
    return [f"{base}/{HARDWARE_TOML}", *models,
            f"{base}/{target.model}/{target.quant}/{KERNEL_TOML}"]


def find_repo_root(start: Path) -> Path:
    """The nearest directory at or above `start` holding a kernel tree (kernels/*/HARDWARE.toml)."""
    for directory in [start, *start.parents]:
        if any((directory / KERNELS_DIR).glob(f"*/{HARDWARE_TOML}")):
            return directory
    raise KernelTreeError(f"no kernel tree (kernels/<hw>/{HARDWARE_TOML}) at or above {start}")


# --- enumeration and selection -------------------------------------------------------------

def list_targets(repo_root: Path) -> list[KernelTarget]:
    """Every leaf in the tree (baseline `common/<quant>` leaves included), sorted."""
    root = repo_root / KERNELS_DIR
    if not root.is_dir():
        raise KernelTreeError(f"no kernel tree at {root}")
    targets = []
    for kernel_toml in root.glob(f"*/*/*/{KERNEL_TOML}"):
        quant_dir = kernel_toml.parent
        model_dir = quant_dir.parent
        targets.append(KernelTarget(model_dir.parent.name, model_dir.name, quant_dir.name))
    return sorted(targets, key=lambda t: t.name)


def model_dirs(repo_root: Path, hw: str) -> list[str]:
    """The model directories of one hardware (those holding MODEL.toml), sorted."""
    return sorted(p.parent.name for p in hw_dir(repo_root, hw).glob(f"*/{MODEL_TOML}"))


def kernel_target_for(repo_root: Path, hw: str, model: str, quant: str) -> KernelTarget | None:
    """The leaf whose kernels run model directory `model` in `quant`: its own `<quant>/`
    leaf where it has one, else the hardware's baseline `common/<quant>/`; None if neither."""
    for candidate in (KernelTarget(hw, model, quant), KernelTarget(hw, COMMON_DIR, quant)):
        if (leaf_dir(repo_root, candidate) / KERNEL_TOML).is_file():
            return candidate
    return None


def served_model_dirs(repo_root: Path, target: KernelTarget) -> list[str]:
    """The model directories whose kernels `target` provides (see `kernel_target_for`)."""
    return [m for m in model_dirs(repo_root, target.hw)
            if kernel_target_for(repo_root, target.hw, m, target.quant) == target]


def selection_from_env(env: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    """The (hw, model, quant) wildcards from ATLAS_TARGET_*; each defaults to `*`."""
    env = os.environ if env is None else env
    return tuple(env.get(name) or "*" for name in TARGET_ENV)  # type: ignore[return-value]


def select_targets(repo_root: Path, hw: str = "*", model: str = "*",
                   quant: str = "*") -> list[KernelTarget]:
    """The leaves matching the three wildcards; none matching is an error listing the leaves.
    `model` matches a leaf's own directory or any model directory it runs, so selecting
    `smollm2-135m` selects the baseline leaf that runs it (a slim build for one model)."""
    every = list_targets(repo_root)

    def model_matches(t: KernelTarget) -> bool:
        return any(fnmatch.fnmatchcase(m, model)
                   for m in (t.model, *served_model_dirs(repo_root, t)))

    chosen = [t for t in every if fnmatch.fnmatchcase(t.hw, hw)
              and fnmatch.fnmatchcase(t.quant, quant) and model_matches(t)]
    if not chosen:
        raise KernelTreeError(f"no kernel leaf matches {hw}/{model}/{quant}; leaves: "
                              f"{', '.join(t.name for t in every) or '(none)'}")
    return chosen


# --- TOML parsing --------------------------------------------------------------------------

def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise KernelTreeError(f"missing {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise KernelTreeError(f"{path}: {exc}") from None


def _str_list(data: dict[str, Any], key: str, where: Path) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise KernelTreeError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def load_hardware(repo_root: Path, hw: str) -> HardwareSpec:
    path = hw_dir(repo_root, hw) / HARDWARE_TOML
    data = _read_toml(path)
    try:
        vendor = Vendor.parse(data["vendor"])
        arch = data["arch"]
    except KeyError as exc:
        raise KernelTreeError(f"{path}: missing required key {exc.args[0]!r}") from None
    except ValueError as exc:
        raise KernelTreeError(f"{path}: {exc}") from None
    compiler = data.get("compiler", {})
    facts = {k: v for k, v in data.items() if k not in ("vendor", "arch", "compiler")}
    return HardwareSpec(hw=hw, vendor=vendor, arch=arch,
                        compiler_flags=_str_list(compiler, "flags", path),
                        facts=MappingProxyType(facts))


def load_model(repo_root: Path, hw: str, model: str) -> ModelSpec:
    path = hw_dir(repo_root, hw) / model / MODEL_TOML
    data = _read_toml(path)
    entries = data.get("model_types")
    if not isinstance(entries, list) or not entries:
        raise KernelTreeError(f"{path}: needs at least one [[model_types]] entry")
    matches = []
    for entry in entries:
        hidden = entry.get("hidden_size")
        if "model_type" not in entry or not (hidden is None or isinstance(hidden, int)):
            raise KernelTreeError(f"{path}: [[model_types]] needs model_type and an optional "
                                  f"integer hidden_size, got {entry!r}")
        matches.append(ModelMatch(canonical_model_type(entry["model_type"]), hidden))
    presets = {}
    for name, values in data.get("presets", {}).items():
        try:
            preset = SamplingParams(**values)
            preset.validate()
        except (TypeError, ValueError) as exc:
            raise KernelTreeError(f"{path}: preset {name!r}: {exc}") from None
        presets[name] = preset
    return ModelSpec(matches=tuple(matches), presets=MappingProxyType(presets),
                     behavior=MappingProxyType(dict(data.get("behavior", {}))))


def load_kernel(repo_root: Path, target: KernelTarget) -> KernelSpec:
    path = leaf_dir(repo_root, target) / KERNEL_TOML
    data = _read_toml(path)
    defines = data.get("defines", {})
    for name, value in defines.items():
        if not name.isidentifier() or isinstance(value, bool) or not isinstance(value, (int, str)):
            raise KernelTreeError(f"{path}: define {name} = {value!r} must be an identifier "
                                  f"set to an integer or a string")
    modules = data.get("modules", {})
    if not all(isinstance(v, str) and v for v in modules.values()):
        raise KernelTreeError(f"{path}: [modules] maps a source stem to a module name string")
    return KernelSpec(defines=MappingProxyType(dict(defines)),
                      extra_flags=_str_list(data.get("flags", {}), "extra", path),
                      modules=MappingProxyType(dict(modules)))


def load_leaf(repo_root: Path, target: KernelTarget) -> Leaf:
    """Parse the TOML files of `target`; a missing leaf names the leaves that exist. A model
    leaf without MODEL.toml beside it is an error (it would serve nothing)."""
    if not (leaf_dir(repo_root, target) / KERNEL_TOML).is_file():
        known = ", ".join(t.name for t in list_targets(repo_root)) or "(none)"
        raise KernelTreeError(f"no kernel leaf {target}; leaves: {known}")
    if target.model != COMMON_DIR and \
            not (hw_dir(repo_root, target.hw) / target.model / MODEL_TOML).is_file():
        raise KernelTreeError(f"leaf {target} has no {KERNELS_DIR}/{target.hw}/{target.model}/"
                              f"{MODEL_TOML}: a model leaf serves the model described there")
    return Leaf(target=target, hardware=load_hardware(repo_root, target.hw),
                models=served_models(repo_root, target), kernel=load_kernel(repo_root, target))


def served_models(repo_root: Path, target: KernelTarget) -> tuple[ServedModel, ...]:
    """Every model directory `target` runs, with its parsed MODEL.toml."""
    return tuple(ServedModel(m, target, load_model(repo_root, target.hw, m))
                 for m in served_model_dirs(repo_root, target))


# --- which model directory serves a checkpoint ------------------------------------------------

def pick_model(candidates: Iterable[ServedModel], hw: str, model_type: str, hidden_size: int,
               quant: str) -> ServedModel:
    """The model directory of `hw` serving (model_type, hidden_size) in `quant`: an entry
    naming this exact hidden size wins over a family default (an entry with no hidden size).
    No match, or two equally good ones, is an error listing what exists."""
    wanted = canonical_model_type(model_type)
    every = [c for c in candidates if c.target.hw == hw and c.target.quant == quant]
    exact = [c for c in every if any(m.model_type == wanted and m.hidden_size == hidden_size
                                     for m in c.spec.matches)]
    family = [c for c in every if any(m.model_type == wanted and m.hidden_size is None
                                      for m in c.spec.matches)]
    for found in (exact, family):
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise KernelTreeError(
                f"model_type {wanted!r} hidden_size {hidden_size} on {hw}/{quant} matches "
                f"several model directories: {', '.join(sorted(_label(c) for c in found))}")
    listing = "; ".join(sorted(
        f"{_label(c)} serves " + ", ".join(
            f"{m.model_type}" + (f"@{m.hidden_size}" if m.hidden_size else "@any")
            for m in c.spec.matches)
        for c in candidates)) or "(no models)"
    raise KernelTreeError(f"no kernel leaf serves model_type {wanted!r} with hidden_size "
                          f"{hidden_size} on {hw} in {quant}; known: {listing}")


def _label(served: ServedModel) -> str:
    """`hw/model (kernels hw/common/quant)`, or `hw/model/quant` for a model's own leaf."""
    t = served.target
    if t.model == served.model:
        return t.name
    return f"{t.hw}/{served.model} (kernels {t.name})"


def select_model(repo_root: Path, hw: str, model_type: str, hidden_size: int,
                 quant: str) -> ServedModel:
    """`pick_model` over every model the leaves of a kernel tree serve (the build's view; at
    run time `registry.PtxRegistry.select_model` asks the built PTX sets instead)."""
    candidates = [s for t in list_targets(repo_root) for s in served_models(repo_root, t)]
    return pick_model(candidates, hw, model_type, hidden_size, quant)
