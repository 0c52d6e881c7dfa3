"""Build PTX-set artifacts for kernel leaves. `atlas kernels build` and the Bazel rule
(tools/bazel/ptx.bzl) both run this code, so there is one build as well as one source list.

Compiled modules are cached by content: the key is the module's root path (and the real
path nvcc salts symbol names with, see compiler.NvidiaTarget), its whole include closure
(paths + bytes), arch, compiler version and flags, so identical inputs (a common
kernel compiled for two leaves with the same flags) compile once per build, and with
`cache_dir` once across builds. nvcc runs in a small thread pool (it is a subprocess; the GIL
is not in the way).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from atlas.core.target import KernelTarget
from atlas.core.vendor import Vendor

from .compiler import ComputeTarget, resolve_compute_target
from .ptxset import PTXSET_SUFFIX, SKIPPED_COMPILER, PtxModule, PtxSet, artifact_name
from .sources import digest_closure, leaf_modules, module_closures, closure_hash
from .tree import Leaf, list_targets, load_leaf, select_targets, selection_from_env

SKIP_ENV = "ATLAS_SKIP_BUILD"


def skip_requested(env: Mapping[str, str] | None = None) -> bool:
    """ATLAS_SKIP_BUILD set to anything but empty or 0."""
    value = (os.environ if env is None else env).get(SKIP_ENV, "")
    return value not in ("", "0")


def default_jobs() -> int:
    return max(1, min(8, os.cpu_count() or 1))


@dataclass(frozen=True)
class _Job:
    """One module compile: where its source sits and everything its PTX depends on."""

    source: str
    arch: str
    flags: tuple[str, ...]
    key: str


class PtxCompiler:
    """Compiles modules at most once per content key, in a thread pool, optionally backed by
    an on-disk cache directory of `<key>.ptx` files."""

    def __init__(self, repo_root: Path, compiler: ComputeTarget, pool: ThreadPoolExecutor,
                 cache_dir: Path | None) -> None:
        self.repo_root = repo_root
        self.compiler = compiler
        self.version = compiler.version()
        self.pool = pool
        self.cache_dir = cache_dir
        self._futures: dict[str, Future[str]] = {}

    def job(self, source: str, closure: dict[str, bytes], arch: str, flags: list[str]) -> _Job:
        digest = digest_closure(closure, arch, self.version, flags)
        real = os.path.realpath(self.repo_root / source)
        key = hashlib.sha256(f"{source}\0{real}\0{digest}".encode()).hexdigest()
        return _Job(source, arch, tuple(flags), key)

    def submit(self, job: _Job) -> Future[str]:
        future = self._futures.get(job.key)
        if future is None:
            future = self._futures[job.key] = self.pool.submit(self._compile, job)
        return future

    def _compile(self, job: _Job) -> str:
        cached = self.cache_dir / f"{job.key}.ptx" if self.cache_dir else None
        if cached is not None and cached.is_file():
            return cached.read_text(encoding="utf-8")
        ptx = self.compiler.compile_to_bytes(self.repo_root / job.source, job.arch,
                                             list(job.flags), seed=job.source).decode("utf-8")
        if cached is not None:
            _write_atomic(cached, ptx.encode())
        return ptx


def skipped_set(repo_root: Path, leaf: Leaf) -> PtxSet:
    """The ATLAS_SKIP_BUILD set: no modules, compiler version "skipped"."""
    flags = leaf.flags
    return PtxSet(target=leaf.target, vendor=leaf.hardware.vendor, arch=leaf.hardware.arch,
                  compiler_version=SKIPPED_COMPILER, flags=tuple(flags),
                  closure_hash=closure_hash(repo_root, leaf.target, leaf.hardware.arch,
                                            SKIPPED_COMPILER, flags),
                  modules={}, models=leaf.models)


def build_sets(repo_root: Path, targets: list[KernelTarget], *, skip: bool,
               jobs: int | None = None, cache_dir: Path | None = None) -> list[PtxSet]:
    """Build the PTX set of every target (in the order given)."""
    leaves = [load_leaf(repo_root, t) for t in targets]
    if skip:
        return [skipped_set(repo_root, leaf) for leaf in leaves]
    compilers: dict[Vendor, PtxCompiler] = {}
    with ThreadPoolExecutor(max_workers=jobs or default_jobs()) as pool:
        pending = []
        for leaf in leaves:
            vendor = leaf.hardware.vendor
            if vendor not in compilers:
                compilers[vendor] = PtxCompiler(repo_root, resolve_compute_target(vendor),
                                                pool, cache_dir)
            ptx_compiler = compilers[vendor]
            flags = leaf.flags
            sources = {name: path.relative_to(repo_root).as_posix()
                       for name, path in leaf_modules(repo_root, leaf.target).items()}
            futures = {name: ptx_compiler.submit(ptx_compiler.job(
                sources[name], closure, leaf.hardware.arch, flags))
                for name, closure in module_closures(repo_root, leaf.target).items()}
            # Hashed as the compiles start, so the hash describes the bytes nvcc is reading.
            digest = closure_hash(repo_root, leaf.target, leaf.hardware.arch,
                                  ptx_compiler.version, flags)
            pending.append((leaf, ptx_compiler.version, flags, digest, sources, futures))
        return [PtxSet(target=leaf.target, vendor=leaf.hardware.vendor,
                       arch=leaf.hardware.arch, compiler_version=version, flags=tuple(flags),
                       closure_hash=digest,
                       modules={name: PtxModule.of(name, sources[name], f.result())
                                for name, f in futures.items()},
                       models=leaf.models)
                for leaf, version, flags, digest, sources, futures in pending]


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def build_into(repo_root: Path, out_dir: Path, targets: list[KernelTarget], *, skip: bool,
               jobs: int | None = None) -> list[Path]:
    """Write one artifact per target into `out_dir` (PTX cached under `out_dir/.cache`), and
    delete artifacts of leaves that no longer exist in the tree, so the runtime can never
    pick up a target whose sources are gone. Artifacts of existing but unselected leaves stay."""
    sets = build_sets(repo_root, targets, skip=skip, jobs=jobs, cache_dir=out_dir / ".cache")
    written = []
    for ptx_set in sets:
        path = out_dir / artifact_name(ptx_set.target)
        _write_atomic(path, ptx_set.to_json())
        written.append(path)
    alive = {artifact_name(t) for t in list_targets(repo_root)}
    for stale in out_dir.glob(f"*{PTXSET_SUFFIX}"):
        if stale.name not in alive:
            stale.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    """Build one leaf into one file: the command the Bazel rule runs for each target."""
    parser = argparse.ArgumentParser(
        description="Build one kernel leaf's PTX set into one file (the Bazel rule's action).")
    parser.add_argument("--repo-root", type=Path, default=Path.cwd())
    parser.add_argument("--target", required=True, type=KernelTarget.parse)
    parser.add_argument("--out-file", required=True, type=Path)
    args = parser.parse_args(argv)
    repo_root = args.repo_root.absolute()
    (ptx_set,) = build_sets(repo_root, [args.target], skip=skip_requested(), jobs=default_jobs())
    _write_atomic(args.out_file, ptx_set.to_json())
    return 0


def selected_targets(repo_root: Path, env: Mapping[str, str] | None = None) -> list[KernelTarget]:
    """The leaves the ATLAS_TARGET_* wildcards select."""
    return select_targets(repo_root, *selection_from_env(env))


if __name__ == "__main__":
    sys.exit(main())
