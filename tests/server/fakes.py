"""Test doubles standing behind the server's real interfaces.

* `FakeBlockPool` — the KV allocator interface (O(1) free list) with leak accounting.
* `FakeExecutor` — a StepExecutor whose "model" is a deterministic function of the token
  history it reads back *through the block tables* from its own fake KV store. A scheduler
  that lets a sequence write a block another one reads, loses a block, or feeds wrong
  positions changes the output (or fails the step), so concurrency tests can compare
  against solo runs. A verification chunk (speculative drafts) gets the next token after
  each of its last num_draft + 1 positions. Scripts make it emit a fixed token sequence
  (e.g. a tool call encoded by a real tokenizer) when the prompt contains a trigger. A chunk
  that scores prompt tokens gets `fake_logprob` of each row's history (read back from the
  KV) and target, so a row scored at the wrong position or twice is seen.
  A chunk that asks for its embedding gets `fake_embedding` of its history.
* `build_tiny_model_dir` — a byte-level BPE tokenizer trained in the test plus a ChatML
  chat template with tools and thinking, written as a model directory.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Sequence

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from atlas.model.batch import (SeqChunk, StepResult, TokenLogprobs, WithEmbedding,
                               WithPromptLogprobs)

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<tool_call>", "</tool_call>", "<think>", "</think>"]

CHATML_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}You may call functions. Signatures:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>
Answer with <tool_call>{"name": ..., "arguments": ...}</tool_call>.<|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'system' %}{% continue %}{% endif %}
{%- if m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% elif m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant
{% if m.content %}{{ m.content }}
{% endif %}{% for c in m.tool_calls %}<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}"""

CORPUS = [
    "The quick brown fox jumps over the lazy dog while the weather in Paris is cloudy.",
    "Hello! How can I help you today? The capital of France is Paris, and Berlin is in Germany.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    '{"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}}',
    "Once upon a time there was a small model that answered questions about numbers 0123456789.",
    "user assistant system tool function arguments location temperature result",
]


def build_tiny_tokenizer(vocab_size: int = 600) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    tok.add_tokens(ADDED)
    return tok


def build_tiny_model_dir(path: Path, *, max_position_embeddings: int = 512,
                         tokenizer_vocab: int = 600) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    tok = build_tiny_tokenizer(tokenizer_vocab)
    (path / "tokenizer.json").write_text(tok.to_str())
    (path / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": None, "eos_token": "<|im_end|>", "chat_template": CHATML_TEMPLATE}))
    (path / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": [tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")]}))
    (path / "config.json").write_text(json.dumps({
        "model_type": "llama", "vocab_size": tok.get_vocab_size(),
        "max_position_embeddings": max_position_embeddings}))
    return path


