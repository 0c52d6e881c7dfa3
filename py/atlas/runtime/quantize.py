"""`atlas models quantize`: a bf16 checkpoint -> FP8 or NVFP4, in the published layouts.

Which tensors: every 2-D linear weight of a decoder layer (`model.layers.N.*_proj.weight`,
also under a multimodal wrapper's `model.language_model.`) whose dims the kernels take
(multiples of 16), MoE experts and shared experts included. Experts stored in transformers
5's fused layout (`mlp.experts.gate_up_proj` [E, 2I, H], `mlp.experts.down_proj` [E, H, I])
are written in the published per-expert layout (`mlp.experts.{e}.gate_proj.weight` ...), as
ModelOpt and llm-compressor export them. The embedding, LM head, norms, MoE routers
(`mlp.gate`) and shared-expert gates stay bf16, as the official releases keep them (ModelOpt
quantizes the shared expert's projections and leaves its 1-row gate in bf16; so do we), and
so do a hybrid model's Gated-DeltaNet projections (`linear_attn`);
`lm_head=True` (`--lm-head`) quantizes the (untied) LM head too, in the same layout: at
batch 1 it is 1.24 GB of Qwen3-8B's 8.3 GB FP8 / 5.2 GB NVFP4 step (the loader reads which
linears are quantized from the stored dtypes, so such a checkpoint loads like any other).
`lm_head=None` (the CLI's default) does so wherever the checkpoint has a separate LM head the
kernels take, and keeps it bf16 otherwise; `--no-lm-head` writes the published layout.

* `fp8-block`: E4M3 codes + `weight_scale_inv` float32 [ceil(N/128), ceil(K/128)], each
  block's amax mapped to 448; `quantization_config` {"quant_method": "fp8",
  "weight_block_size": [128, 128]} (the Qwen3 FP8 releases' format).
* `fp8-tensor`: E4M3 codes + `weight_scale` float32 scalar (amax / 448); ModelOpt's
  spelling (`quant_method` "modelopt", `quant_algo` "FP8", and hf_quant_config.json).
* `nvfp4`: E2M1 codes packed two per byte (element 2i in the low nibble) [N, K/2],
  `weight_scale` E4M3 [N, K/16] per 16 values and `weight_scale_2` float32 per tensor
  (amax / (448 * 6)); ModelOpt's `quant_algo` "NVFP4", `group_size` 16.

Rounding: E4M3 round-to-nearest-even with saturation and the branchless E2M1 rule of
`atlas.core.numerics`, the same encoders the kernels' references decode.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence, TypeVar

import numpy as np

from ..core.numerics import (bf16_bits_to_f32, f32_to_e2m1, f32_to_fp8_e4m3, fp8_e4m3_to_f32,
                             pack_e2m1)
from ..core.quant import NVFP4_GROUP, dequantize_nvfp4  # noqa: F401  (re-exported)
from .weights import WeightStore, write_safetensors

SCHEMES = ("fp8-block", "fp8-tensor", "nvfp4")
E4M3_MAX = 448.0
E2M1_MAX = 6.0
FP8_BLOCK = 128

T = TypeVar("T")
_LAYER = r"^model\.(?:language_model\.)?layers\.\d+\."
#: a decoder layer's linear weights: `*_proj` (and Mixtral's experts, `experts.{e}.w1|w2|w3`)
_QUANTIZED = re.compile(_LAYER + r".*(?:_proj|\.experts\.\d+\.w[123])\.weight$")
#: transformers 5's fused experts: (prefix `...mlp.experts.`, which projection)
_FUSED_EXPERTS = re.compile("(" + _LAYER + r"(?:.*\.)?mlp\.experts\.)(gate_up_proj|down_proj)$")
#: routers, shared-expert gates and (hybrid models) the Gated-DeltaNet projections stay bf16:
#: the published Qwen3.5 NVFP4 exports keep linear_attn in bf16, and its kernels read bf16
_KEPT = re.compile(r"(\.gate\.|shared_expert_gate|\.router\.|\.linear_attn\.)")

class QuantizeError(ValueError):
    """The source cannot be quantized as asked; the message names the file or tensor."""


@dataclass(frozen=True, slots=True)
class QuantizeReport:
    scheme: str
    quantized: int
    kept: int
    bytes_in: int
    bytes_out: int


def is_quantized_name(name: str, shape: tuple[int, ...]) -> bool:
    """Whether `scheme` quantizes this tensor (linear weights of decoder layers only)."""
    return (len(shape) == 2 and bool(_QUANTIZED.match(name)) and not _KEPT.search(name)
            and shape[0] % 16 == 0 and shape[1] % 16 == 0)


_EXPERT = re.compile(r"\.(?:mlp|block_sparse_moe)\.experts\.\d+\.")


def _kernels_take(scheme: str, name: str, shape: tuple[int, ...]) -> bool:
    """NVFP4 linears need in_features % 32 (the dense kernels' 32-value chunks); routed
    experts' kernels take 16-value groups. A weight they cannot take stays bf16 (listed in
    exclude_modules), so the checkpoint loads."""
    return scheme != "nvfp4" or shape[1] % 32 == 0 or bool(_EXPERT.search(name))


def fused_expert_parts(name: str, shape: tuple[int, ...]
                       ) -> list[tuple[str, tuple[int, int]]] | None:
    """The per-expert 2-D weights a fused 3-D expert tensor stands for, in the order its rows
    hold them (gate_up [E, 2I, H]: expert e's gate rows then its up rows), or None when
    `name` is not a fused expert tensor."""
    m = _FUSED_EXPERTS.match(name)
    if m is None or len(shape) != 3:
        return None
    prefix, which = m.groups()
    experts, rows, cols = shape
    if which == "down_proj":
        return [(f"{prefix}{e}.down_proj.weight", (rows, cols)) for e in range(experts)]
    if rows % 2:
        raise QuantizeError(f"{name}: fused gate_up_proj has an odd row count {rows}")
    return [(f"{prefix}{e}.{proj}.weight", (rows // 2, cols)) for e in range(experts)
            for proj in ("gate_proj", "up_proj")]


def quantize_fp8_block(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes uint8 [n, k], scale_inv float32 [ceil(n/128), ceil(k/128)])."""
    n, k = w.shape
    rows, cols = -(-n // FP8_BLOCK), -(-k // FP8_BLOCK)
    padded = np.zeros((rows * FP8_BLOCK, cols * FP8_BLOCK), np.float32)
    padded[:n, :k] = np.abs(w)
    amax = padded.reshape(rows, FP8_BLOCK, cols, FP8_BLOCK).max(axis=(1, 3))
    scale = np.where(amax > 0, amax / E4M3_MAX, 1.0).astype(np.float32)
    full = np.repeat(np.repeat(scale, FP8_BLOCK, 0), FP8_BLOCK, 1)[:n, :k]
    return f32_to_fp8_e4m3(w / full), scale


def quantize_fp8_tensor(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes uint8 [n, k], scale float32 scalar)."""
    amax = float(np.abs(w).max())
    scale = np.float32(amax / E4M3_MAX if amax > 0 else 1.0)
    return f32_to_fp8_e4m3(w / scale), np.array(scale, np.float32)


def quantize_nvfp4(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(packed uint8 [n, k/2], group scales E4M3 codes [n, k/16], global float32 scalar)."""
    n, k = w.shape
    amax = float(np.abs(w).max())
    global_scale = np.float32(amax / (E4M3_MAX * E2M1_MAX) if amax > 0 else 1.0)
    groups = w.reshape(n, k // NVFP4_GROUP, NVFP4_GROUP)
    group_amax = np.abs(groups).max(axis=2)
    s_codes = f32_to_fp8_e4m3(group_amax / E2M1_MAX / global_scale)
    s = fp8_e4m3_to_f32(s_codes) * global_scale
    s = np.where(s > 0, s, 1.0).astype(np.float32)
    codes = f32_to_e2m1((groups / s[:, :, None]).reshape(n, k))
    return pack_e2m1(codes), s_codes, np.array(global_scale, np.float32)


def _quantized_layout(scheme: str, name: str, shape: tuple[int, ...]
                      ) -> list[tuple[str, str, tuple[int, ...]]]:
    """The tensors `scheme` writes for one bf16 weight, in the order `_quantize` yields."""
    base, (n, k) = name[: -len(".weight")], shape
    if scheme == "fp8-block":
        return [(name, "F8_E4M3", (n, k)),
                (base + ".weight_scale_inv", "F32", (-(-n // FP8_BLOCK), -(-k // FP8_BLOCK)))]
    if scheme == "fp8-tensor":
        return [(name, "F8_E4M3", (n, k)), (base + ".weight_scale", "F32", ()),
                (base + ".input_scale", "F32", ())]
    return [(name, "U8", (n, k // 2)), (base + ".weight_scale", "F8_E4M3", (n, k // NVFP4_GROUP)),
            (base + ".weight_scale_2", "F32", ()), (base + ".input_scale", "F32", ())]


def _quantize(scheme: str, w: np.ndarray) -> list[np.ndarray]:
    one = np.array(1.0, np.float32)  # input_scale: activations stay bf16 (weight-only)
    if scheme == "fp8-block":
        return list(quantize_fp8_block(w))
    if scheme == "fp8-tensor":
        return [*quantize_fp8_tensor(w), one]
    return [*quantize_nvfp4(w), one]


def quantization_config(scheme: str, kept: list[str]) -> tuple[dict, dict | None]:
    """(config.json's quantization_config, hf_quant_config.json or None)."""
    modules = sorted({n[: -len(".weight")] for n in kept if n.endswith(".weight")})
    if scheme == "fp8-block":  # transformers' FineGrainedFP8Config spelling of the kept modules
        return ({"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                 "weight_block_size": [FP8_BLOCK, FP8_BLOCK],
                 "modules_to_not_convert": modules}, None)
    algo = "FP8" if scheme == "fp8-tensor" else "NVFP4"
    body = {"quant_algo": algo, "kv_cache_quant_algo": None, "exclude_modules": modules}
    if algo == "NVFP4":
        body["group_size"] = NVFP4_GROUP
    return ({"quant_method": "modelopt", **body},
            {"producer": {"name": "atlas"}, "quantization": body})


def ordered_map(fn: Callable[[str], T], items: Sequence[str],
                window: int | None = None) -> Iterator[T]:
    """fn over items on worker threads (numpy's array ops release the GIL), results in
    order, at most `window` in flight: a checkpoint converts at the machine's core count
    while only that many tensors are in memory at once."""
    window = window or min(8, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=window) as pool:
        pending: deque[Future[T]] = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def copy_side_files(src: Path, dst: Path) -> None:
    """Copy what is not weights or config (tokenizer, templates, generation config)."""
    for extra in src.iterdir():
        if extra.is_file() and not extra.name.endswith(".safetensors") and extra.name not in (
                "config.json", "model.safetensors.index.json", "hf_quant_config.json"):
            shutil.copy2(extra, dst / extra.name)


def _lm_head_refusal(store: WeightStore, config: dict) -> str | None:
    """Why the checkpoint's LM head cannot be quantized (None: it can)."""
    if "lm_head.weight" not in store or config.get("tie_word_embeddings"):
        return "no separate lm_head.weight to quantize (tied embeddings?)"
    shape = store.info("lm_head.weight").shape
    if any(d % FP8_BLOCK for d in shape):
        return f"lm_head.weight {shape} is not a multiple of {FP8_BLOCK} in both dims"
    return None


def quantize_checkpoint(src: Path, dst: Path, scheme: str,
                        progress: Callable[[str, int, int], None] | None = None,
                        lm_head: bool | None = False) -> QuantizeReport:
    """Write `dst` (a new directory) holding `src` quantized with `scheme`; non-weight files
    (tokenizer, templates, generation config) are copied as they are. `lm_head`: quantize
    `lm_head.weight` as well (True: a checkpoint with tied embeddings has none: refused;
    None: where the checkpoint has one whose dims the kernels take)."""
    if scheme not in SCHEMES:
        raise QuantizeError(f"unknown scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    src, dst = Path(src), Path(dst)
    cfg_path = src / "config.json"
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise QuantizeError(f"{cfg_path}: cannot read the model config ({exc})") from None
    if "quantization_config" in config:
        raise QuantizeError(f"{cfg_path}: the checkpoint is already quantized "
                            f"({config['quantization_config'].get('quant_method')})")
    store = WeightStore(src)
    for name, info in store.tensors.items():
        if info.dtype != "BF16" and is_quantized_name(name, info.shape):
            raise QuantizeError(f"{info.file}: tensor {name!r} is {info.dtype}; "
                                "quantize takes bf16 checkpoints")
    head_refused = _lm_head_refusal(store, config)
    if lm_head and head_refused:
        raise QuantizeError(f"{src}: {head_refused}")
    lm_head = bool(lm_head) or (lm_head is None and head_refused is None)
    if dst.exists() and any(dst.iterdir()):
        raise QuantizeError(f"{dst}: destination exists and is not empty")
    dst.mkdir(parents=True, exist_ok=True)
    names = sorted(store.tensors)

    def quantized(name: str) -> bool:
        shape = store.info(name).shape
        return ((is_quantized_name(name, shape) and _kernels_take(scheme, name, shape))
                or (lm_head and name == "lm_head.weight"))

    def split(name: str) -> list[tuple[str, tuple[int, int]]] | None:
        """A fused expert tensor's quantizable per-expert parts (None: not one, or kept)."""
        parts = fused_expert_parts(name, store.info(name).shape)
        if parts and all(is_quantized_name(n, shape) for n, shape in parts):
            return parts
        return None

    kept = [n for n in names if not quantized(n) and split(n) is None]
    for name in names:
        if split(name) is not None and store.info(name).dtype != "BF16":
            raise QuantizeError(f"{store.info(name).file}: tensor {name!r} is "
                                f"{store.info(name).dtype}; quantize takes bf16 checkpoints")
    layout: list[tuple[str, str, tuple[int, ...]]] = []
    for name in names:
        info = store.info(name)
        parts = split(name)
        if name in kept:
            layout.append((name, info.dtype, info.shape))
        elif parts is not None:
            for part, shape in parts:
                layout += _quantized_layout(scheme, part, shape)
        else:
            layout += _quantized_layout(scheme, name, info.shape)

    def convert(name: str) -> list[np.ndarray]:
        if name in kept:
            return [store.read(name)]
        w = bf16_bits_to_f32(store.read(name))
        parts = split(name)
        if parts is None:
            return _quantize(scheme, w)
        return [a for part in w.reshape(len(parts), *parts[0][1]) for a in _quantize(scheme, part)]

    def arrays() -> Iterator[np.ndarray]:
        for i, (name, out) in enumerate(zip(names, ordered_map(convert, names))):
            if progress is not None:
                progress(name, i + 1, len(names))
            yield from out

    write_safetensors(dst / "model.safetensors", layout, arrays())
    qcfg, hf_quant = quantization_config(scheme, kept)
    config["quantization_config"] = qcfg
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    if hf_quant is not None:
        (dst / "hf_quant_config.json").write_text(json.dumps(hf_quant, indent=2) + "\n",
                                                  encoding="utf-8")
    copy_side_files(src, dst)
    bytes_out = (dst / "model.safetensors").stat().st_size
    quantized_count = sum(len(split(n) or [n]) for n in names if n not in kept)
    return QuantizeReport(scheme, quantized_count, len(kept),
                          sum(t.nbytes for t in store.tensors.values()), bytes_out)
