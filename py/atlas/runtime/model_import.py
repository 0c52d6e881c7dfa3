"""Convert a llama-architecture GGUF into a Hugging Face-layout model directory.

The output is what any HF checkpoint looks like, so the rest of Atlas has one loading path:
`config.json`, `model.safetensors` (bf16, HF tensor names), `tokenizer.json` (for the
`tokenizers` library), `tokenizer_config.json` (chat template, special tokens) and
`generation_config.json`.

Two facts of the GGUF side matter for correctness:
* dims are stored fastest-first, so a 2-D tensor [ne1, ne0] in numpy order is HF's
  [out_features, in_features] already;
* llama.cpp's converter permutes the rows of the q and k projections so that rotary pairs
  are adjacent (GGUF rope is "interleaved", HF rope is "rotate half"); `unpermute_qk`
  restores the HF order.

Writes go to a temporary sibling directory renamed into place at the end, so a crashed or
concurrent import never leaves a directory that looks complete.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from ..core.numerics import f32_to_bf16_bits
from .gguf import GGUFError, GGUFFile
from .weights import write_safetensors

#: GGUF token types (llama.cpp's llama_token_type)
TOKEN_CONTROL = 3
TOKEN_USER_DEFINED = 4

_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
               "use_regex": True}
_BYTE_LEVEL_NO_REGEX = dict(_BYTE_LEVEL, use_regex=False)
_LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _split(regex: str) -> dict[str, Any]:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated",
            "invert": False}


#: `tokenizer.ggml.pre` -> the Hugging Face pre-tokenizer that splits text the same way.
#: StarCoder-family vocabularies (SmolLM2 among them) isolate every digit, then apply the
#: GPT-2 regex: llama.cpp's pair of regexes "\p{N}" + GPT-2, HF's Digits + ByteLevel.
#: Checked against llama.cpp's tokenizer goldens (models/ggml-vocab-*.gguf.inp/.out).
PRE_TOKENIZERS: dict[str, dict[str, Any]] = {
    **{name: {"type": "Sequence",
              "pretokenizers": [{"type": "Digits", "individual_digits": True}, _BYTE_LEVEL]}
       for name in ("smollm", "starcoder", "refact", "codeshell", "command-r")},
    **{name: _BYTE_LEVEL for name in ("gpt2", "gpt-2", "default", "mpt", "olmo")},
    "llama-bpe": {"type": "Sequence",
                  "pretokenizers": [_split(_LLAMA3_REGEX), _BYTE_LEVEL_NO_REGEX]},
    "qwen2": {"type": "Sequence",
              "pretokenizers": [_split(_LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")),
                                _BYTE_LEVEL_NO_REGEX]},
}
#: vocabularies whose BPE takes a whole pre-token that is in the vocabulary as one token,
#: before trying merges (Llama 3's tokenizer.json sets `ignore_merges`)
IGNORE_MERGES = frozenset({"llama-bpe"})


_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
}
_GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight",
                 "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.weight")

ProgressFn = Callable[[int, int], None]
"""(tensors converted, tensors total)"""


class UnsupportedGGUFError(GGUFError):
    """The GGUF holds something the importer cannot convert faithfully."""


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's q/k row permutation: [n_head*head_dim, hidden] back to HF order.

    llama.cpp stored, per head, rows (0, h/2, 1, h/2+1, ...): the two halves of HF's
    rotate-half layout interleaved. Reading the rows as (head, pair, 2) and swapping the
    last two axes gives back (head, 2, pair), i.e. the two halves.
    """
    rows, cols = w.shape
    half = rows // n_head // 2
    return w.reshape(n_head, half, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def hf_name(gguf_name: str) -> str:
    """The Hugging Face name of a llama GGUF tensor; unknown names are an error."""
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    m = _BLOCK.fullmatch(gguf_name)
    if m and m.group(2) in _LAYER_NAMES:
        return f"model.layers.{m.group(1)}.{_LAYER_NAMES[m.group(2)]}.weight"
    raise UnsupportedGGUFError(f"tensor {gguf_name!r} has no Hugging Face llama equivalent")


def _f32_repr(x: float) -> float:
    """The shortest decimal that round-trips a float32 (1e-05, not 9.99999974e-06)."""
    return float(str(np.float32(x)))


def hf_config(g: GGUFFile) -> dict[str, Any]:
    """config.json for a llama GGUF, from the `llama.*` metadata."""
    arch = g.require("general.architecture")
    if arch != "llama":
        raise UnsupportedGGUFError(f"{g.path}: architecture {arch!r} is not supported "
                                   f"(only llama)")
    hidden = int(g.require("llama.embedding_length"))
    heads = int(g.require("llama.attention.head_count"))
    kv_heads = int(g.get("llama.attention.head_count_kv", heads))
    head_dim = int(g.get("llama.attention.key_length", hidden // heads))
    rope_dim = int(g.get("llama.rope.dimension_count", head_dim))
    if rope_dim != head_dim:
        raise UnsupportedGGUFError(f"{g.path}: partial rotary (rope dim {rope_dim} < head_dim "
                                   f"{head_dim}) is not supported")
    scaling = g.get("llama.rope.scaling.type", "none")
    if scaling != "none" or "rope_freqs.weight" in g.tensors:
        raise UnsupportedGGUFError(f"{g.path}: rope scaling is not supported by the importer")
    embed = g.tensors.get("token_embd.weight")
    if embed is None:
        raise UnsupportedGGUFError(f"{g.path}: no token_embd.weight tensor")
    vocab = int(g.get("llama.vocab_size", embed.shape[0]))
    if embed.shape != (vocab, hidden):
        raise UnsupportedGGUFError(f"{g.path}: token_embd.weight is {list(embed.shape)}, but "
                                   f"vocab_size={vocab} and embedding_length={hidden}")
    eos = int(g.require("tokenizer.ggml.eos_token_id"))
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(g.require("llama.feed_forward_length")),
        "num_hidden_layers": int(g.require("llama.block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "vocab_size": vocab,
        "max_position_embeddings": int(g.require("llama.context_length")),
        "rms_norm_eps": _f32_repr(g.require("llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": _f32_repr(g.get("llama.rope.freq_base", 10000.0)),
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": "output.weight" not in g.tensors,
        "bos_token_id": int(g.require("tokenizer.ggml.bos_token_id")),
        "eos_token_id": eos,
        "pad_token_id": int(g.get("tokenizer.ggml.padding_token_id", eos)),
        "torch_dtype": "bfloat16",
    }


def hf_tokenizer(g: GGUFFile) -> dict[str, Any]:
    """tokenizer.json (HF `tokenizers` format) for a GGUF byte-level BPE vocabulary."""
    model = g.require("tokenizer.ggml.model")
    if model != "gpt2":
        raise UnsupportedGGUFError(f"{g.path}: tokenizer model {model!r} is not supported "
                                   f"(only byte-level BPE, 'gpt2')")
    pre = g.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise UnsupportedGGUFError(f"{g.path}: pre-tokenizer {pre!r} is not supported "
                                   f"(known: {', '.join(sorted(PRE_TOKENIZERS))})")
    tokens = g.require("tokenizer.ggml.tokens")
    types = g.get("tokenizer.ggml.token_type", [1] * len(tokens))
    merges = g.require("tokenizer.ggml.merges")
    if len(types) != len(tokens):
        raise UnsupportedGGUFError(f"{g.path}: {len(tokens)} tokens but {len(types)} "
                                   f"token types")
    vocab = {tok: i for i, tok in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise UnsupportedGGUFError(f"{g.path}: the vocabulary has duplicate tokens")
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": t == TOKEN_CONTROL}
             for i, t in enumerate(types) if t in (TOKEN_CONTROL, TOKEN_USER_DEFINED)]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": PRE_TOKENIZERS[pre],
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False,
                           "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": pre in IGNORE_MERGES,
                  "vocab": vocab, "merges": merges},
    }


def hf_tokenizer_config(g: GGUFFile, tokenizer: dict[str, Any]) -> dict[str, Any]:
    """tokenizer_config.json: special-token strings, BOS policy and the chat template."""
    tokens = g.require("tokenizer.ggml.tokens")

    def token(key: str) -> str | None:
        i = g.get(key)
        return tokens[int(i)] if i is not None and 0 <= int(i) < len(tokens) else None

    cfg: dict[str, Any] = {
        "add_bos_token": bool(g.get("tokenizer.ggml.add_bos_token", False)),
        "add_eos_token": bool(g.get("tokenizer.ggml.add_eos_token", False)),
        "bos_token": token("tokenizer.ggml.bos_token_id"),
        "eos_token": token("tokenizer.ggml.eos_token_id"),
        "pad_token": token("tokenizer.ggml.padding_token_id"),
        "unk_token": token("tokenizer.ggml.unknown_token_id"),
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(g.get("llama.context_length", 2048)),
        "tokenizer_class": "GPT2Tokenizer",
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"}
                                 for t in tokenizer["added_tokens"]},
    }
    template = g.get("tokenizer.chat_template")
    if template is not None:
        cfg["chat_template"] = template
    return cfg


def _tensor_plan(g: GGUFFile, config: dict[str, Any]) -> list[tuple[str, str]]:
    """(gguf name, hf name) in HF order: embeddings, layers in order, final norm, head."""
    pairs = [(name, hf_name(name)) for name in g.tensors]

    def order(pair: tuple[str, str]) -> tuple[int, int, str]:
        m = re.match(r"model\.layers\.(\d+)\.", pair[1])
        if m:
            return (1, int(m.group(1)), pair[1])
        return ({"model.embed_tokens.weight": 0, "model.norm.weight": 2}.get(pair[1], 3), 0,
                pair[1])

    pairs.sort(key=order)
    want_layers = config["num_hidden_layers"]
    got = {int(m.group(1)) for _, h in pairs if (m := re.match(r"model\.layers\.(\d+)\.", h))}
    if got != set(range(want_layers)):
        raise UnsupportedGGUFError(f"{g.path}: block_count={want_layers} but tensors cover "
                                   f"layers {sorted(got)}")
    return pairs


def _converted(g: GGUFFile, pairs: list[tuple[str, str]], config: dict[str, Any],
               progress: ProgressFn | None) -> Iterator[np.ndarray]:
    """Each tensor as bf16 bits in HF layout, one at a time (bounded memory)."""
    for i, (src, dst) in enumerate(pairs):
        w = g.dequantize(src)
        if dst.endswith("q_proj.weight"):
            w = unpermute_qk(w, config["num_attention_heads"])
        elif dst.endswith("k_proj.weight"):
            w = unpermute_qk(w, config["num_key_value_heads"])
        yield f32_to_bf16_bits(w)
        if progress is not None:
            progress(i + 1, len(pairs))


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def import_gguf(gguf_path: str | Path, out_dir: str | Path, force: bool = False,
                progress: ProgressFn | None = None) -> Path:
    """Convert `gguf_path` into the model directory `out_dir`; returns `out_dir`.

    An existing `out_dir` is an error unless `force`, which replaces it only once the new
    one is complete.
    """
    out = Path(out_dir)
    if out.exists() and not force:
        raise FileExistsError(f"{out} already exists (use --force to replace it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the model dir is an ordinary directory
    try:
        with GGUFFile(gguf_path) as g:
            config = hf_config(g)
            tokenizer = hf_tokenizer(g)
            pairs = _tensor_plan(g, config)
            layout = [(dst, "BF16", g.tensors[src].shape) for src, dst in pairs]
            write_safetensors(tmp / "model.safetensors", layout,
                              _converted(g, pairs, config, progress),
                              metadata={"format": "pt", "source": Path(gguf_path).name})
            _write_json(tmp / "config.json", config)
            _write_json(tmp / "tokenizer.json", tokenizer)
            _write_json(tmp / "tokenizer_config.json", hf_tokenizer_config(g, tokenizer))
            _write_json(tmp / "generation_config.json",
                        {"bos_token_id": config["bos_token_id"],
                         "eos_token_id": config["eos_token_id"],
                         "pad_token_id": config["pad_token_id"]})
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _replace_dir(new: Path, out: Path) -> None:
    """Move the finished `new` to `out`, atomically when `out` does not exist yet."""
    if not out.exists():
        os.rename(new, out)
        return
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    os.rename(out, old)
    os.rename(new, out)
    shutil.rmtree(old, ignore_errors=True)
