"""KernelTarget: the (hardware, model, quantization) key that selects one PTX set."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KernelTarget:
    """One leaf of the kernel tree: kernels/<hw>/<model>/<quant>/."""

    hw: str
    model: str
    quant: str

    @property
    def name(self) -> str:
        return f"{self.hw}/{self.model}/{self.quant}"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, text: str) -> "KernelTarget":
        parts = text.strip().strip("/").split("/")
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"kernel target must be hw/model/quant, got {text!r}")
        return cls(*parts)
