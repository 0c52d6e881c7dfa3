"""Build PTX-set artifacts for kernel leaves. `atlas kernels build` and the Bazel rule
(tools/bazel/ptx.bzl) both run this code, so there is one build as well as one source list.

Compiled modules are cached by content: the key is the module's repo-relative source path
and the digest of its whole include closure (paths + bytes), arch, compiler version and the
flags it can read (`flags_read_by`: a project define no file of the closure names is left
out). Identical inputs (a common kernel compiled for two leaves with the same flags, or the
same tree in another checkout) compile once per build, and with a cache directory once ever:
`default_cache_dir()` is per user and shared by every checkout, which is safe because PTX
bytes do not depend on the checkout's path (compiler.FIXED_SOURCE_ROOT). nvcc runs in a
thread pool over the cores (it is a subprocess; the GIL is not in the way), and `progress`
hears of each module as it finishes.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from atlas.core.target import KernelTarget
from atlas.core.vendor import Vendor

from .compiler import CompilerError, ComputeTarget, resolve_compute_target
from .ptxset import PTXSET_SUFFIX, SKIPPED_COMPILER, PtxModule, PtxSet, artifact_name
from .sources import digest_closure, leaf_modules, module_closures, closure_hash
from .tree import Leaf, list_targets, load_leaf, select_targets, selection_from_env

SKIP_ENV = "ATLAS_SKIP_BUILD"
#: Defines in the project's namespace: only the project's sources read them (the leaves'
#: shape constants, the variant builds' switches), and every project file a module includes
#: is in its closure, so a module whose closure never spells such a name cannot see it.
PROJECT_DEFINE_PREFIX = "ATLAS_"
CACHE_ENV = "ATLAS_PTX_CACHE"
#: Enters every cache key: change it when how a module is compiled changes in a way its
#: inputs do not show (e.g. the directory it is compiled from), so old entries stop matching.
COMPILE_SCHEME = "fixed-source-root-v1"


def skip_requested(env: Mapping[str, str] | None = None) -> bool:
    """ATLAS_SKIP_BUILD set to anything but empty or 0."""
    value = (os.environ if env is None else env).get(SKIP_ENV, "")
    return value not in ("", "0")


def default_jobs() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def default_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The compiled-module cache: $ATLAS_PTX_CACHE, else $XDG_CACHE_HOME/atlas/ptx, else
    ~/.cache/atlas/ptx. Keyed by content, so every checkout of every branch shares it."""
    env = os.environ if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "atlas" / "ptx"


@dataclass(frozen=True)
class ModuleBuilt:
    """One distinct module compile finished (or was found in the cache)."""

    source: str  # repo-relative .cu
    arch: str
    seconds: float
    cached: bool
    done: int  # distinct modules finished so far in this build
    total: int  # distinct modules submitted so far

    def line(self) -> str:
        how = "cached" if self.cached else f"{self.seconds:6.1f}s"
        return f"[{self.done:>3}/{self.total}] {self.arch:<8} {self.source}  {how}"


ProgressFn = Callable[[ModuleBuilt], None]


@dataclass(frozen=True)
class _Job:
    """One module compile: where its source sits and everything its PTX depends on."""

    source: str
    arch: str
    flags: tuple[str, ...]
    key: str  # everything the PTX depends on: the cache key
    layout: str  # the source closure alone: where compile_closure lays it out
    closure: Mapping[str, bytes] = field(compare=False, repr=False)

    @property
    def size(self) -> int:
        """Bytes of source the compiler reads."""
        return sum(len(data) for data in self.closure.values())


