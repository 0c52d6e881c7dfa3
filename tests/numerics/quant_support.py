"""Checkpoint rewriting for the quantized-model tests: other producers' spellings and
malformed variants made from `quantize_checkpoint`'s output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import numpy as np

from atlas.runtime.weights import WeightStore, write_safetensors

Edit = Callable[[str, str, tuple[int, ...], np.ndarray],
                "tuple[str | None, str, tuple[int, ...], np.ndarray] | None"]


def rewrite_checkpoint(src: Path, dst: Path, edit: Edit) -> None:
    """Copy a checkpoint, passing every tensor through `edit`: None drops it, else (new last
    name component or None to keep it, dtype, shape, data)."""
    shutil.copytree(src, dst)
    store = WeightStore(src)
    layout, arrays = [], []
    for name in sorted(store.tensors):
        info = store.info(name)
        out = edit(name, info.dtype, info.shape, store.read(name))
        if out is not None:
            rename, dtype, shape, data = out
            new = name if rename is None else name.rsplit(".", 1)[0] + "." + rename
            layout.append((new, dtype, shape))
            arrays.append(data)
    write_safetensors(dst / "model.safetensors", layout, arrays)


def load_without(src: Path, dst: Path, name: str) -> None:
    """Load (host backend) a copy of `src` missing tensor `name`: raises what the loader
    says about it."""
    from atlas.model.load import load_runner

    rewrite_checkpoint(src, dst, lambda n, d, s, a: None if n == name else (None, d, s, a))
    load_runner(dst, backend="host", use_graphs=False)


def narrow_shared_expert(src: Path, dst: Path) -> None:
    """tiny-qwen3_5_moe with its shared expert cut to the routed experts' width (32 of 48
    columns), so the loader folds it into the quantized experts as one more expert."""
    def edit(n: str, d: str, s: tuple[int, ...], a: np.ndarray):
        if ".shared_expert." in n and n.endswith(("gate_proj.weight", "up_proj.weight")):
            return (None, d, (32, s[1]), np.ascontiguousarray(a[:32]))
        if ".shared_expert." in n and n.endswith("down_proj.weight"):
            return (None, d, (s[0], 32), np.ascontiguousarray(a[:, :32]))
        return (None, d, s, a)
    rewrite_checkpoint(src, dst, edit)
    config = json.loads((dst / "config.json").read_text())
    config["shared_expert_intermediate_size"] = 32
    (dst / "config.json").write_text(json.dumps(config))


def widen_shared_expert(src: Path, dst: Path) -> None:
    """tiny-glm4-moe with n_shared_experts = 2: its shared expert twice an expert's width
    (each projection's intermediate rows / columns repeated), so the quantized block runs it
    as a dense MLP of linears beside the experts, not folded in."""
    def edit(n: str, d: str, s: tuple[int, ...], a: np.ndarray):
        if ".shared_experts." not in n or not n.endswith(".weight"):
            return (None, d, s, a)
        axis = 1 if n.endswith("down_proj.weight") else 0
        wide = np.concatenate([a, a], axis=axis)
        return (None, d, wide.shape, wide)
    rewrite_checkpoint(src, dst, edit)
    config = json.loads((dst / "config.json").read_text())
    config["n_shared_experts"] = 2
    (dst / "config.json").write_text(json.dumps(config))


def modelopt_to_compressed_tensors_nvfp4(src: Path, dst: Path) -> None:
    """llm-compressor's NVFP4 spelling of a ModelOpt NVFP4 checkpoint: `weight_packed`,
    `weight_global_scale` (the reciprocal: it divides), `format: nvfp4-pack-quantized`."""
    def edit(n: str, d: str, s: tuple[int, ...], a: np.ndarray):
        if n.endswith(".input_scale"):
            return None
        if n.endswith(".weight_scale_2"):
            return ("weight_global_scale", d, (1,), (1.0 / a).astype(np.float32).reshape(1))
        if d == "U8" and n.endswith(".weight"):
            return ("weight_packed", d, s, a)
        return (None, d, s, a)
    rewrite_checkpoint(src, dst, edit)
    (dst / "hf_quant_config.json").unlink()
    config = json.loads((dst / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
        "ignore": ["lm_head"], "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}}}
    (dst / "config.json").write_text(json.dumps(config))
