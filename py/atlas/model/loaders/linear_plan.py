"""Linear weights in the weight plan, bf16 or quantized, fused or not.

A decoder's projections (q|k|v, o, gate|up, down) become one device buffer each. In a
quantized checkpoint the buffer holds the parts' codes back to back, exactly as the bf16
parts are fused. FP8: a second buffer holds one float32 scale tensor for the fused weight;
NVFP4: the parts' E4M3 group scales are stacked by rows like the codes (uploaded as they
are), and a third buffer holds a float32 scale per output row (each part's global scale).
Scales that need re-laying are tiny, so they are read on the host, checked against the
part they scale (every error names the tensor) and fused (`fused_fp8_scales`, row vectors)
before any device work, then copied up. Which parts are quantized is read from the
checkpoint's dtypes, so layers a producer left in bf16 (an `ignore` / `exclude_modules`
list) load as bf16.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32
from ...core.quant import NVFP4_GROUP, Fp8ScaleMap, fused_fp8_scale_map, fused_fp8_scales
from ...core.quant_config import CheckpointQuant, QuantConfigError
from ...runtime.ops.matmul_nvfp4 import CHUNK_VALUES as NVFP4_CHUNK, Nvfp4Weight
from ...runtime.ops.matmul_quant import Bf16Linear, Fp8Weight, LinearWeight, QuantLinear
from ...runtime.ops.moe_quant import QuantExperts
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
    format: str = "bf16"  # 'bf16' or a CheckpointQuant format
    scale_buffer: str = ""
    smap: Fp8ScaleMap | None = None  # FP8 only
    row_buffer: str = ""  # NVFP4 only: float32 [n]
    #: > 0: a layer's routed experts of one projection, `experts` equal parts of n / experts
    #: rows each (ops.moe_quant.QuantExperts; quantized formats only)
    experts: int = 0

    @property
    def n(self) -> int:
        return sum(rows for _, rows in self.parts)


def stored_dtypes(names: object) -> Mapping[str, str]:
    """Tensor name -> safetensors dtype of a WeightStore, or what a synthetic source says it
    stores (`stored_dtypes()`: quantized synthetic weights); empty for anything else (a
    name list holds no quantized tensors)."""
    rule = getattr(names, "stored_dtypes", None)
    if callable(rule):
        return rule()
    tensors = getattr(names, "tensors", None)
    return {n: t.dtype for n, t in tensors.items()} if isinstance(tensors, dict) else {}


def stored_format(plan: "WeightPlan", parts: list[tuple[str, int]]) -> str:
    """'bf16' or the checkpoint's quantized format, as the parts (bf16 spellings) are stored;
    a WeightError when they mix."""
    return _part_format(parts, plan.quant, plan.stored)


def add_linear(plan: "WeightPlan", buffer: str, parts: list[tuple[str, int]], k: int,
               experts: int = 0) -> None:
    """Plan `buffer` = parts stacked by rows, in the format the checkpoint stores them
    (`plan.quant`, `plan.stored`). `parts` name each part's bf16 spelling (`...weight`);
    quantized spellings derive from it. `experts`: the parts are a layer's routed experts
    (quantized only), whose kernels take NVFP4 in_features in 16-value groups."""
    quant = plan.quant
    fmt = _part_format(parts, quant, plan.stored)
    if experts and fmt == "bf16":
        raise ValueError(f"{buffer}: bf16 experts are planned by loaders/moe.py")
    if fmt == "bf16":
        plan.add(buffer, [(name, (rows, k)) for name, rows in parts])
        plan.linears[buffer] = LinearPlan(buffer, tuple(parts), k)
        return
    if fmt == "nvfp4":
        need = NVFP4_GROUP if experts else NVFP4_CHUNK
        if k % need:
            raise QuantConfigError(f"{parts[0][0]}: NVFP4 needs in_features % {need} "
                                   f"== 0, got {k}")
        plan.add(buffer, [(_renamed(n, quant.codes_name), (r, k // 2)) for n, r in parts],
                 DType.U8)
        plan.add(buffer + ".scale", [(_renamed(n, quant.scale_name), (r, k // NVFP4_GROUP))
                                     for n, r in parts], DType.FP8E4M3)
        plan.buffers[buffer + ".rows"] = 4 * sum(r for _, r in parts)
        plan.linears[buffer] = LinearPlan(buffer, tuple(parts), k, fmt, buffer + ".scale",
                                          row_buffer=buffer + ".rows", experts=experts)
        return
    plan.add(buffer, [(name, (rows, k)) for name, rows in parts], DType.FP8E4M3)
    rows = [r for _, r in parts]
    smap = fused_fp8_scale_map(quant.fp8_layout, rows, k, quant.block)
    count = int(np.prod(smap.shape, dtype=np.int64)) if smap.shape else 1
    scale_buffer = buffer + ".scale"
    plan.buffers[scale_buffer] = 4 * count
    plan.linears[buffer] = LinearPlan(buffer, tuple(parts), k, fmt, scale_buffer, smap,
                                      experts=experts)


def _renamed(weight_name: str, suffix: str) -> str:
    """`a.b.weight` -> `a.b.<suffix>` (a quantized tensor beside the bf16 name)."""
    return weight_name[: -len("weight")] + suffix


def _part_format(parts: list[tuple[str, int]], quant: CheckpointQuant,
                 stored: Mapping[str, str]) -> str:
    if not quant.quantized:
        return "bf16"
    want = "U8" if quant.format == "nvfp4" else "F8_E4M3"
    kinds = {}
    for name, _ in parts:
        codes = _renamed(name, quant.codes_name)
        kinds[name] = (quant.format if stored.get(codes) == want
                       else "bf16" if stored.get(name) == "BF16" else None)
    if all(v == "bf16" for v in kinds.values()):
        return "bf16"  # left unquantized by the producer
    if all(v == quant.format for v in kinds.values()):
        return quant.format
    mixed = ", ".join(f"{n}: {v or 'missing'}" for n, v in kinds.items())
    raise WeightError(f"fused weight parts must all be {quant.format} ({want} "
                      f"{quant.codes_name!r}) or all BF16: {mixed}")


def read_host_scales(store: WeightStore, lp: LinearPlan, quant: CheckpointQuant
                     ) -> dict[str, np.ndarray]:
    """The scale buffers of a quantized linear that are built on the host (buffer -> data)."""
    if lp.format == "nvfp4":
        return {lp.row_buffer: read_nvfp4_row_scales(store, lp, quant)}
    if lp.smap is not None:
        return {lp.scale_buffer: read_fp8_scales(store, lp, quant)}
    return {}


def _read_scale(store: WeightStore, weight: str, sname: str,
                allowed: tuple[tuple[int, ...], ...], what: str) -> np.ndarray:
    """A float scale tensor, its presence, dtype, shape and finiteness checked."""
    if sname not in store:
        raise WeightError(f"{store.model_dir}: missing scale tensor {sname!r} of {what} "
                          f"weight {weight!r}")
    info = store.info(sname)
    if info.dtype not in _SCALE_DTYPES:
        raise WeightError(f"{info.file}: scale tensor {sname!r} is {info.dtype} "
                          f"(want one of {', '.join(_SCALE_DTYPES)})")
    if info.shape not in allowed:
        raise WeightError(f"{info.file}: scale tensor {sname!r} has shape "
                          f"{list(info.shape)}; {what} needs "
                          f"{' or '.join(str(list(s)) for s in allowed)}")
    raw = store.read(sname)
    value = (bf16_bits_to_f32(raw) if info.dtype == "BF16" else raw).astype(np.float32)
    if not np.all(np.isfinite(value)):
        raise WeightError(f"{info.file}: scale tensor {sname!r} holds non-finite values")
    return value


def read_nvfp4_row_scales(store: WeightStore, lp: LinearPlan, quant: CheckpointQuant
                          ) -> np.ndarray:
    """float32 [n]: each part's global scale over its rows (inverted for compressed-tensors,
    whose `weight_global_scale` divides)."""
    out = []
    for name, rows in lp.parts:
        g = float(_read_scale(store, name, _renamed(name, quant.global_name), ((), (1,)),
                              "NVFP4").reshape(-1)[0])
        if quant.global_reciprocal:
            if g == 0:
                raise WeightError(f"{_renamed(name, quant.global_name)!r} is 0 (it divides)")
            g = 1.0 / g
        out.append(np.full(rows, g, np.float32))
    return np.concatenate(out)


def read_fp8_scales(store: WeightStore, lp: LinearPlan, quant: CheckpointQuant) -> np.ndarray:
    """The fused float32 scale tensor of an FP8 linear, every part's scale checked first."""
    layout = quant.fp8_layout
    scales = [_read_scale(store, name, _renamed(name, quant.scale_name),
                          _scale_shapes(layout, rows, lp.k, quant.block), quant.format)
              for name, rows in lp.parts]
    fused, _ = fused_fp8_scales(layout, scales, [r for _, r in lp.parts], lp.k, quant.block)
    return fused


