"""Reading a model directory's serving files: tokenizer.json, tokenizer_config.json,
generation_config.json, config.json, an optional chat-template override, and the model's
MODEL.toml behavior (tool parser, thinking) and sampling presets.

MODEL.toml comes from the built PTX sets (each carries the MODEL.toml of every model it runs),
never from a source checkout, so an installed wheel serves with the same behavior as the
repository. The hardware is the device's (CUDA: compute capability -> the set compiled for
it); the host backend uses the default hardware's and says so in the log.

This is the server's file I/O; everything it returns is plain data for the pure modules.
"""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import structlog

from ..core.sampling import SamplingParams
from .tokenizer import TextTokenizer

if TYPE_CHECKING:
    from ..kernels.tree import ServedModel

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
                behavior_lookup: BehaviorLookup | None = None,
                backend: str = "auto") -> ModelAssets:
    """Everything the server needs from `model_dir`; FileNotFoundError names what is missing.
    `backend` (auto, cuda, host) decides whose hardware's MODEL.toml behavior applies."""
    tokenizer_path = model_dir / "tokenizer.json"
    if not tokenizer_path.is_file():
        raise FileNotFoundError(f"{model_dir} has no tokenizer.json")
    config = _read_json(model_dir / "config.json")
    override = chat_template_file.read_text(encoding="utf-8") if chat_template_file else None
    tokenizer = TextTokenizer(tokenizer_path.read_text(encoding="utf-8"),
                              _read_json(model_dir / "tokenizer_config.json"),
                              _read_json(model_dir / "generation_config.json"),
                              chat_template_override=override)
    behavior = (behavior_lookup(config) if behavior_lookup is not None
                else model_behavior(config, backend))
    return ModelAssets(model_dir.name, config, tokenizer, behavior)


def _log() -> Any:
    """A logger writing to stderr with the process's structlog processors: `atlas generate`
    prints its completion on stdout, which a log line must not interleave."""
    return structlog.wrap_logger(structlog.PrintLogger(sys.stderr), logger_name="atlas.assets")


def _served_model(config: Mapping[str, Any], backend: str) -> "ServedModel | None":
    """The built model directory serving this checkpoint on the hardware `backend` runs (any
    quantization the loader uses); None, logged, when no PTX set is built or none serves it."""
    from ..kernels.registry import KernelsNotFound, find_kernels_dir

    try:
        directory = find_kernels_dir()
    except KernelsNotFound as exc:
        _log().warning("no MODEL.toml behavior or presets for this model", reason=str(exc))
        return None
    return _served_model_in(directory, str(config.get("model_type", "")),
                            int(config.get("hidden_size") or 0), backend)


@functools.lru_cache(maxsize=8)
def _served_model_in(directory: Path, model_type: str, hidden: int,
                     backend: str) -> "ServedModel | None":
    """`_served_model` for the sets in `directory`; cached, so the sets are read and the
    choice is logged once however many settings a startup asks for."""
    from ..kernels.registry import KernelsNotFound, PtxRegistry
    from ..kernels.tree import KernelTreeError
    from ..model.load import QUANT
    from ..runtime.backend_select import kernel_hardware, resolve_kind

    log = _log()
    registry = PtxRegistry.load(directory)
    try:
        kind = resolve_kind(backend)
        hw = kernel_hardware(kind, None, registry.hardware_archs())
        _, served = registry.select_model(hw, model_type, hidden, QUANT)
    except (KernelTreeError, KernelsNotFound, ValueError) as exc:
        log.warning("no MODEL.toml behavior or presets for this model", reason=str(exc))
        return None
    why = "the device's compute capability" if kind == "cuda" else \
        f"the {kind} backend's default hardware"
    log.info("model behavior", model_dir=f"{hw}/{served.model}", ptx_set=served.target.name,
             hardware=hw, chosen_by=why, tool_parser=served.spec.behavior.get("tool_parser"))
    return served


def model_behavior(config: Mapping[str, Any], backend: str = "auto") -> Mapping[str, Any]:
    """MODEL.toml's `[behavior]` (tool parser, thinking); {} when no built set serves it."""
    served = _served_model(config, backend)
    return served.spec.behavior if served is not None else {}


def model_default_sampling(config: Mapping[str, Any],
                           backend: str = "auto") -> SamplingParams | None:
    """MODEL.toml's `[presets.default]`: what a request gets for fields it leaves out."""
    served = _served_model(config, backend)
    return served.spec.presets.get("default") if served is not None else None


def read_tokens_file(path: Path) -> list[str]:
    from .auth import parse_tokens_file
    return parse_tokens_file(path.read_text(encoding="utf-8"))