class FakeBlockPool:
    """allocate/free/num_free/can_allocate over a LIFO free list; tracks who holds what."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))
        self._held: set[int] = set()

    @property
    def num_free(self) -> int:
        return len(self._free)

    def can_allocate(self, n: int) -> bool:
        return n <= len(self._free)

    def allocate(self, n: int) -> list[int]:
        if n > len(self._free):
            raise RuntimeError(f"out of blocks: want {n}, have {len(self._free)}")
        blocks = [self._free.pop() for _ in range(n)]
        self._held.update(blocks)
        return blocks

    def free(self, blocks: Sequence[int]) -> None:
        for b in blocks:
            if b not in self._held:
                raise RuntimeError(f"double free of block {b}")
            self._held.remove(b)
            self._free.append(b)


def _mix(history: Sequence[int]) -> int:
    h = 0xCBF29CE484222325
    for t in history[-12:]:
        h = ((h ^ (t + 1)) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return ((h ^ len(history)) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF


class FakeExecutor:
    """Deterministic StepExecutor over a fake paged KV store (see module doc)."""

    def __init__(self, *, vocab_ids: Sequence[int], vocab_size: int, eos_id: int,
                 block_size: int = 4, num_kv_blocks: int = 256, max_batch_size: int = 32,
                 max_seq_len: int = 512, step_delay_s: float = 0.0,
                 scripts: Sequence[tuple[Sequence[int], Sequence[int]]] = (),
                 fail_on: Sequence[int] = ()) -> None:
        """`fail_on`: a step feeding this token sequence raises (a crashing model)."""
        self.vocab_ids = list(vocab_ids)
        self.vocab_size = vocab_size
        self.eos_id = eos_id
        self.block_size = block_size
        self.num_kv_blocks = num_kv_blocks
        self.max_batch_size = max_batch_size
        self.max_seq_len = max_seq_len
        self.max_num_draft_tokens = 8
        self.has_recurrent_state = False
        self.num_state_snapshots = 0
        self.step_delay_s = step_delay_s
        self.scripts = [(list(t), list(o)) for t, o in scripts]
        self.fail_on = list(fail_on)
        self._kv: dict[int, list[int | None]] = {}
        self._prompt_len: dict[int, int] = {}
        self.released: list[int] = []
        self.steps: list[list[SeqChunk]] = []
        self.lock = threading.Lock()

    def execute(self, chunks: Sequence[SeqChunk]) -> list[StepResult]:
        if self.step_delay_s:
            time.sleep(self.step_delay_s)
        if len(chunks) > self.max_batch_size:
            raise AssertionError(f"batch {len(chunks)} > max_batch_size {self.max_batch_size}")
        readers = Counter(b for st in chunks for b in st.block_table)
        for st in chunks:  # prefix-cached blocks are shared read-only; written ones never
            bs = self.block_size
            written = st.block_table[st.start_pos // bs:
                                     -(-(st.start_pos + len(st.token_ids)) // bs)]
            shared = [b for b in written if readers[b] > 1]
            if shared:
                raise AssertionError(f"seq {st.seq_id} writes blocks {shared} that another "
                                     "sequence reads in the same step")
        if self.fail_on and any(_contains(st.token_ids, self.fail_on) for st in chunks):
            raise RuntimeError("scripted model failure")
        with self.lock:
            self.steps.append(list(chunks))
        out: list[int | None] = []
        for st in chunks:
            end = st.start_pos + len(st.token_ids)
            if len(st.block_table) * self.block_size < end:
                raise AssertionError("block table too short for the step")
            if st.history is not None:
                self._prompt_len[st.seq_id] = len(st.history.prompt_ids)
            elif st.seq_id not in self._prompt_len:
                raise AssertionError(f"seq {st.seq_id}: first chunk without its history")
            for i, tok in enumerate(st.token_ids):
                pos = st.start_pos + i
                block = self._kv.setdefault(st.block_table[pos // self.block_size],
                                            [None] * self.block_size)
                block[pos % self.block_size] = tok
            if st.num_draft:   # a verification: the token after each of the last n + 1
                out.append(tuple(self._next(st, p) for p in range(end - st.num_draft, end + 1)))
            else:
                out.append(self._next(st, end) if st.sample else None)
            sc = st.prompt_logprobs
            if sc is not None:
                first = st.start_pos + sc.first
                out[-1] = WithPromptLogprobs(tuple(
                    self._score(st, first + i + 1, t, sc.top_n)
                    for i, t in enumerate(sc.targets)), out[-1])
            if st.embed:
                out[-1] = WithEmbedding(fake_embedding(self._history(st, end)), out[-1])
        return out

    def _score(self, st: SeqChunk, end: int, target: int, top_n: int) -> TokenLogprobs:
        """The fake logprob of `target` after the sequence's first `end` tokens."""
        history = self._history(st, end)
        top = tuple((self.vocab_ids[(_mix(history) + k) % len(self.vocab_ids)], -0.5 * k)
                    for k in range(top_n))
        return TokenLogprobs(target, fake_logprob(history, target), top)

    def _history(self, st: SeqChunk, end: int) -> list[int]:
        history = []
        for pos in range(end):
            tok = self._kv[st.block_table[pos // self.block_size]][pos % self.block_size]
            if tok is None:
                raise AssertionError(f"seq {st.seq_id} reads unwritten KV at {pos}")
            history.append(tok)
        return history

    def _next(self, st: SeqChunk, end: int) -> int:
        history = self._history(st, end)
        prompt_len = self._prompt_len[st.seq_id]
        prompt, generated = history[:prompt_len], end - prompt_len
        for trigger, output in self.scripts:
            if _contains(prompt, trigger):
                return output[generated] if generated < len(output) else self.eos_id
        return self.vocab_ids[_mix(history) % len(self.vocab_ids)]

    def release(self, seq_id: int) -> None:
        self.released.append(seq_id)
        self._prompt_len.pop(seq_id, None)

    def state_slot_usage(self) -> tuple[int, int]:
        return 0, 0  # a scripted model keeps no recurrent state


#: width of the fake model's hidden state (`fake_embedding`)
FAKE_HIDDEN = 8


def fake_embedding(history: Sequence[int]) -> np.ndarray:
    """The fake model's final hidden state after `history` (float32 [FAKE_HIDDEN]): a
    deterministic function of every token, so a prompt read back wrong changes it."""
    rng = np.random.default_rng(_mix(list(history)))
    return rng.standard_normal(FAKE_HIDDEN).astype(np.float32)


def fake_logprob(history: Sequence[int], target: int) -> float:
    """What FakeExecutor reports as log p(target | history)."""
    return -((_mix([*history, target]) % 1000) / 100.0)


def _contains(seq: Sequence[int], sub: Sequence[int]) -> bool:
    n = len(sub)
    return any(list(seq[i:i + n]) == list(sub) for i in range(len(seq) - n + 1))


def ascii_vocab(tok) -> list[int]:
    """Ids of ordinary tokens that decode to printable ASCII without '<' (no markers).

    `tok` is a TextTokenizer (the server's wrapper) or a raw tokenizers.Tokenizer."""
    size = tok.vocab_size if hasattr(tok, "vocab_size") else tok.get_vocab_size()
    marked = set(SPECIAL + ADDED)
    ids = []
    for tid in range(size):
        text = tok.decode([tid], skip_special_tokens=False)
        if (text and text not in marked and text.isascii() and text.isprintable()
                and "<" not in text):
            ids.append(tid)
    return ids
