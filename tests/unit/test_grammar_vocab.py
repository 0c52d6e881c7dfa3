"""Token ids -> bytes for byte-level BPE (real SmolLM2 and Qwen3 tokenizers) and
SentencePiece-style vocabularies, checked against the `tokenizers` library's own decoding."""

from __future__ import annotations

import json
import random

import pytest
from tokenizers import Tokenizer, decoders, models

from atlas.grammar import GrammarCompiler, GrammarError, GrammarMatcher, Vocabulary
from atlas.grammar.vocab import tokenizer_style
from atlas.runtime.model_paths import ensure_default_model
from atlas.runtime.tokenizer_assets import QWEN3_VOCAB_ROWS, qwen3_tokenizer_json
from tests.unit.grammar_support import accepts, qwen3_compiler, smollm2_compiler


def _agrees_with_tokenizers(tokenizer: Tokenizer, vocab: Vocabulary, sample: int) -> int:
    """Each sampled token's bytes decode to what `tokenizers` decodes the id to, whenever
    the bytes are complete UTF-8 (partial characters decode to U+FFFD there)."""
    checked = 0
    ids = [i for i, b in enumerate(vocab.token_bytes) if b is not None]
    for token_id in random.Random(0).sample(ids, sample):
        data = vocab.token_bytes[token_id]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        assert tokenizer.decode([token_id], skip_special_tokens=False) == text, token_id
        checked += 1
    return checked


def test_smollm2_byte_level_tokens_match_the_tokenizers_library() -> None:
    tokenizer = Tokenizer.from_file(str(ensure_default_model() / "tokenizer.json"))
    vocab = smollm2_compiler().vocab
    assert vocab.size == tokenizer.get_vocab_size() == 49152
    assert _agrees_with_tokenizers(tokenizer, vocab, 3000) > 2500


def test_qwen3_vocabulary_is_padded_and_special_tokens_have_no_bytes() -> None:
    path = qwen3_tokenizer_json()
    tokenizer = Tokenizer.from_file(str(path))
    vocab = qwen3_compiler().vocab
    assert vocab.size == QWEN3_VOCAB_ROWS
    assert _agrees_with_tokenizers(tokenizer, vocab, 3000) > 2500
    im_end = tokenizer.token_to_id("<|im_end|>")
    assert vocab.token_bytes[im_end] is None and im_end in vocab.eos_token_ids
    think = tokenizer.token_to_id("<think>")            # added, not special: literal text
    assert vocab.token_bytes[think] == b"<think>"
    assert all(b is None for b in vocab.token_bytes[tokenizer.get_vocab_size():])
    assert vocab.token_bytes[tokenizer.token_to_id("Ġhello")] == b" hello"


def _sentencepiece_tokenizer() -> Tokenizer:
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + [
        "\u2581", "\u2581hello", "\u2581world", "{", "\"", "\u2581{\"", "é", "\u2581\u2581"]
    model = models.BPE(vocab={p: i for i, p in enumerate(pieces)}, merges=[],
                       unk_token="<unk>", byte_fallback=True)
    tokenizer = Tokenizer(model)
    tokenizer.decoder = decoders.Sequence([decoders.Replace("\u2581", " "),
                                           decoders.ByteFallback(), decoders.Fuse()])
    tokenizer.add_special_tokens(["<s>", "</s>"])
    return tokenizer


def test_sentencepiece_style_pieces_and_byte_fallback() -> None:
    tokenizer = _sentencepiece_tokenizer()
    data = json.loads(tokenizer.to_str())
    assert tokenizer_style(data) == "sentencepiece"
    eos = tokenizer.token_to_id("</s>")
    vocab = Vocabulary.from_tokenizer_json(data, [eos])
    assert vocab.token_bytes[tokenizer.token_to_id("<0x0A>")] == b"\n"
    assert vocab.token_bytes[tokenizer.token_to_id("\u2581{\"")] == b' {"'
    assert vocab.token_bytes[eos] is None and vocab.token_bytes[1] is None
    marked = Vocabulary.from_tokenizer_json(data, [eos], literal_special=["<s>"])
    assert marked.token_bytes[1] == b"<s>" and marked.token_bytes[eos] is None
    for token_id, data_bytes in enumerate(vocab.token_bytes):
        if data_bytes is not None and token_id >= 3 + 256:
            assert tokenizer.decode([token_id]) == data_bytes.decode("utf-8")
    grammar = GrammarCompiler(vocab).compile_json_schema(
        {"type": "object", "properties": {"k": {"enum": ["é", "\n"]}}, "required": ["k"]})
    matcher = GrammarMatcher(grammar)
    for piece in ("{", "\"", "<0x6B>", "\"", "<0x3A>", "\"", "é", "\"", "<0x7D>"):
        assert matcher.accept_token(tokenizer.token_to_id(piece)), piece
    assert matcher.accept_token(eos) and matcher.is_terminated()
    assert accepts(grammar, '{"k":"é"}')


def test_from_pieces_styles_and_padding() -> None:
    vocab = Vocabulary.from_pieces(["a", "\u0120b", None, "<s>"], "byte_level", [3],
                                   special_ids=[3], vocab_size=6)
    assert vocab.token_bytes == (b"a", b" b", None, None, None, None)
    raw = Vocabulary.from_pieces(["x", "é"], "raw", [])
    assert raw.token_bytes == (b"x", "é".encode())
    with pytest.raises(GrammarError, match="unknown vocabulary style"):
        Vocabulary.from_pieces(["a"], "wordpiece", [])
    with pytest.raises(GrammarError, match="not byte-level BPE text"):
        Vocabulary.from_pieces(["\u2581a"], "byte_level", [])
    with pytest.raises(GrammarError, match="outside the vocabulary"):
        Vocabulary((b"a",), frozenset({5}))


def test_fingerprint_tells_vocabularies_apart() -> None:
    a = Vocabulary((b"a", b"b"), frozenset({1}))
    assert a.fingerprint == Vocabulary((b"a", b"b"), frozenset({1})).fingerprint
    assert a.fingerprint != Vocabulary((b"a", b"c"), frozenset({1})).fingerprint
    assert a.fingerprint != Vocabulary((b"a", b"b"), frozenset({0})).fingerprint
    assert a.fingerprint != Vocabulary((b"ab", None), frozenset({1})).fingerprint


def test_unknown_tokenizer_kinds_are_refused() -> None:
    with pytest.raises(GrammarError, match="cannot tell how this tokenizer encodes bytes"):
        tokenizer_style({"model": {"type": "WordPiece"}, "decoder": {"type": "WordPiece"}})
