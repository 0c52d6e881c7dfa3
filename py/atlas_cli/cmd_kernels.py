"""`atlas kernels`: build the PTX sets of the kernel tree, and list its targets.

`atlas kernels build` runs the same code as `bazel build //kernels:all` and writes the same
bytes. Leaves are selected by ATLAS_TARGET_HW/MODEL/QUANT (wildcards, default `*`);
ATLAS_SKIP_BUILD=1 writes sets with no modules and needs no nvcc.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from atlas.kernels.build import (ModuleBuilt, build_into, default_cache_dir, selected_targets,
                                 skip_requested)
from atlas.kernels.compiler import resolve_compute_target
from atlas.kernels.ptxset import SKIPPED_COMPILER
from atlas.kernels.sources import closure_hash, leaf_modules
from atlas.kernels.registry import DEFAULT_BUILD_DIR
from atlas.kernels.tree import find_repo_root, load_leaf


def _repo_root() -> Path:
    return find_repo_root(Path.cwd().absolute())


@click.group(name="kernels")
def command() -> None:
    """Build and inspect the kernel tree (kernels/<hw>/<model>/<quant>/)."""


@command.command(name="build")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None,
              help=f"Directory for the <hw>__<model>__<quant>.ptxset.json files "
                   f"[default: <repo>/{DEFAULT_BUILD_DIR.as_posix()}, where the runtime looks].")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Parallel compiler processes (default: min(8, CPUs)).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Compiled-module cache, keyed by content and shared by every checkout "
                   "[default: $ATLAS_PTX_CACHE, else ~/.cache/atlas/ptx].")
@click.option("--no-cache", is_flag=True, help="Compile every module (reads and writes no "
              "cache).")
@click.option("--define", "-D", "defines", multiple=True, metavar="NAME=VALUE",
              help="Add -DNAME=VALUE to every module's flags (a compile-time A/B variant; "
                   "write it to its own --out).")
def build_cmd(out_dir: Path | None, jobs: int | None, cache_dir: Path | None,
              no_cache: bool, defines: tuple[str, ...]) -> None:
    """Compile every selected leaf into one PTX-set artifact, printing one line per distinct
    module as it finishes."""
    repo_root = _repo_root()
    out_dir = out_dir or repo_root / DEFAULT_BUILD_DIR
    targets = selected_targets(repo_root)
    skip = skip_requested()
    started = time.monotonic()

    def progress(built: ModuleBuilt) -> None:
        click.echo(built.line())

    written = build_into(repo_root, out_dir, targets, skip=skip, jobs=jobs,
                         cache_dir=None if no_cache else cache_dir or default_cache_dir(),
                         progress=progress, defines=defines)
    for path in written:
        click.echo(f"{path}  {path.stat().st_size:,} bytes")
    mode = " (ATLAS_SKIP_BUILD: no modules)" if skip else ""
    click.echo(f"built {len(written)} PTX sets in {time.monotonic() - started:.1f}s{mode}")


@command.command(name="list")
def list_cmd() -> None:
    """Print each selected target with its closure hash, the model directories it runs, and
    its modules.

    The hash is computed with the installed compiler's version, as a build would bake it
    (with "skipped" under ATLAS_SKIP_BUILD=1).
    """
    repo_root = _repo_root()
    skip = skip_requested()
    for target in selected_targets(repo_root):
        leaf = load_leaf(repo_root, target)
        version = (SKIPPED_COMPILER if skip
                   else resolve_compute_target(leaf.hardware.vendor).version())
        digest = closure_hash(repo_root, target, leaf.hardware.arch, version, leaf.flags)
        modules = leaf_modules(repo_root, target)
        click.echo(f"{target}  {leaf.hardware.arch}  {digest}")
        click.echo(f"    runs models      {', '.join(m.model for m in leaf.models) or '(none)'}")
        for name, path in modules.items():
            click.echo(f"    {name:<16} {path.relative_to(repo_root).as_posix()}")
