"""Numeric formats Atlas kernels move around, with their sizes in bits (E2M1 is sub-byte)."""

from __future__ import annotations

import enum


class DType(enum.Enum):
    """A storage format. `bits` is per element; buffers are sized with `nbytes`."""

    E2M1 = ("e2m1", 4)
    FP8E4M3 = ("fp8e4m3", 8)
    FP8E5M2 = ("fp8e5m2", 8)
    BF16 = ("bf16", 16)
    FP16 = ("fp16", 16)
    FP32 = ("fp32", 32)
    I32 = ("i32", 32)
    U8 = ("u8", 8)

    def __init__(self, label: str, bits: int) -> None:
        self.label = label
        self.bits = bits

    def nbytes(self, count: int) -> int:
        """Bytes needed for `count` elements, rounding a sub-byte tail up."""
        if count < 0:
            raise ValueError(f"element count must be >= 0, got {count}")
        return (count * self.bits + 7) // 8

    @classmethod
    def parse(cls, text: str) -> "DType":
        """Parse a label such as "bf16" or a torch/safetensors name such as "BF16"."""
        key = text.strip().lower()
        aliases = {"bfloat16": "bf16", "float16": "fp16", "f16": "fp16", "half": "fp16",
                   "float32": "fp32", "f32": "fp32", "float": "fp32", "int32": "i32",
                   "uint8": "u8", "f8_e4m3": "fp8e4m3", "f8_e5m2": "fp8e5m2",
                   "float8_e4m3fn": "fp8e4m3", "float8_e5m2": "fp8e5m2"}
        key = aliases.get(key, key)
        for member in cls:
            if member.label == key:
                return member
        raise ValueError(f"unknown dtype {text!r}; known: {', '.join(m.label for m in cls)}")
