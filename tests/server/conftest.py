"""Fixtures: a tiny model directory (real BPE tokenizer + chat template) and a running
server around the scripted fake executor."""

from __future__ import annotations

import pytest

from tests.server.fakes import FakeExecutor, ascii_vocab, build_tiny_model_dir
from tests.server.harness import ServerThread


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    return build_tiny_model_dir(tmp_path_factory.mktemp("tiny-model"))


THINKING_SCRIPT = "<think>\nFrance is in Europe.\n</think>\n\nParis."


def make_executor(tokenizer, **kw) -> FakeExecutor:
    return FakeExecutor(vocab_ids=ascii_vocab(tokenizer), vocab_size=tokenizer.vocab_size,
                        eos_id=tokenizer.token_id("<|im_end|>"), **kw)


@pytest.fixture(scope="module")
def server(model_dir):
    from atlas.server.app_assets import load_assets
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    script_text = ('<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}'
                   '\n</tool_call>')
    executor = make_executor(tok, scripts=[
        # tool_choice forcing: the prompt ends in the parser's forced prefix
        (tok.encode('assistant\n<tool_call>\n{"name": "get_weather", "arguments": '),
         tok.encode('{"location": "Paris"}}\n</tool_call>')),
        (tok.encode("assistant\n<tool_call>\n"), tok.encode(script_text[len("<tool_call>\n"):])),
        (tok.encode(" weather"), tok.encode(script_text)),
        (tok.encode(" think"), tok.encode(THINKING_SCRIPT)),
        (tok.encode(" capital"), tok.encode("The capital of France is Paris.")),
        # a special token inside the answer (skip_special_tokens)
        (tok.encode(" special"), tok.encode("Before<|im_start|>after")),
    ])
    srv = ServerThread(model_dir, executor).start()
    yield srv
    srv.stop()
