"""The single place where a checkpoint's model_type becomes a weight loader."""

from __future__ import annotations

from ..core.config import ModelConfig
from .loaders.dense import (DenseDecoderLoader, Gemma3Loader, Phi3Loader, Qwen3Loader,
                            UnsupportedModelError)
from .loaders.hybrid import Qwen35Loader, Qwen35MoeLoader, Qwen3NextLoader
from .loaders.moe import (Glm4MoeLoader, GptOssLoader, MiniMaxM2Loader, MixtralLoader,
                          MoeDecoderLoader, Qwen3MoeLoader)

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "smollm3", "mixtral",
                         "qwen2_moe", "qwen3_moe", "minimax_m2", "qwen3_5", "qwen3_5_moe",
                         "qwen3_next", "gemma3", "glm4_moe", "gpt_oss")


def loader_for_config(cfg: ModelConfig) -> DenseDecoderLoader:
    match cfg.model_type:
        case "llama" | "mistral" | "qwen2" | "smollm3":
            return DenseDecoderLoader()
        case "qwen3":
            return Qwen3Loader()
        case "phi3":
            return Phi3Loader()
        case "gemma3":
            return Gemma3Loader()
        case "mixtral":
            return MixtralLoader()
        case "qwen2_moe":
            return MoeDecoderLoader()
        case "qwen3_moe":
            return Qwen3MoeLoader()
        case "minimax_m2":
            return MiniMaxM2Loader()
        case "glm4_moe":
            return Glm4MoeLoader()
        case "gpt_oss":
            return GptOssLoader()
        case "qwen3_5":
            return Qwen35Loader()
        case "qwen3_5_moe":
            return Qwen35MoeLoader()
        case "qwen3_next":
            return Qwen3NextLoader()
        case other:
            raise UnsupportedModelError(
                f"unsupported model_type {other!r}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
