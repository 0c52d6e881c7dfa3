"""`atlas image build`: the Atlas image for a selection of kernel targets, as an OCI layout.

Layers, from the least to the most often changed, so images of different models share all
but the last:
1. the Debian root filesystem (debian.py, checked against tools/image/debian.lock);
2. the Python dependencies, unpacked from the wheels of tools/image/requirements.lock;
3. Atlas: `py/atlas`, `py/atlas_cli` and the benchmark suites under /opt/atlas, put on the
   interpreter's path by a .pth file (the layout of an editable install, so the runtime finds
   its data the same way as in a checkout), and /usr/local/bin/atlas;
4. the selected targets only: their PTX sets in /opt/atlas/build/kernels, where the registry
   looks (each set carries the MODEL.toml of every model it serves, so no kernel tree is
   needed at run time).
No model weights: they are mounted at /root/.atlas/models, or the default model is imported
on first use. The entry point is `atlas serve`, whose `--backend auto` picks CUDA when the
container runtime provides the driver and the CPU reference backend otherwise.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import atlas
from atlas.core.target import KernelTarget
from atlas.kernels.build import build_sets
from atlas.kernels.ptxset import SKIPPED_COMPILER, artifact_name

from . import debian, wheels
from .layer import LayerEntries, rewrite_tar, write_entries
from .oci import Descriptor, LayoutWriter, RunConfig

ATLAS_ROOT = "opt/atlas"
PTX_DIR = f"{ATLAS_ROOT}/build/kernels"
SOURCE_SUFFIXES = (".py", ".toml", ".json", ".jinja")
SOURCE_PACKAGES = ("py/atlas", "py/atlas_cli")
DEBIAN_LOCK = Path("tools/image/debian.lock")
WHEEL_LOCK = Path("tools/image/requirements.lock")
REF_NAME = "latest"
PORT = 8888
ENTRY_SCRIPT = f"""#!{wheels.INTERPRETER}
import sys

from atlas_cli.main import main

sys.exit(main())
"""

Log = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class BuildResult:
    manifest: Descriptor
    layer_sizes: list[tuple[str, int]]
    targets: list[KernelTarget]
    ptx_compiler: str
    seconds: float

    @property
    def size(self) -> int:
        return sum(size for _, size in self.layer_sizes)


def default_cache_dir() -> Path:
    """Downloaded wheels and compiled PTX survive between builds here."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "atlas" / "image"


def build_epoch(lock: debian.DebianLock) -> int:
    """SOURCE_DATE_EPOCH when set (reproducible-builds convention), else the lock's."""
    value = os.environ.get("SOURCE_DATE_EPOCH")
    return int(value) if value else lock.base.source_date_epoch


def atlas_entries(repo_root: Path) -> LayerEntries:
    """Atlas's sources and data, the .pth file and the `atlas` command."""
    entries = LayerEntries()
    sources = [p for package in SOURCE_PACKAGES for p in (repo_root / package).rglob("*")
               if p.suffix in SOURCE_SUFFIXES and p.is_file() and "__pycache__" not in p.parts]
    sources += list((repo_root / "bench" / "suites").glob("*.toml"))
    for path in sorted(sources):
        entries.add_file(f"{ATLAS_ROOT}/{path.relative_to(repo_root).as_posix()}",
                         path.read_bytes())
    entries.add_file(f"{wheels.SITE_PACKAGES}/atlas.pth", f"/{ATLAS_ROOT}/py\n".encode())
    entries.add_file(f"{wheels.SCRIPT_DIR}/atlas", ENTRY_SCRIPT.encode(), 0o755)
    return entries


def kernel_entries(repo_root: Path, targets: list[KernelTarget], *, skip_ptx: bool,
                   cache_dir: Path) -> tuple[LayerEntries, str]:
    """The selected leaves' PTX sets; also the compiler version used."""
    entries = LayerEntries()
    sets = build_sets(repo_root, targets, skip=skip_ptx, cache_dir=cache_dir / "ptx")
    for ptx_set in sets:
        entries.add_file(f"{PTX_DIR}/{artifact_name(ptx_set.target)}", ptx_set.to_json())
    versions = sorted({s.compiler_version for s in sets})
    return entries, ", ".join(versions) or SKIPPED_COMPILER


