"""A grammar that no token can continue ends the request with a clear error, not a hang:
a model whose vocabulary cannot spell "{" (its tokenizer was trained without the byte)
asked for a JSON object. Non-streaming: a 500 whose message says why; streaming: an error
event, then the end of the stream."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import openai
import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from tests.server.fakes import ADDED, CORPUS, SPECIAL, build_tiny_model_dir
from tests.server.harness import host_model_server

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}


def braceless_model_dir(path: Path) -> Path:
    """tiny-qwen3's weights behind a byte-level BPE that has no token containing "{"."""
    build_tiny_model_dir(path)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = [c for c in pre_tokenizers.ByteLevel.alphabet() if c not in "{"]
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL,
                                  initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator([line.replace("{", "") for line in CORPUS] * 4, trainer=trainer)
    tok.add_tokens([t for t in ADDED if "{" not in t])
    assert not any("{" in piece for piece in tok.get_vocab())
    tok.save(str(path / "tokenizer.json"))
    (path / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": [tok.token_to_id("<|im_end|>")]}))
    shutil.copy(FIXTURE / "config.json", path / "config.json")
    shutil.copy(FIXTURE / "model.safetensors", path / "model.safetensors")
    return path


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    model_dir = braceless_model_dir(tmp_path_factory.mktemp("braceless"))
    srv = host_model_server(model_dir, max_seq_len=256, max_batch_size=2,
                            max_prefill_tokens=128).start()
    yield openai.OpenAI(base_url=srv.url + "/v1", api_key="k", max_retries=0, timeout=60)
    srv.stop()


def ask(client, **kw):
    return client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "An object please."}],
        temperature=1.0, seed=1, max_tokens=20, extra_body=NO_THINKING,
        response_format={"type": "json_object"}, **kw)


def test_a_dead_end_is_a_500_that_says_why(client):
    with pytest.raises(openai.InternalServerError) as err:
        ask(client)
    assert "structured output failed" in err.value.message
    assert "no token" in err.value.message


def test_a_dead_end_ends_the_stream_with_an_error_event(client):
    with pytest.raises(openai.APIError) as err:
        list(ask(client, stream=True))
    assert "structured output failed" in err.value.message
