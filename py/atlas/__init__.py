"""Atlas: an LLM inference engine whose CUDA kernels are specialized per (hardware, model,
quantization) target and compiled to PTX at build time."""

__version__ = "0.1.0"