class PtxCompiler:
    """Compiles modules at most once per content key, in a thread pool, optionally backed by
    an on-disk cache directory of `<key>.ptx` files."""

    def __init__(self, compiler: ComputeTarget, pool: ThreadPoolExecutor,
                 cache_dir: Path | None, progress: ProgressFn | None = None) -> None:
        self.compiler = compiler
        self.version = compiler.version()
        self.pool = pool
        self.cache_dir = cache_dir
        self.progress = progress
        self._futures: dict[str, Future[str]] = {}
        self._lock = threading.Lock()
        self._done = 0
        self.planned = 0  # distinct modules this build will submit (for progress lines)

    def job(self, source: str, closure: dict[str, bytes], arch: str, flags: list[str]) -> _Job:
        flags = flags_read_by(closure, flags)
        digest = digest_closure(closure, arch, self.version, flags)
        key = hashlib.sha256(f"{COMPILE_SCHEME}\0{source}\0{digest}".encode()).hexdigest()
        # Not keyed by flags or arch: the same sources compile at the same absolute path
        # whatever the leaf, so a leaf whose defines no kernel reads compiles to the same
        # bytes as the baseline, and the identical-PTX check can see it.
        layout = hashlib.sha256(f"{source}\0{digest_closure(closure, '', '', [])}".encode())
        return _Job(source, arch, tuple(flags), key, layout.hexdigest(), closure)

    def submit(self, job: _Job) -> Future[str]:
        future = self._futures.get(job.key)
        if future is None:
            future = self._futures[job.key] = self.pool.submit(self._compile, job)
        return future

    def _compile(self, job: _Job) -> str:
        started = time.monotonic()
        cached = self.cache_dir / f"{job.key}.ptx" if self.cache_dir else None
        hit = cached is not None and cached.is_file()
        if hit:
            ptx = cached.read_text(encoding="utf-8")
        else:
            ptx = self.compiler.compile_closure(job.closure, job.source, job.layout,
                                                job.arch, list(job.flags)).decode("utf-8")
            if cached is not None:
                _write_atomic(cached, ptx.encode())
        if self.progress is not None:
            with self._lock:
                self._done += 1
                self.progress(ModuleBuilt(job.source, job.arch, time.monotonic() - started,
                                          hit, self._done,
                                          max(self.planned, len(self._futures))))
        return ptx


def flags_read_by(closure: Mapping[str, bytes], flags: list[str]) -> list[str]:
    """`flags` less the project defines (-DATLAS_NAME[=VALUE]) that no file of the module's
    include closure names. Such a define cannot change the module's PTX, so the module is
    compiled (and cached) once for every leaf that differs from another only by it. Why: the
    MoE size leaves' shape constants are read by two modules, yet keyed into every module's
    compile they made each size leaf recompile the whole hardware tree (three times the
    sm_90a compile of a fresh `atlas kernels build`). The set's flags and closure hash still
    carry every define."""
    files = tuple(closure.values())

    def read(flag: str) -> bool:
        if not flag.startswith(f"-D{PROJECT_DEFINE_PREFIX}"):
            return True
        name = re.escape(flag[2:].split("=", 1)[0].encode())
        token = re.compile(rb"(?<![A-Za-z0-9_])" + name + rb"(?![A-Za-z0-9_])")
        return any(token.search(data) for data in files)

    return [flag for flag in flags if read(flag)]


def skipped_set(repo_root: Path, leaf: Leaf) -> PtxSet:
    """The ATLAS_SKIP_BUILD set: no modules, compiler version "skipped"."""
    flags = leaf.flags
    return PtxSet(target=leaf.target, vendor=leaf.hardware.vendor, arch=leaf.hardware.arch,
                  compiler_version=SKIPPED_COMPILER, flags=tuple(flags),
                  closure_hash=closure_hash(repo_root, leaf.target, leaf.hardware.arch,
                                            SKIPPED_COMPILER, flags),
                  modules={}, models=leaf.models)


