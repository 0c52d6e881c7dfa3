"""A quantized checkpoint -> the bf16 checkpoint its weights stand for.

This is the reference side of every quantized-model check: the engine runs the quantized
checkpoint (kernels dequantizing in registers), the bf16 path runs this one, and their
logits must agree to the bf16 rounding of the dequantized weights. Each quantized weight
becomes bf16 of the float32 value the kernels' dequantization forms (code x f32 scale; for
NVFP4 code x f32(e4m3 group scale x global)), computed from its own (unfused) scale tensors,
independently of the loader's fusion and re-laying, so a GEMM-sized step must match the
quantized engine exactly. Scale tensors, input scales and the quantization config are
dropped, every other tensor and file is copied.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..core.numerics import (bf16_bits_to_f32, e2m1_to_f32, f32_to_bf16_bits,
                             fp8_e4m3_to_f32, unpack_e2m1)
from ..core.quant import NVFP4_GROUP, Fp8ScaleMap
from ..core.quant_config import CheckpointQuant
from .quantize import QuantizeError, copy_side_files, ordered_map
from .weights import WeightStore, write_safetensors


def _fp8_map(quant: CheckpointQuant, n: int, k: int) -> Fp8ScaleMap:
    layout = quant.fp8_layout
    if layout == "block":
        return Fp8ScaleMap.block(n, k, *quant.block)
    return Fp8ScaleMap.channel(n) if layout == "channel" else Fp8ScaleMap.tensor()


def dequantize_checkpoint(src: Path, dst: Path) -> int:
    """Write `dst` (new directory) = `src` with every quantized weight in bf16; returns how
    many weights were dequantized."""
    src, dst = Path(src), Path(dst)
    quant = CheckpointQuant.from_dir(src)
    if not quant.quantized:
        raise QuantizeError(f"{src}: the checkpoint is not quantized")
    store = WeightStore(src)
    codes_suffix = "." + quant.codes_name
    quantized = [n for n, t in store.tensors.items() if n.endswith(codes_suffix)
                 and t.dtype == ("U8" if quant.format == "nvfp4" else "F8_E4M3")]
    drop = set()
    for name in quantized:
        base = name[: -len(quant.codes_name)]
        drop |= {base + s for s in (quant.scale_name, quant.global_name, "input_scale",
                                    "input_global_scale") if s}
    names = sorted(n for n in store.tensors if n not in drop)
    layout = []
    for name in names:
        info = store.info(name)
        if name in quantized:
            n, k = info.shape[0], info.shape[1] * (2 if quant.format == "nvfp4" else 1)
            layout.append((name[: -len(quant.codes_name)] + "weight", "BF16", (n, k)))
        else:
            layout.append((name, info.dtype, info.shape))

    def convert(name: str) -> np.ndarray:
        if name not in quantized:
            return store.read(name)
        base = name[: -len(quant.codes_name)]
        scale = store.read(base + quant.scale_name)
        if store.info(base + quant.scale_name).dtype == "BF16":
            scale = bf16_bits_to_f32(scale)
        codes = store.read(name)
        if quant.format == "nvfp4":
            g = float(np.asarray(store.read(base + quant.global_name)).reshape(-1)[0])
            g32 = np.float32(1.0 / g if quant.global_reciprocal else g)
            s = fp8_e4m3_to_f32(scale) * g32  # f32 group scale, as the kernels form it
            w = e2m1_to_f32(unpack_e2m1(codes)) * np.repeat(s, NVFP4_GROUP, axis=1)
        else:
            smap = _fp8_map(quant, *codes.shape)
            w = fp8_e4m3_to_f32(codes) * smap.expand(scale, *codes.shape)
        return f32_to_bf16_bits(w.astype(np.float32))

    dst.mkdir(parents=True, exist_ok=False)
    write_safetensors(dst / "model.safetensors", layout, ordered_map(convert, names))
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    config.pop("quantization_config", None)
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    copy_side_files(src, dst)
    return len(quantized)
