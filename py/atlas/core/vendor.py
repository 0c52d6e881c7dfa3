"""GPU vendors. HARDWARE.toml names one; it picks the compiler and the runtime backend."""

from __future__ import annotations

import enum


class Vendor(enum.Enum):
    NVIDIA = "nvidia"
    AMD = "amd"
    APPLE = "apple"
    INTEL = "intel"

    @classmethod
    def parse(cls, text: str) -> "Vendor":
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(
                f"unknown vendor {text!r}; known: {', '.join(v.value for v in cls)}") from None
