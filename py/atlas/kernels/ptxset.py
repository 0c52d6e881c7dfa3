"""The PTX-set artifact: one JSON file per leaf holding every module's PTX and its provenance.

`<hw>__<model>__<quant>.ptxset.json` carries the target, arch, compiler version, flags, the
include-closure hash baked at compile time, each module's PTX text and sha256, and the
MODEL.toml content (model_types, sampling presets, behavior) of every model directory the leaf
runs, so serving needs the artifact and nothing from the source tree.

The bytes are deterministic: sorted keys, no timestamps, no absolute paths. Bazel and
`atlas kernels build` therefore produce identical files, and a rebuild of an unchanged tree
is byte-identical.

ATLAS_SKIP_BUILD=1 sets have no modules and the compiler version "skipped"; their closure
hash is computed with that string, so it still tracks the sources but can never equal (and so
never stand in for) the hash of a set that was really compiled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from atlas.core.sampling import SamplingParams
from atlas.core.target import KernelTarget
from atlas.core.vendor import Vendor

from .tree import ModelMatch, ModelSpec, ServedModel

PTXSET_SCHEMA = 2  # 2: `models` (every served model directory) replaced `model`
PTXSET_SUFFIX = ".ptxset.json"
SKIPPED_COMPILER = "skipped"


def artifact_name(target: KernelTarget) -> str:
    return f"{target.hw}__{target.model}__{target.quant}{PTXSET_SUFFIX}"


@dataclass(frozen=True)
class PtxModule:
    """One compiled module: its name at run time, the source it came from, its PTX."""

    name: str
    source: str  # repo-relative path of the .cu as it sits in the tree
    ptx: str
    sha256: str

    @classmethod
    def of(cls, name: str, source: str, ptx: str) -> "PtxModule":
        return cls(name, source, ptx, hashlib.sha256(ptx.encode()).hexdigest())

    def image(self) -> bytes:
        """The bytes to hand to cuModuleLoadData, which reads PTX as a NUL-terminated string."""
        return self.ptx.encode() + b"\0"


@dataclass(frozen=True)
class PtxSet:
    """Everything one target needs at startup: its modules and the MODEL.toml settings of the
    model directories it runs."""

    target: KernelTarget
    vendor: Vendor
    arch: str
    compiler_version: str
    flags: tuple[str, ...]
    closure_hash: str
    modules: Mapping[str, PtxModule]
    models: tuple[ServedModel, ...]

    @property
    def skipped(self) -> bool:
        """Built with ATLAS_SKIP_BUILD=1: no PTX, usable by every backend but CUDA."""
        return self.compiler_version == SKIPPED_COMPILER

    def module(self, name: str) -> PtxModule:
        try:
            return self.modules[name]
        except KeyError:
            raise KeyError(f"{self.target} has no module {name!r}; modules: "
                           f"{', '.join(self.modules) or '(none: a skip build)'}") from None

    def to_json(self) -> bytes:
        doc = {
            "schema": PTXSET_SCHEMA,
            "target": self.target.name,
            "vendor": self.vendor.value,
            "arch": self.arch,
            "compiler_version": self.compiler_version,
            "flags": list(self.flags),
            "closure_hash": self.closure_hash,
            "modules": {m.name: {"source": m.source, "sha256": m.sha256, "ptx": m.ptx}
                        for m in self.modules.values()},
            "models": {m.model: _spec_json(m.spec) for m in self.models},
        }
        return (json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes, origin: str = "<ptx set>") -> "PtxSet":
        """Parse an artifact; a wrong schema or a module whose PTX does not match its sha256
        is an error naming `origin`."""
        doc = json.loads(data)
        if doc.get("schema") != PTXSET_SCHEMA:
            raise ValueError(f"{origin}: PTX-set schema {doc.get('schema')!r}, "
                             f"expected {PTXSET_SCHEMA}; rebuild the kernels")
        modules = {}
        for name, m in doc["modules"].items():
            module = PtxModule.of(name, m["source"], m["ptx"])
            if module.sha256 != m["sha256"]:
                raise ValueError(f"{origin}: module {name!r} PTX does not match its sha256")
            modules[name] = module
        target = KernelTarget.parse(doc["target"])
        return cls(
            target=target,
            vendor=Vendor.parse(doc["vendor"]),
            arch=doc["arch"],
            compiler_version=doc["compiler_version"],
            flags=tuple(doc["flags"]),
            closure_hash=doc["closure_hash"],
            modules=MappingProxyType(modules),
            models=tuple(ServedModel(name, target, _spec_from_json(spec))
                         for name, spec in sorted(doc["models"].items())),
        )


def _spec_json(spec: ModelSpec) -> dict[str, Any]:
    return {"model_types": [dataclasses.asdict(m) for m in spec.matches],
            "presets": {k: dataclasses.asdict(p) for k, p in spec.presets.items()},
            "behavior": dict(spec.behavior)}


def _spec_from_json(doc: Mapping[str, Any]) -> ModelSpec:
    return ModelSpec(matches=tuple(ModelMatch(**m) for m in doc["model_types"]),
                     presets=MappingProxyType({k: SamplingParams(**v)
                                               for k, v in doc["presets"].items()}),
                     behavior=MappingProxyType(dict(doc["behavior"])))
