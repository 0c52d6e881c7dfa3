"""Incremental detokenization never emits half of a multi-byte character, and the pieces
always concatenate to the tokenizer's own decoding of the whole sequence."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from atlas.server.detokenize import IncrementalDetokenizer
from atlas.server.stop_strings import StopStringMatcher
from tests.server.fakes import build_tiny_tokenizer


@pytest.fixture(scope="module")
def byte_tokenizer():
    """Pure byte-level vocabulary: every UTF-8 byte is its own token."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(alphabet))}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


TEXTS = ["héllo wörld", "日本語のテキスト", "emoji 🙂🚀 mixed ascii", "a", "x 👩‍👩‍👧 y"]


@pytest.mark.parametrize("text", TEXTS)
def test_byte_tokens_never_split_a_character(byte_tokenizer, text):
    ids = byte_tokenizer.encode(text).ids
    assert len(ids) == len(text.encode())
    detok = IncrementalDetokenizer(lambda t: byte_tokenizer.decode(t))
    pieces = [detok.feed([i]) for i in ids]
    pieces.append(detok.flush())
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_bpe_pieces_concatenate_to_full_decode(chunk):
    tok = build_tiny_tokenizer()
    text = "Hello! The weather in Paris is 15 °C — très nuageux 🙂."
    ids = tok.encode(text).ids
    detok = IncrementalDetokenizer(lambda t: tok.decode(t), context_ids=tok.encode("Hi").ids)
    out = "".join(detok.feed(ids[i:i + chunk]) for i in range(0, len(ids), chunk))
    assert out + detok.flush() == tok.decode(ids) == text


def test_truncated_character_is_flushed_as_replacement(byte_tokenizer):
    ids = byte_tokenizer.encode("ok é").ids[:-1]   # drop the last byte of é
    detok = IncrementalDetokenizer(lambda t: byte_tokenizer.decode(t))
    assert "".join(detok.feed([i]) for i in ids) == "ok "
    assert detok.flush() == "\ufffd"


@pytest.mark.parametrize("step", [1, 2, 4, 100])
def test_stop_strings_hold_back_partial_matches(step):
    text = "The answer: 42\n###\nignored"
    m = StopStringMatcher(["###", "STOP"])
    out = "".join(m.feed(text[i:i + step]) for i in range(0, len(text), step))
    assert out + m.flush() == "The answer: 42\n" and m.matched == "###"


def test_stop_string_prefix_at_the_end_is_released():
    m = StopStringMatcher(["STOP"])
    assert m.feed("go ST") == "go "
    assert m.flush() == "ST" and m.matched is None
