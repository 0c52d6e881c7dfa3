"""A tiny model directory in gpt-oss's harmony format: the byte-level BPE tokenizer of
fakes.py with the o200k_harmony control tokens added as special tokens, `<|return|>`,
`<|endoftext|>` and `<|call|>` as EOS ids (as gpt-oss's generation_config.json lists them),
and a small chat template in the harmony layout that renders `reasoning_effort`."""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer

from tests.server.fakes import build_tiny_tokenizer

HARMONY_SPECIAL = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
                   "<|return|>", "<|call|>"]
HARMONY_EOS = ["<|return|>", "<|endoftext|>", "<|call|>"]

HARMONY_TEMPLATE = """\
<|start|>system<|message|>Reasoning: {{ reasoning_effort | default("medium") }}
{%- if tools %}
Calls to these tools must go to the commentary channel: 'functions'.
{%- for tool in tools %} {{ tool.function.name }}{% endfor %}
{%- endif %}<|end|>
{%- for m in messages -%}
{%- if m.role == 'tool' -%}
<|start|>functions.tool to=assistant<|channel|>commentary<|message|>{{ m.content }}<|end|>
{%- elif m.role == 'assistant' and m.tool_calls -%}
{%- for c in m.tool_calls -%}
<|start|>assistant to=functions.{{ c.function.name }}<|channel|>commentary json<|message|>\
{{ c.function.arguments | tojson }}<|call|>
{%- endfor -%}
{%- elif m.role == 'assistant' -%}
<|start|>assistant<|channel|>final<|message|>{{ m.content }}<|end|>
{%- else -%}
<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt %}<|start|>assistant{% endif %}"""


def build_harmony_tokenizer() -> Tokenizer:
    tok = build_tiny_tokenizer()
    tok.add_special_tokens(HARMONY_SPECIAL)
    return tok


def build_harmony_model_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    tok = build_harmony_tokenizer()
    (path / "tokenizer.json").write_text(tok.to_str())
    (path / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": None, "eos_token": "<|return|>", "chat_template": HARMONY_TEMPLATE}))
    (path / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": [tok.token_to_id(t) for t in HARMONY_EOS]}))
    (path / "config.json").write_text(json.dumps({
        "model_type": "llama", "vocab_size": tok.get_vocab_size(),
        "max_position_embeddings": 512}))
    return path