def _scale_shapes(layout: str, rows: int, k: int, block: tuple[int, int]
                  ) -> tuple[tuple[int, ...], ...]:
    if layout == "block":
        return ((-(-rows // block[0]), -(-k // block[1])),)
    if layout == "channel":
        return ((rows, 1), (rows,))
    return ((), (1,))


def build_linear(lp: LinearPlan, ptr: Mapping[str, int]) -> LinearWeight | QuantExperts:
    """The device-side weight object of a planned linear, once its buffers have addresses
    (a layer's quantized experts: `QuantExperts`)."""
    if lp.experts:
        return QuantExperts("nvfp4" if lp.format == "nvfp4" else "fp8", ptr[lp.buffer],
                            ptr[lp.scale_buffer], lp.experts, lp.n // lp.experts, lp.k,
                            lp.smap, ptr[lp.row_buffer] if lp.row_buffer else 0)
    if lp.format == "bf16":
        return Bf16Linear(ptr[lp.buffer], lp.n, lp.k)
    if lp.format == "nvfp4":
        return QuantLinear(Nvfp4Weight(ptr[lp.buffer], ptr[lp.scale_buffer],
                                       ptr[lp.row_buffer], lp.n, lp.k))
    return QuantLinear(Fp8Weight(ptr[lp.buffer], ptr[lp.scale_buffer], lp.n, lp.k, lp.smap))
