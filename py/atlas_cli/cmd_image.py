"""`atlas image`: build the daemonless, reproducible OCI image, and refresh its locks.

`atlas image build --out DIR` writes an OCI image layout (load it with `podman pull oci:DIR`
or `skopeo copy oci:DIR ...`). Targets are chosen like `atlas kernels build`:
--target-hw/--target-model/--target-quant, defaulting to ATLAS_TARGET_HW/MODEL/QUANT and then
`*`; ATLAS_SKIP_BUILD=1 puts PTX sets without modules in (a CPU-only image).
"""

from __future__ import annotations

from pathlib import Path

import click

from atlas.kernels.build import skip_requested
from atlas.kernels.tree import KernelTreeError, find_repo_root, select_targets, selection_from_env


def _repo_root() -> Path:
    return find_repo_root(Path.cwd().absolute())


@click.group(name="image")
def command() -> None:
    """Build OCI images of Atlas without a container daemon."""


@command.command(name="build")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path),
              help="Directory for the OCI image layout (replaced if it holds one).")
@click.option("--target-hw", default=None, help="Hardware wildcard [ATLAS_TARGET_HW or *].")
@click.option("--target-model", default=None, help="Model wildcard [ATLAS_TARGET_MODEL or *].")
@click.option("--target-quant", default=None, help="Quant wildcard [ATLAS_TARGET_QUANT or *].")
@click.option("--gzip", "compress", is_flag=True,
              help="gzip the layers (smaller; the digest then depends on zlib's version).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Wheel and PTX cache [~/.cache/atlas/image].")
def build_cmd(out_dir: Path, target_hw: str | None, target_model: str | None,
              target_quant: str | None, compress: bool, cache_dir: Path | None) -> None:
    """Build the image of the selected targets (a slim image per model) into --out."""
    from atlas.image.build import build_image
    from atlas.image.debian import DebianLockError
    from atlas.image.wheels import WheelLockError

    repo_root = _repo_root()
    env_hw, env_model, env_quant = selection_from_env()
    try:
        targets = select_targets(repo_root, target_hw or env_hw, target_model or env_model,
                                 target_quant or env_quant)
        result = build_image(repo_root, out_dir.absolute(), targets, skip_ptx=skip_requested(),
                             cache_dir=cache_dir, compress=compress, log=click.echo)
    except (KernelTreeError, DebianLockError, WheelLockError, FileExistsError) as exc:
        raise click.ClickException(str(exc)) from None
    for created_by, size in result.layer_sizes:
        click.echo(f"layer {size / 1e6:9.1f} MB  {created_by}")
    click.echo(f"targets: {' '.join(t.name for t in result.targets)} "
               f"(PTX: {result.ptx_compiler})")
    click.echo(f"image {result.manifest.digest}  {result.size / 1e6:.1f} MB  "
               f"built in {result.seconds:.1f}s  -> {out_dir}")


@command.command(name="lock")
@click.option("--debian/--no-debian", default=True, show_default=True,
              help="Re-record the Debian package set (runs mmdebstrap).")
@click.option("--wheels/--no-wheels", default=True, show_default=True,
              help="Re-resolve the Python wheels (pip, for the image's interpreter).")
def lock_cmd(debian: bool, wheels: bool) -> None:
    """Refresh tools/image/debian.lock and tools/image/requirements.lock."""
    from atlas.image import build, lock
    from atlas.image.debian import DebianLockError
    from atlas.image.wheels import WheelLockError

    repo_root = _repo_root()
    try:
        if wheels:
            pinned = lock.write_wheel_lock(repo_root, repo_root / build.WHEEL_LOCK)
            click.echo(f"{build.WHEEL_LOCK}: {len(pinned)} wheels")
        if debian:
            deb = lock.write_debian_lock(repo_root / build.DEBIAN_LOCK)
            click.echo(f"{build.DEBIAN_LOCK}: {len(deb.packages)} packages")
    except (DebianLockError, WheelLockError) as exc:
        raise click.ClickException(str(exc)) from None