def run_config(targets: list[KernelTarget], ptx_compiler: str) -> RunConfig:
    return RunConfig(
        entrypoint=[f"/{wheels.SCRIPT_DIR}/atlas", "serve"],
        cmd=["--bind", "0.0.0.0"],  # the container's network namespace is the boundary
        env=["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "LANG=C.UTF-8", "HOME=/root", "PYTHONUNBUFFERED=1",
             # read by the NVIDIA container toolkit: which driver libraries to mount
             "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"],
        working_dir="/root",
        exposed_ports=[f"{PORT}/tcp"],
        labels={"org.opencontainers.image.title": "atlas",
                "org.opencontainers.image.version": atlas.__version__,
                "org.opencontainers.image.licenses": "Apache-2.0",
                "io.atlas.targets": " ".join(t.name for t in targets),
                "io.atlas.ptx-compiler": ptx_compiler})


def _prepare_out(out_dir: Path) -> Path:
    """A fresh sibling directory to build into; an existing `out_dir` must be empty or an OCI
    layout (it is replaced only once the new image is complete)."""
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / "oci-layout").is_file():
        raise FileExistsError(f"{out_dir} exists and is not an OCI layout; choose another --out")
    partial = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    return partial


def build_image(repo_root: Path, out_dir: Path, targets: list[KernelTarget], *,
                skip_ptx: bool, cache_dir: Path | None = None, compress: bool = False,
                log: Log = lambda _: None) -> BuildResult:
    """Build the image; `out_dir` holds it only when everything succeeded."""
    started = time.monotonic()
    cache_dir = cache_dir or default_cache_dir()
    lock_path = repo_root / DEBIAN_LOCK
    deb_lock = debian.parse_lock(lock_path.read_text(encoding="utf-8"), str(lock_path))
    wheel_lock = repo_root / WHEEL_LOCK
    pinned = wheels.parse_lock(wheel_lock.read_text(encoding="utf-8"), str(wheel_lock))
    epoch = build_epoch(deb_lock)
    log(f"wheels: fetching {len(pinned)} locked wheels into {cache_dir / 'wheels'}")
    wheel_files = wheels.fetch(pinned, cache_dir / "wheels", wheel_lock)
    log(f"kernels: {len(targets)} PTX sets ({'skipped' if skip_ptx else 'compiling'})")
    ptx_entries, compiler = kernel_entries(repo_root, targets, skip_ptx=skip_ptx,
                                           cache_dir=cache_dir)
    partial = _prepare_out(out_dir)
    writer = LayoutWriter(partial, epoch, compress=compress)
    rootfs = partial / "rootfs.tar"
    try:
        log(f"base: mmdebstrap {deb_lock.base.variant} {deb_lock.base.suite} "
            f"+ {', '.join(deb_lock.base.include)}")
        debian.run_mmdebstrap(deb_lock.base, rootfs, epoch)
        debian.check_against_lock(deb_lock, debian.packages_in_tar(rootfs))
        with rootfs.open("rb") as src:
            writer.add_layer(lambda out: rewrite_tar(src, out, epoch),
                             f"mmdebstrap {deb_lock.base.suite} (tools/image/debian.lock)")
        rootfs.unlink()
        deps = LayerEntries()
        for path in wheel_files:
            wheels.unpack_into(path, deps)
        writer.add_layer(lambda out: write_entries(deps, out, epoch),
                         "python wheels (tools/image/requirements.lock)")
        code = atlas_entries(repo_root)
        writer.add_layer(lambda out: write_entries(code, out, epoch), f"atlas {atlas.__version__}")
        writer.add_layer(lambda out: write_entries(ptx_entries, out, epoch),
                         "ptx sets: " + " ".join(t.name for t in targets))
        manifest = writer.finish(run_config(targets, compiler), REF_NAME,
                                 {"io.atlas.targets": " ".join(t.name for t in targets)})
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(out_dir, ignore_errors=True)
    partial.rename(out_dir)
    sizes = [(layer.created_by, layer.blob.size) for layer in writer.layers]
    return BuildResult(manifest, sizes, targets, compiler, time.monotonic() - started)
