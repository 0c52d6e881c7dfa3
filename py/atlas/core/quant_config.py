"""Which weight quantization a checkpoint uses, read from its `quantization_config`
(config.json) or ModelOpt's `hf_quant_config.json`, in the spellings the common producers
write, and one clear error for everything else.

* `quant_method: "fp8"` + `weight_block_size` (the official Qwen3 / DeepSeek FP8 releases):
  E4M3 codes, float32 `weight_scale_inv` per [128, 128] block;
* `quant_method: "modelopt"` (or hf_quant_config.json) `quant_algo: "FP8"`: one float32
  `weight_scale` per tensor; `"NVFP4"`: packed E2M1 + E4M3 group scales + `weight_scale_2`;
* `quant_method: "compressed-tensors"` (llm-compressor): float 8-bit weights with strategy
  `tensor`, `channel` or `block`, all scales named `weight_scale`; `nvfp4-pack-quantized`
  (`weight_packed`, `weight_scale`, `weight_global_scale` — the reciprocal of ModelOpt's).
* `quant_method: "mxfp4"` (OpenAI's gpt-oss release): the routed experts only, as
  `*_blocks` (E2M1 pairs) and `*_scales` (E8M0, one per 32 values), decoded to bf16 at load
  (`mxfp4_experts`; every other tensor is bf16 and the linears run as such).

Scales always multiply: w = code * scale. Activation (`input_scale`) schemes do not matter
here: Atlas keeps activations in bf16 and dequantizes weights, which is more precise than
the static activation quantization those scales were calibrated for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping


class QuantConfigError(ValueError):
    """The checkpoint's quantization is malformed or a variant Atlas does not run."""


#: weight formats: bf16 (not quantized), FP8 E4M3 with block / per-channel / per-tensor
#: scales, NVFP4 (E2M1 x E4M3 per 16 x float32 global)
FORMATS = ("bf16", "fp8-block", "fp8-channel", "fp8-tensor", "nvfp4")


@dataclass(frozen=True, slots=True)
class CheckpointQuant:
    """How a checkpoint's quantized linear weights are stored.

    `scale_name` is the suffix that replaces `weight` for the scale tensor; for NVFP4,
    `codes_name` is the packed-codes suffix and `global_name` the per-tensor scale's, which
    divides instead of multiplying when `global_reciprocal` (compressed-tensors).
    """

    format: str = "bf16"
    scale_name: str = ""
    block: tuple[int, int] = (0, 0)
    codes_name: str = "weight"
    global_name: str = ""
    global_reciprocal: bool = False
    source: str = ""
    #: modules the producer says it left unquantized (ModelOpt `exclude_modules`, the FP8-block
    #: config's `modules_to_not_convert`); only quantized synthetic weights read it (the
    #: loader goes by the stored dtypes)
    excluded: tuple[str, ...] = ()
    #: the routed experts are stored MXFP4 (`quant_method: "mxfp4"`, gpt-oss), decoded to bf16
    #: by the loader of a family that reads them (loaders/moe.py GptOssLoader); `format` stays
    #: bf16: no linear is quantized
    mxfp4_experts: bool = False

    @property
    def quantized(self) -> bool:
        return self.format != "bf16"

    @property
    def fp8_layout(self) -> str:
        """'block', 'channel' or 'tensor' for FP8 formats."""
        return self.format.removeprefix("fp8-")

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> "CheckpointQuant":
        """Read config.json's `quantization_config` and, where present, hf_quant_config.json."""
        model_dir = Path(model_dir)
        cfg_file = model_dir / "config.json"
        config = _read_json(cfg_file) if cfg_file.is_file() else {}
        hf_file = model_dir / "hf_quant_config.json"
        hf_quant = _read_json(hf_file) if hf_file.is_file() else None
        return parse_quant_config(config.get("quantization_config"), hf_quant,
                                  source=str(model_dir))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise QuantConfigError(f"{path}: cannot read ({exc})") from None
    if not isinstance(data, dict):
        raise QuantConfigError(f"{path}: top level must be a JSON object")
    return data


#: `fmt` values naming FP8 E4M3 (DeepSeek-V3 and Qwen3 write "e4m3", MiniMax-M2 torch's dtype
#: name)
FP8_E4M3_SPELLINGS = ("e4m3", "float8_e4m3fn")


def parse_quant_config(qcfg: Any, hf_quant: Mapping[str, Any] | None = None,
                       source: str = "<config>") -> CheckpointQuant:
    """The CheckpointQuant a (quantization_config, hf_quant_config.json) pair describes."""
    if qcfg is None and hf_quant is None:
        return CheckpointQuant(source=source)
    if qcfg is None:
        body = hf_quant.get("quantization") if isinstance(hf_quant, Mapping) else None
        if not isinstance(body, Mapping):
            raise QuantConfigError(f"{source}: hf_quant_config.json has no 'quantization' "
                                   "object")
        return _modelopt(body, f"{source}: hf_quant_config.json")
    if not isinstance(qcfg, Mapping):
        raise QuantConfigError(f"{source}: quantization_config must be an object")
    method = qcfg.get("quant_method")
    where = f"{source}: quantization_config"
    if method == "fp8":
        return _hf_fp8(qcfg, where)
    if method == "modelopt":
        parsed = _modelopt(qcfg, where)
        if isinstance(hf_quant, Mapping) and isinstance(hf_quant.get("quantization"), Mapping):
            other = _modelopt(hf_quant["quantization"], f"{source}: hf_quant_config.json")
            if other.format != parsed.format:
                raise QuantConfigError(f"{source}: config.json says {parsed.format} but "
                                       f"hf_quant_config.json says {other.format}")
        return parsed
    if method == "compressed-tensors":
        return _compressed_tensors(qcfg, where)
    if method == "mxfp4":
        return CheckpointQuant(source=where, mxfp4_experts=True)
    raise QuantConfigError(f"{where}: quant_method {method!r} is not supported (supported: "
                           "'fp8', 'modelopt', 'compressed-tensors', 'mxfp4')")


