"""Linear weights in the weight plan, bf16 or quantized, fused or not.

A decoder's projections (q|k|v, o, gate|up, down) become one device buffer each. In a
quantized checkpoint the buffer holds the parts' FP8 codes back to back, exactly as the
bf16 parts are fused, and a second buffer holds one scale tensor for the fused weight:
scales are tiny, so they are read on the host, checked against the part they scale (every
error names the tensor) and re-laid for the fusion (`fused_fp8_scales`) before any device
work, then copied up. Which parts are quantized is read from the checkpoint's dtypes, so
layers a producer left in bf16 (an `ignore` / `exclude_modules` list) load as bf16.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32
from ...core.quant import Fp8ScaleMap, fused_fp8_scale_map, fused_fp8_scales
from ...core.quant_config import CheckpointQuant, QuantConfigError
from ...runtime.ops.matmul_quant import Bf16Linear, Fp8Weight, LinearWeight, QuantLinear
from ...runtime.weights import WeightError, WeightStore

if TYPE_CHECKING:
    from .dense import WeightPlan

#: scale dtypes producers write (compressed-tensors often stores bf16 scales)
_SCALE_DTYPES = ("F32", "BF16", "F16")


@dataclass(frozen=True, slots=True)
class LinearPlan:
    """One (possibly fused) linear weight [n, k]: its parts and storage format."""

    buffer: str
    parts: tuple[tuple[str, int], ...]  # (weight tensor name, rows)
    k: int
    format: str = "bf16"  # 'bf16' or an FP8 CheckpointQuant format
    scale_buffer: str = ""
    smap: Fp8ScaleMap | None = None

    @property
    def n(self) -> int:
        return sum(rows for _, rows in self.parts)


def add_linear(plan: "WeightPlan", buffer: str, parts: list[tuple[str, int]], k: int,
               quant: CheckpointQuant, stored: Mapping[str, str]) -> None:
    """Plan `buffer` = parts stacked by rows, in the format the checkpoint stores them."""
    fmt = _part_format(parts, quant, stored)
    if fmt == "bf16":
        plan.add(buffer, [(name, (rows, k)) for name, rows in parts])
        plan.linears[buffer] = LinearPlan(buffer, tuple(parts), k)
        return
    plan.add(buffer, [(name, (rows, k)) for name, rows in parts], DType.FP8E4M3)
    rows = [r for _, r in parts]
    smap = fused_fp8_scale_map(quant.fp8_layout, rows, k, quant.block)
    count = int(np.prod(smap.shape, dtype=np.int64)) if smap.shape else 1
    scale_buffer = buffer + ".scale"
    plan.buffers[scale_buffer] = 4 * count
    plan.linears[buffer] = LinearPlan(buffer, tuple(parts), k, fmt, scale_buffer, smap)


def _part_format(parts: list[tuple[str, int]], quant: CheckpointQuant,
                 stored: Mapping[str, str]) -> str:
    if not quant.quantized:
        return "bf16"
    if quant.format == "nvfp4":
        raise QuantConfigError(f"{quant.source}: NVFP4 weights are not supported by this "
                               "build's dense loader yet (FP8 formats are)")
    kinds = {name: stored.get(name) for name, _ in parts}
    if all(d == "BF16" for d in kinds.values()):
        return "bf16"  # left unquantized by the producer
    if all(d == "F8_E4M3" for d in kinds.values()):
        return quant.format
    mixed = ", ".join(f"{n}: {d or 'missing'}" for n, d in kinds.items())
    raise WeightError(f"fused weight parts must share one dtype (F8_E4M3 or BF16): {mixed}")


def read_fp8_scales(store: WeightStore, lp: LinearPlan, quant: CheckpointQuant) -> np.ndarray:
    """The fused float32 scale tensor of an FP8 linear, every part's scale checked first."""
    layout, scales = quant.fp8_layout, []
    for name, rows in lp.parts:
        sname = name[: -len("weight")] + quant.scale_name
        if sname not in store:
            raise WeightError(f"{store.model_dir}: missing scale tensor {sname!r} of FP8 "
                              f"weight {name!r}")
        info = store.info(sname)
        if info.dtype not in _SCALE_DTYPES:
            raise WeightError(f"{info.file}: scale tensor {sname!r} is {info.dtype} "
                              f"(want one of {', '.join(_SCALE_DTYPES)})")
        allowed = _scale_shapes(layout, rows, lp.k, quant.block)
        if info.shape not in allowed:
            raise WeightError(f"{info.file}: scale tensor {sname!r} has shape "
                              f"{list(info.shape)}; {quant.format} needs "
                              f"{' or '.join(str(list(s)) for s in allowed)}")
        raw = store.read(sname)
        value = (bf16_bits_to_f32(raw) if info.dtype == "BF16" else raw).astype(np.float32)
        if not np.all(np.isfinite(value)):
            raise WeightError(f"{info.file}: scale tensor {sname!r} holds non-finite values")
        scales.append(value)
    fused, _ = fused_fp8_scales(layout, scales, [r for _, r in lp.parts], lp.k, quant.block)
    return fused


def _scale_shapes(layout: str, rows: int, k: int, block: tuple[int, int]
                  ) -> tuple[tuple[int, ...], ...]:
    if layout == "block":
        return ((-(-rows // block[0]), -(-k // block[1])),)
    if layout == "channel":
        return ((rows, 1), (rows,))
    return ((), (1,))


def build_linear(lp: LinearPlan, ptr: Mapping[str, int]) -> LinearWeight:
    """The device-side weight object of a planned linear, once its buffers have addresses."""
    if lp.smap is None:
        return Bf16Linear(ptr[lp.buffer], lp.n, lp.k)
    return QuantLinear(Fp8Weight(ptr[lp.buffer], ptr[lp.scale_buffer], lp.n, lp.k, lp.smap))
