"""The model's tokenizer: HF `tokenizers` for text <-> ids, its special tokens and EOS ids
from tokenizer_config.json / generation_config.json, and its chat template.

Built from the files' contents (read by app_assets), so this module does no I/O.
"""

from __future__ import annotations

import json
from functools import cached_property, partial
from typing import Any, Callable, Iterable, Mapping, Sequence

from tokenizers import Tokenizer

from ..grammar.errors import GrammarError
from ..grammar.vocab import decode_byte_level, decode_sentencepiece, tokenizer_style
from .chat_template import ChatTemplate, pick_template
from .special_tokens import ProtectedContent


def _token_text(value: Any) -> str | None:
    """A special token from tokenizer_config: a string or an AddedToken dict."""
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


class TextTokenizer:
    def __init__(self, tokenizer_json: str, tokenizer_config: Mapping[str, Any] | None = None,
                 generation_config: Mapping[str, Any] | None = None,
                 chat_template_override: str | None = None) -> None:
        self._tok = Tokenizer.from_str(tokenizer_json)
        #: the text itself, for the grammar compiler's vocabulary (structured output)
        self.tokenizer_json = tokenizer_json
        config = dict(tokenizer_config or {})
        self.bos_token = _token_text(config.get("bos_token")) or ""
        self.eos_token = _token_text(config.get("eos_token")) or ""
        self._template_source = config.get("chat_template")
        self._override = chat_template_override
        self._templates: dict[bool, ChatTemplate | None] = {}
        self.eos_token_ids = frozenset(self._eos_ids(generation_config or {}))
        self._piece_bytes: Callable[[str], bytes] | None = None   # built on first use
        self._added_ids: frozenset[int] = frozenset()

    def _eos_ids(self, generation_config: Mapping[str, Any]) -> set[int]:
        ids: set[int] = set()
        eos = generation_config.get("eos_token_id")
        if isinstance(eos, int):
            ids.add(eos)
        elif isinstance(eos, list):
            ids.update(i for i in eos if isinstance(i, int))
        if self.eos_token and (tid := self.token_id(self.eos_token)) is not None:
            ids.add(tid)
        return ids

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def token_id(self, text: str) -> int | None:
        return self._tok.token_to_id(text)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    @property
    def special_tokens(self) -> list[str]:
        """The strings of the tokens marked special (control tokens such as <|im_end|>)."""
        return [t.content for t in self._tok.get_added_tokens_decoder().values() if t.special]

    def protect(self, messages: Sequence[Mapping[str, Any]], escape: bool = True
                ) -> ProtectedContent:
        """`messages` with special-token strings in user/system/tool text escaped (as
        they are, when `escape` is off)."""
        return ProtectedContent(self.special_tokens if escape else [], messages)

    def encode_rendered(self, text: str, protected: ProtectedContent) -> list[int]:
        """A prompt rendered from `protected.messages`: the template's own special tokens
        are control tokens, the escaped strings from message text are plain text.
        Without escaped strings this is exactly `encode(text)`."""
        ids: list[int] = []
        for segment, plain in protected.segments(text):
            if not plain:
                ids += self.encode(segment)
                continue
            self._tok.encode_special_tokens = True
            try:
                ids += self.encode(segment)
            finally:
                self._tok.encode_special_tokens = False
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def decoder(self, skip_special_tokens: bool = True,
                keep: Iterable[str] = ()) -> Callable[[Sequence[int]], str]:
        """The decode of a response's text: special tokens' text left out, except the `keep`
        ones (markers a stream stage reads, e.g. harmony's `<|channel|>`), or every one kept
        when `skip_special_tokens` is off. Nothing to keep: exactly `decode`."""
        if not skip_special_tokens:
            return partial(self.decode, skip_special_tokens=False)
        kept = {tid for text in keep if (tid := self.token_id(text)) is not None}
        if not kept & self.special_ids:
            return self.decode
        dropped = self.special_ids - kept

        def decode_keeping(ids: Sequence[int]) -> str:
            return self._tok.decode([t for t in ids if t not in dropped],
                                    skip_special_tokens=False)
        return decode_keeping

    @cached_property
    def special_ids(self) -> frozenset[int]:
        """The ids of the tokens marked special (their text is dropped by default)."""
        return frozenset(tid for tid, t in self._tok.get_added_tokens_decoder().items()
                         if t.special)

    def token_bytes(self, token_id: int) -> bytes:
        """Token `token_id`'s own bytes (a byte-level piece may be part of a UTF-8
        character, so this is not `decode([id])`); a special token's text; b"" for an id
        the tokenizer does not know (padding rows of the embedding)."""
        if self._piece_bytes is None:
            self._piece_bytes = self._byte_decoder()
        piece = self._tok.id_to_token(token_id)
        if piece is None:
            return b""
        if token_id in self._added_ids:
            return piece.encode("utf-8")
        try:
            return self._piece_bytes(piece)
        except GrammarError:   # a piece outside the byte alphabet (a hand-added token)
            return piece.encode("utf-8")

    def _byte_decoder(self) -> Callable[[str], bytes]:
        data = json.loads(self.tokenizer_json)
        self._added_ids = frozenset(int(t["id"]) for t in data.get("added_tokens") or [])
        try:
            style = tokenizer_style(data)
        except GrammarError:
            return lambda piece: piece.encode("utf-8")
        return decode_byte_level if style == "byte_level" else decode_sentencepiece

    def is_valid_id(self, token_id: int) -> bool:
        return 0 <= token_id < self.vocab_size

    def chat_template(self, with_tools: bool) -> ChatTemplate:
        """The compiled template (cached); ValueError when the model ships none."""
        if with_tools not in self._templates:
            source = self._override or pick_template(self._template_source, with_tools)
            self._templates[with_tools] = (ChatTemplate(source, bos_token=self.bos_token,
                                                        eos_token=self.eos_token)
                                           if source else None)
        template = self._templates[with_tools]
        if template is None:
            raise ValueError("this model has no chat template; use /v1/completions "
                             "or start the server with --chat-template")
        return template