def build_sets(repo_root: Path, targets: list[KernelTarget], *, skip: bool,
               jobs: int | None = None, cache_dir: Path | None = None,
               progress: ProgressFn | None = None,
               defines: tuple[str, ...] = ()) -> list[PtxSet]:
    """Build the PTX set of every target (in the order given). Every distinct module of every
    target is queued before any result is awaited, largest include closure first (a rough
    proxy for compile time), so the pool stays full and the slowest compile is not the tail.
    `defines` (NAME=VALUE) are appended to every leaf's flags as -D options: the variant
    builds a compile-time A/B compares (recorded in the set's flags and closure hash)."""
    leaves = [load_leaf(repo_root, t) for t in targets]
    if skip:
        return [skipped_set(repo_root, leaf) for leaf in leaves]
    compilers: dict[Vendor, PtxCompiler] = {}
    with ThreadPoolExecutor(max_workers=jobs or default_jobs()) as pool:
        pending = []
        for leaf in leaves:
            vendor = leaf.hardware.vendor
            if vendor not in compilers:
                compilers[vendor] = PtxCompiler(resolve_compute_target(vendor), pool,
                                                cache_dir, progress)
            ptx_compiler = compilers[vendor]
            flags = [*leaf.flags, *(f"-D{d}" for d in defines)]
            sources = {name: path.relative_to(repo_root).as_posix()
                       for name, path in leaf_modules(repo_root, leaf.target).items()}
            leaf_jobs = {name: ptx_compiler.job(sources[name], closure, leaf.hardware.arch,
                                                flags)
                         for name, closure in module_closures(repo_root, leaf.target).items()}
            # Hashed as the compiles start, so the hash describes the bytes nvcc is reading.
            digest = closure_hash(repo_root, leaf.target, leaf.hardware.arch,
                                  ptx_compiler.version, flags)
            pending.append((leaf, ptx_compiler, flags, digest, sources, leaf_jobs))
        everything = [(c, j) for _, c, _, _, _, leaf_jobs in pending for j in leaf_jobs.values()]
        for ptx_compiler in compilers.values():
            ptx_compiler.planned = len({j.key for c, j in everything if c is ptx_compiler})
        for ptx_compiler, job in sorted(everything, key=lambda cj: -cj[1].size):
            ptx_compiler.submit(job)
        return [PtxSet(target=leaf.target, vendor=leaf.hardware.vendor,
                       arch=leaf.hardware.arch, compiler_version=ptx_compiler.version,
                       flags=tuple(flags), closure_hash=digest,
                       modules={name: PtxModule.of(name, sources[name],
                                                   ptx_compiler.submit(job).result())
                                for name, job in leaf_jobs.items()},
                       models=leaf.models)
                for leaf, ptx_compiler, flags, digest, sources, leaf_jobs in pending]


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def build_into(repo_root: Path, out_dir: Path, targets: list[KernelTarget], *, skip: bool,
               jobs: int | None = None, cache_dir: Path | None = None,
               progress: ProgressFn | None = None,
               defines: tuple[str, ...] = ()) -> list[Path]:
    """Write one artifact per target into `out_dir` (modules cached in `cache_dir`), and
    delete artifacts of leaves that no longer exist in the tree, so the runtime can never
    pick up a target whose sources are gone. Artifacts of existing but unselected leaves stay.
    An artifact whose bytes are unchanged is not rewritten (its mtime stays)."""
    sets = build_sets(repo_root, targets, skip=skip, jobs=jobs, cache_dir=cache_dir,
                      progress=progress, defines=defines)
    written = []
    for ptx_set in sets:
        path = out_dir / artifact_name(ptx_set.target)
        data = ptx_set.to_json()
        if not (path.is_file() and path.read_bytes() == data):
            _write_atomic(path, data)
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


def package_sets(repo_root: Path, dest: Path, env: Mapping[str, str] | None = None,
                 log: Callable[[str], None] = print) -> list[Path]:
    """The PTX sets a wheel ships in `atlas/kernels/ptxsets/` (setup.py's build_py): the
    ATLAS_TARGET_* selection, compiled when nvcc is present, else ATLAS_SKIP_BUILD sets. Even
    those carry every MODEL.toml (tool parser, presets), so an installed wheel serves on the
    host backend with the model's behavior; on CUDA it says to rebuild with nvcc."""
    targets = selected_targets(repo_root, env)
    skip = skip_requested(env)
    if not skip:
        try:
            for vendor in {load_leaf(repo_root, t).hardware.vendor for t in targets}:
                resolve_compute_target(vendor).find_compiler()
        except CompilerError as exc:
            log(f"atlas: packaging PTX sets without PTX (host backend only): {exc}")
            skip = True
    return build_into(repo_root, dest, targets, skip=skip, cache_dir=default_cache_dir(env),
                      progress=lambda built: log(built.line()))


if __name__ == "__main__":
    sys.exit(main())
