"""The single place where a checkpoint's model_type becomes a weight loader."""

from __future__ import annotations

from ..core.config import ModelConfig
from .loaders.dense import DenseDecoderLoader, Qwen3Loader, UnsupportedModelError
from .loaders.hybrid import Qwen35Loader
from .loaders.moe import MoeDecoderLoader, Qwen3MoeLoader

SUPPORTED_MODEL_TYPES = ("llama", "qwen3", "qwen2_moe", "qwen3_moe", "qwen3_5")


def loader_for_config(cfg: ModelConfig) -> DenseDecoderLoader:
    match cfg.model_type:
        case "llama":
            return DenseDecoderLoader()
        case "qwen3":
            return Qwen3Loader()
        case "qwen2_moe":
            return MoeDecoderLoader()
        case "qwen3_moe":
            return Qwen3MoeLoader()
        case "qwen3_5":
            return Qwen35Loader()
        case other:
            raise UnsupportedModelError(
                f"unsupported model_type {other!r}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