def _hf_fp8(q: Mapping[str, Any], where: str) -> CheckpointQuant:
    if q.get("fmt", "e4m3") not in FP8_E4M3_SPELLINGS:
        raise QuantConfigError(f"{where}: fmt {q.get('fmt')!r} is not supported (only e4m3)")
    block = q.get("weight_block_size")
    if block is None:
        raise QuantConfigError(f"{where}: quant_method 'fp8' without weight_block_size is "
                               "not supported (per-tensor FP8: use the ModelOpt spelling)")
    # transformers' FineGrainedFP8Config: without modules_to_not_convert the LM head stays
    # bf16 (as the published FP8 releases store it); `atlas models quantize` lists what it kept
    kept = q.get("modules_to_not_convert")
    excluded = tuple(kept) if isinstance(kept, list) else ("lm_head",)
    return CheckpointQuant("fp8-block", "weight_scale_inv", _block(block, where),
                           source=where, excluded=excluded)


def _block(block: Any, where: str) -> tuple[int, int]:
    if not (isinstance(block, list) and len(block) == 2
            and all(isinstance(b, int) and not isinstance(b, bool) for b in block)):
        raise QuantConfigError(f"{where}: block size must be [rows, cols], got {block!r}")
    for b in block:
        if b < 16 or b & (b - 1):
            raise QuantConfigError(f"{where}: block size {block} must be powers of two >= 16")
    return (block[0], block[1])


def _modelopt(q: Mapping[str, Any], where: str) -> CheckpointQuant:
    algo = q.get("quant_algo")
    excluded = q.get("exclude_modules") or ()
    excluded = tuple(excluded) if isinstance(excluded, list) else ()
    if algo == "FP8":
        return CheckpointQuant("fp8-tensor", "weight_scale", source=where, excluded=excluded)
    if algo == "NVFP4":
        group = q.get("group_size", 16)
        if group != 16:
            raise QuantConfigError(f"{where}: NVFP4 group_size {group!r} is not supported "
                                   "(only 16)")
        return CheckpointQuant("nvfp4", "weight_scale", global_name="weight_scale_2",
                               source=where, excluded=excluded)
    raise QuantConfigError(f"{where}: unknown quant_algo {algo!r} (supported: 'FP8', "
                           "'NVFP4')")


def _compressed_tensors(q: Mapping[str, Any], where: str) -> CheckpointQuant:
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise QuantConfigError(f"{where}: compressed-tensors needs config_groups")
    parsed = {replace(_ct_group(g, f"{where}.config_groups.{name}", q.get("format")),
                      source=where) for name, g in groups.items()}
    if len(parsed) != 1:
        raise QuantConfigError(f"{where}: config_groups mix weight formats "
                               f"({', '.join(sorted(p.format for p in parsed))}); one per "
                               "checkpoint is supported")
    return parsed.pop()


def _ct_group(g: Any, where: str, fmt: Any) -> CheckpointQuant:
    w = g.get("weights") if isinstance(g, Mapping) else None
    if not isinstance(w, Mapping):
        raise QuantConfigError(f"{where}: no 'weights' scheme")
    bits, kind, strategy = w.get("num_bits"), w.get("type"), w.get("strategy")
    if kind != "float":
        raise QuantConfigError(f"{where}: weights type {kind!r} is not supported (float only)")
    if bits == 8:
        if strategy in ("tensor", "channel"):
            return CheckpointQuant(f"fp8-{strategy}", "weight_scale", source=where)
        if strategy == "block":
            return CheckpointQuant("fp8-block", "weight_scale",
                                   _block(w.get("block_structure"), where), source=where)
        raise QuantConfigError(f"{where}: FP8 strategy {strategy!r} is not supported "
                               "(tensor, channel, block)")
    if bits == 4 and strategy == "tensor_group" and w.get("group_size") == 16:
        if fmt != "nvfp4-pack-quantized":
            raise QuantConfigError(f"{where}: 4-bit float weights need format "
                                   f"'nvfp4-pack-quantized', got {fmt!r}")
        return CheckpointQuant("nvfp4", "weight_scale", codes_name="weight_packed",
                               global_name="weight_global_scale", global_reciprocal=True,
                               source=where)
    raise QuantConfigError(f"{where}: {bits}-bit float weights with strategy {strategy!r} "
                           "are not supported (FP8 tensor/channel/block, NVFP4 group 16)")
