"""What `serve` and `generate` do before any weight loads: find the model directory
(importing the default model on first use, with progress), check its files, and work out the
sampling defaults requests get. Both commands share it so that they agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import click

from atlas_cli.load_progress import step

if TYPE_CHECKING:
    from atlas.core.sampling import SamplingParams


def model_directory(model: str | None) -> Path:
    """MODEL (a directory, an Atlas model name, or a Hugging Face cache id), or the
    default model; its serving files are checked before anything else loads. Failures
    raise the model_paths errors, which the CLI prints as short messages."""
    from atlas.runtime import model_paths
    model_dir = default_model() if model is None else model_paths.resolve_model(model)
    model_paths.check_model_files(model_dir)
    return model_dir


def default_model() -> Path:
    """The embedded default model's directory; on first use its download and conversion
    show as steps, the conversion with its tensor count."""
    from atlas.runtime import model_paths
    converted = {"count": ""}

    def count(done: int, total: int) -> None:
        converted["count"] = f"{done}/{total} tensors"

    return model_paths.ensure_default_model(
        progress=count, step=lambda label: step(label, detail=lambda: converted["count"]))


def request_defaults(model_dir: Path, config: Mapping[str, Any],
                     backend: str = "auto") -> tuple["SamplingParams", str]:
    """The sampling a request gets for fields it leaves out (generation_config.json, else
    MODEL.toml's default preset for the hardware `backend` runs, else greedy) and where
    that came from."""
    from atlas.server.app_assets import model_default_sampling
    from atlas.server.request_spec import request_defaults as resolve
    path = model_dir / "generation_config.json"
    generation_config = json.loads(path.read_bytes()) if path.is_file() else {}
    try:
        return resolve(generation_config, model_default_sampling(config, backend))
    except ValueError as exc:
        raise click.ClickException(f"{path}: {exc}") from None


def describe(params: "SamplingParams") -> str:
    """`temperature=0.2 top_p=0.9`: the fields that differ from neutral."""
    from atlas.core.sampling import SamplingParams
    neutral = SamplingParams()
    shown = [f"temperature={params.temperature:g}"]
    shown += [f"{name}={getattr(params, name):g}"
              for name in ("top_p", "top_k", "min_p", "repetition_penalty")
              if getattr(params, name) != getattr(neutral, name)]
    return " ".join(shown)
