"""Benchmark-only synthetic weights in a quantized format (FP8 block / per-tensor, NVFP4):
what `SyntheticWeights` stores when the model directory's config.json carries a
`quantization_config` (tools/gpu/bench_moe.py --quant), so a full-size quantized model is
measured without a checkpoint on disk.

The tensors are those `atlas models quantize` writes (routed experts per expert, the
published layout; routers, shared-expert gates, Gated-DeltaNet projections, norms,
embedding and LM head bf16; `runtime.quantize.is_quantized_name` decides by name; a
ModelOpt config's exclude_modules without lm_head / linear_attn quantizes those too). Codes
are tiled on the device from one pool of random codes made on the host (E4M3 of N(0, 1);
E2M1 of N(0, 2^2)), so nothing large crosses PCIe; NVFP4 group
scales are all E4M3 1.0. The per-tensor scales (FP8 block `weight_scale_inv`, NVFP4
`weight_scale_2`) make each weight's standard deviation `init_std`'s, as the bf16 synthetic
weights have it: the numbers exercise the kernels at realistic magnitudes, never a model.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np

from ..core.numerics import e2m1_to_f32, f32_to_e2m1, f32_to_fp8_e4m3, fp8_e4m3_to_f32, pack_e2m1
from ..core.quant_config import CheckpointQuant
from .gpu import DevicePtr, GpuBackend
from .quantize import fused_expert_parts, is_quantized_name
from .weights import TensorInfo

#: bytes of the host-made code pool each quantized tensor is tiled from
POOL_BYTES = 4 << 20
#: NVFP4 group scales: E4M3 1.0
E4M3_ONE = 0x38
_SYNTHETIC = Path("<synthetic>")


class QuantizedNames(Mapping[str, str]):
    """Tensor name -> stored dtype of a quantized synthetic checkpoint, by name alone (every
    name exists): what `loaders.linear_plan.stored_dtypes` reads to plan the linears. The
    shapes are not known when the plan asks, so NVFP4's k % 32 rule for dense linears is
    left to the loader's error (every published config meets it)."""

    def __init__(self, quant: CheckpointQuant) -> None:
        self.quant = quant
        self.codes_dtype = "U8" if quant.format == "nvfp4" else "F8_E4M3"

    def __getitem__(self, name: str) -> str:
        weight = name[: -len(self.quant.codes_name)] + "weight"
        if not name.endswith("." + self.quant.codes_name):
            return "BF16"
        if is_quantized_name(weight, (16, 16)) or (weight == "lm_head.weight"
                                                   and self.quantized_lm_head):
            return self.codes_dtype
        if _LINEAR_ATTN.search(weight) and self.quantized_linear_attn:
            return self.codes_dtype
        return "BF16"

    @property
    def quantized_linear_attn(self) -> bool:
        """A ModelOpt config whose exclude_modules names no `linear_attn` module quantizes
        the Gated-DeltaNet projections too (bench_moe.py --linear-attn; `atlas models
        quantize` keeps them bf16, as the published Qwen3.5 exports do)."""
        return (self.quant.format in ("nvfp4", "fp8-tensor")
                and not any("linear_attn" in m for m in self.quant.excluded))

    @property
    def quantized_lm_head(self) -> bool:
        """A config whose exclusions (ModelOpt's exclude_modules, the FP8-block config's
        modules_to_not_convert) do not list lm_head quantizes it (`atlas models quantize`'s
        default, bench_moe.py --lm-head); an FP8-block config without the list keeps it bf16,
        as the published releases do (core/quant_config.py)."""
        return "lm_head" not in self.quant.excluded

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


_LINEAR_ATTN = re.compile(r"\.linear_attn\.(in_proj_[a-z]+|out_proj)\.weight$")
_EXPERT_INDEX = re.compile(r"\.mlp\.experts\.(\d+)\.")


def holds(name: str, experts: int) -> bool:
    """Whether a quantized synthetic checkpoint holds tensor `name`: anything but
    transformers 5's stacked experts and experts past the config's count (the loader then
    plans the per-expert layout and finds exactly `experts` of them)."""
    if fused_expert_parts(name, (1, 2, 1)) is not None:
        return False
    m = _EXPERT_INDEX.search(name)
    return m is None or int(m.group(1)) < experts


class QuantPools:
    """The device pools quantized tensors are tiled from, and their scales."""

    def __init__(self, backend: GpuBackend, quant: CheckpointQuant, seed: int) -> None:
        host, _ = self.pool(quant, seed)
        self.ptr = backend.upload(host)
        self.backend = backend

    @staticmethod
    def pool(quant: CheckpointQuant, seed: int) -> tuple[np.ndarray, float]:
        """(the host pool's bytes, the rms of its values), a function of the seed."""
        rng = np.random.default_rng(seed)
        if quant.format == "nvfp4":
            codes = f32_to_e2m1((2.0 * rng.standard_normal(2 * POOL_BYTES)).astype(np.float32))
            rms = float(np.sqrt(np.mean(e2m1_to_f32(codes).astype(np.float64) ** 2)))
            return np.ascontiguousarray(pack_e2m1(codes.reshape(1, -1)).reshape(-1)), rms
        host = f32_to_fp8_e4m3(rng.standard_normal(POOL_BYTES).astype(np.float32))
        return host, float(np.sqrt(np.mean(fp8_e4m3_to_f32(host).astype(np.float64) ** 2)))

    @classmethod
    def rms_of(cls, quant: CheckpointQuant, seed: int) -> float:
        return cls.pool(quant, seed)[1]

    def tile(self, dst: DevicePtr, nbytes: int, key: int) -> None:
        """dst[0 : nbytes] = the pool from a key-chosen 256-byte-aligned offset, cycled."""
        done = 0
        start = (key % (POOL_BYTES // 256)) * 256
        while done < nbytes:
            n = min(nbytes - done, POOL_BYTES - start)
            self.backend.copy_d2d(dst + done, self.ptr + start, n)
            done, start = done + n, 0

    def free(self) -> None:
        self.backend.free(self.ptr)


def scale_tensor(quant: CheckpointQuant, name: str, weight_shape: tuple[int, ...],
                 std: float, rms: float) -> tuple[TensorInfo, np.ndarray]:
    """A host-read per-tensor scale of a quantized synthetic weight: its TensorInfo and
    value (the scale that gives the codes' pool the weight's `std`)."""
    value = np.float32(std / rms)
    if quant.format == "nvfp4":
        shape: tuple[int, ...] = ()
        data = np.array(value, np.float32)
    elif quant.format == "fp8-block":
        n, k = weight_shape
        shape = (-(-n // quant.block[0]), -(-k // quant.block[1]))
        data = np.full(shape, value, np.float32)
    else:
        shape, data = (), np.array(value, np.float32)
    return TensorInfo(name, "F32", shape, _SYNTHETIC, 0, 4 * math.prod(shape)), data
