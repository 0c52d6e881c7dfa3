"""Reading a model directory's serving files: tokenizer.json, tokenizer_config.json,
generation_config.json, config.json, an optional chat-template override, and the model's
MODEL.toml behavior (tool parser, thinking) from the kernel tree.

This is the server's file I/O; everything it returns is plain data for the pure modules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..core.sampling import SamplingParams
from .tokenizer import TextTokenizer

if TYPE_CHECKING:
    from ..kernels.tree import ModelSpec

BehaviorLookup = Callable[[Mapping[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class ModelAssets:
    name: str
    config: Mapping[str, Any]
    tokenizer: TextTokenizer
    behavior: Mapping[str, Any]


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def load_assets(model_dir: Path, *, chat_template_file: Path | None = None,
                behavior_lookup: BehaviorLookup | None = None) -> ModelAssets:
    """Everything the server needs from `model_dir`; FileNotFoundError names what is missing."""
    tokenizer_path = model_dir / "tokenizer.json"
    if not tokenizer_path.is_file():
        raise FileNotFoundError(f"{model_dir} has no tokenizer.json")
    config = _read_json(model_dir / "config.json")
    override = chat_template_file.read_text(encoding="utf-8") if chat_template_file else None
    tokenizer = TextTokenizer(tokenizer_path.read_text(encoding="utf-8"),
                              _read_json(model_dir / "tokenizer_config.json"),
                              _read_json(model_dir / "generation_config.json"),
                              chat_template_override=override)
    behavior = (behavior_lookup or model_behavior)(config)
    return ModelAssets(model_dir.name, config, tokenizer, behavior)


def _model_spec(config: Mapping[str, Any]) -> "ModelSpec | None":
    """The MODEL.toml whose `[[model_types]]` match this checkpoint (any hardware, any
    quantization); None when there is no kernel tree or no leaf matches."""
    from ..kernels.tree import (KernelTreeError, find_repo_root, list_targets, load_model,
                                select_model_leaf)
    try:
        root = find_repo_root(Path(__file__).resolve().parent)
        targets = list_targets(root)
    except KernelTreeError:
        return None
    model_type = str(config.get("model_type", ""))
    hidden = int(config.get("hidden_size") or 0)
    for hw, quant in sorted({(t.hw, t.quant) for t in targets}):
        try:
            leaf = select_model_leaf(root, hw, model_type, hidden, quant)
        except KernelTreeError:
            continue
        return load_model(root, leaf.hw, leaf.model)
    return None


def model_behavior(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """MODEL.toml's `[behavior]` (tool parser, thinking); {} when no leaf matches."""
    spec = _model_spec(config)
    return spec.behavior if spec is not None else {}


def model_default_sampling(config: Mapping[str, Any]) -> SamplingParams | None:
    """MODEL.toml's `[presets.default]`: what a request gets for fields it leaves out."""
    spec = _model_spec(config)
    return spec.presets.get("default") if spec is not None else None


def read_tokens_file(path: Path) -> list[str]:
    from .auth import parse_tokens_file
    return parse_tokens_file(path.read_text(encoding="utf-8"))
