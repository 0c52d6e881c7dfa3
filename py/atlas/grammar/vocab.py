"""A tokenizer vocabulary as the byte string of every token id, decoded once.

Two encodings of token text exist in tokenizer.json files: byte-level BPE (GPT-2, Qwen,
SmolLM: each byte is shown as one printable character) and SentencePiece style (Llama,
Mistral: ``▁`` for a space, ``<0xNN>`` byte-fallback pieces). Special tokens (``<s>``,
``<|im_end|>``...) get no bytes: grammar text can never produce them; end-of-sequence ids
are allowed separately, only where the grammar may end. Built from parsed JSON, no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .errors import GrammarError

SENTENCEPIECE_SPACE = "\u2581"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def byte_level_alphabet() -> dict[str, int]:
    """The printable character GPT-2's byte-level BPE uses for each byte value: bytes
    that are printable Latin-1 stand for themselves, the rest map to U+0100 onwards."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {b: b for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = 256 + extra
            extra += 1
    return {chr(c): b for b, c in chars.items()}


_BYTE_LEVEL = byte_level_alphabet()
# str.translate table: alphabet character -> the Latin-1 character of its byte; any other
# character below U+0100 -> U+FFFF, which (like every character above U+00FF) then fails
# the Latin-1 encoding, so foreign text is refused rather than mis-decoded.
_TRANSLATE = {c: "\uffff" for c in range(256)} | {ord(c): chr(b) for c, b in _BYTE_LEVEL.items()}


def decode_byte_level(piece: str) -> bytes:
    try:
        return piece.translate(_TRANSLATE).encode("latin-1")
    except UnicodeEncodeError:
        bad = next(c for c in piece if c not in _BYTE_LEVEL)
        raise GrammarError(f"token {piece!r} is not byte-level BPE text "
                           f"(character {bad!r})") from None


def decode_sentencepiece(piece: str) -> bytes:
    match = _BYTE_PIECE.fullmatch(piece)
    if match:
        return bytes([int(match.group(1), 16)])
    return piece.replace(SENTENCEPIECE_SPACE, " ").encode("utf-8")


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """`token_bytes[i]` is token i's text as bytes, None for ids grammar text never uses
    (special tokens, padding rows past the tokenizer's size)."""
    token_bytes: tuple[bytes | None, ...]
    eos_token_ids: frozenset[int]
    fingerprint: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        bad = [i for i in self.eos_token_ids if not 0 <= i < len(self.token_bytes)]
        if bad:
            raise GrammarError(f"end-of-sequence ids {sorted(bad)} are outside the "
                               f"vocabulary of {len(self.token_bytes)}")
        if not self.fingerprint:
            digest = hashlib.sha256(json.dumps(sorted(self.eos_token_ids)).encode())
            digest.update(json.dumps([len(t) if t is not None else -1
                                      for t in self.token_bytes]).encode())
            digest.update(b"".join(t for t in self.token_bytes if t is not None))
            object.__setattr__(self, "fingerprint", digest.hexdigest())

    @property
    def size(self) -> int:
        return len(self.token_bytes)

    @staticmethod
    def from_pieces(pieces: Sequence[str | None], style: str, eos_token_ids: Iterable[int],
                    special_ids: Iterable[int] = (), vocab_size: int | None = None,
                    ) -> "Vocabulary":
        """From token texts by id; style is "byte_level", "sentencepiece" or "raw" (UTF-8)."""
        return Vocabulary(_decode_pieces(pieces, style, set(special_ids), vocab_size),
                          frozenset(eos_token_ids))

    @staticmethod
    def from_tokenizer_json(tokenizer: Mapping[str, Any] | str, eos_token_ids: Iterable[int],
                            vocab_size: int | None = None,
                            literal_special: Iterable[str] = ()) -> "Vocabulary":
        """From a Hugging Face tokenizer.json (parsed, or its text). `vocab_size` pads to
        the model's embedding rows (Qwen3: 151,936 rows for 151,669 tokens).
        `literal_special`: special tokens whose text grammars may produce (a tool-call
        marker such as Mistral's ``[TOOL_CALLS]``)."""
        data = json.loads(tokenizer) if isinstance(tokenizer, str) else tokenizer
        model = data.get("model") or {}
        vocab = model.get("vocab")
        if isinstance(vocab, list):                    # Unigram: [[piece, score], ...]
            by_id: dict[int, str] = {i: entry[0] for i, entry in enumerate(vocab)}
        elif isinstance(vocab, dict):
            by_id = {int(i): piece for piece, i in vocab.items()}
        else:
            raise GrammarError("tokenizer.json has no model.vocab")
        special: set[int] = set()
        added: dict[int, str] = {}
        keep = set(literal_special)
        for token in data.get("added_tokens") or []:
            added[int(token["id"])] = token["content"]
            if token.get("special") and token["content"] not in keep:
                special.add(int(token["id"]))
        size = max([*by_id, *added, -1]) + 1
        pieces: list[str | None] = [by_id.get(i) for i in range(size)]
        for i in added:                                 # added tokens are literal text
            pieces[i] = None
        token_bytes = list(_decode_pieces(pieces, tokenizer_style(data), special, vocab_size))
        for i, content in added.items():
            token_bytes[i] = None if i in special else content.encode("utf-8") or None
        return Vocabulary(tuple(token_bytes), frozenset(eos_token_ids))


def _decode_pieces(pieces: Sequence[str | None], style: str, special: set[int],
                   vocab_size: int | None) -> tuple[bytes | None, ...]:
    decoders = {"byte_level": decode_byte_level, "sentencepiece": decode_sentencepiece,
                "raw": lambda p: p.encode("utf-8")}
    if style not in decoders:
        raise GrammarError(f"unknown vocabulary style {style!r}; expected one of "
                           f"{sorted(decoders)}")
    decode = decoders[style]
    out: list[bytes | None] = [None] * max(vocab_size or 0, len(pieces))
    for i, piece in enumerate(pieces):
        if piece is not None and i not in special:
            out[i] = decode(piece) or None
    return tuple(out)


def _components(node: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    if not node:
        return []
    if node.get("type") == "Sequence":
        children = node.get("decoders") or node.get("pretokenizers") or []
        return [c for child in children for c in _components(child)]
    return [node]


def tokenizer_style(data: Mapping[str, Any]) -> str:
    """"byte_level" or "sentencepiece", from the decoder / pre-tokenizer components."""
    parts = _components(data.get("decoder")) + _components(data.get("pre_tokenizer"))
    types = {p.get("type") for p in parts}
    if "ByteLevel" in types:
        return "byte_level"
    if types & {"Metaspace", "ByteFallback", "Replace"} or (data.get("model") or {}).get(
            "byte_fallback"):
        return "sentencepiece"
    raise GrammarError(f"cannot tell how this tokenizer encodes bytes (decoder/pre-tokenizer "
                       f"types {sorted(t for t in types if t)})")
