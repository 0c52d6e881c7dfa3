"""OpenAI request validation and response shapes (chat completions and completions).

Unknown top-level fields are rejected with 400 "Unrecognized request argument supplied", as the
OpenAI API does, so a typo never silently changes nothing. Accepted beyond OpenAI's own fields
are the common sampling extensions of vLLM's server (top_k, min_p, repetition_penalty,
stop_token_ids, ignore_eos, min_tokens, include_stop_str_in_output, skip_special_tokens,
truncate_prompt_tokens, chat_template_kwargs),
which benchmark clients send, and its guided decoding (`guided_json` / `_regex` / `_choice` /
`_grammar`, or one of them under `structured_outputs`) on the same grammar engine as
`response_format`, and its `prompt_logprobs` (the prompt tokens' logprobs, not streamed).
`logit_bias` takes every value in [-100, 100], as OpenAI documents: -100 bans a token and 100
makes the 100-biased tokens the only ones drawn (token masks: exact), and a value between is
added to the token's logit on the GPU sampler, after the penalties; at most MAX_LOGIT_BIAS
(300) entries. Fields we know but do not implement (suffix, best_of other than n) are 400s
naming the field. A legacy completion with `echo`
and `logprobs` reports its prompt tokens' logprobs before the generated ones', and with
`max_tokens` 0 (echo only) it returns the prompt alone, as vLLM does.

Logprobs are those of the distribution each token was drawn from after repetition/presence/
frequency penalties, `logit_bias` and the structured-output mask, before temperature,
top-k/top-p/min-p (so at temperature 0 without penalties or biases they are the model's own
log-softmax); the prompt's are the model's own log-softmax always: docs/grammar.md says
more.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from ..core.sampling import LOGIT_BIAS_LIMIT, MAX_LOGIT_BIAS, SamplingParams
from ..model.batch import MAX_TOP_LOGPROBS
from .errors import invalid
from .request_spec import GenerationSpec, ToolChoice
from .structured import ResponseFormat
from .validation import Fields, require_object, string_list

_SAMPLING_FIELDS = {"temperature", "top_p", "top_k", "min_p", "presence_penalty",
                    "frequency_penalty", "repetition_penalty", "seed"}
_COMMON_FIELDS = _SAMPLING_FIELDS | {
    "model", "max_tokens", "stop", "stop_token_ids", "n", "stream", "stream_options", "user",
    "logprobs", "top_logprobs", "logit_bias", "metadata", "store", "service_tier", "ignore_eos",
    "min_tokens", "include_stop_str_in_output", "skip_special_tokens", "truncate_prompt_tokens",
    "structured_outputs", "prompt_logprobs", "allowed_token_ids", "bad_words", "priority",
    *(f"guided_{kind}" for kind in ("json", "regex", "choice", "grammar"))}
CHAT_FIELDS = _COMMON_FIELDS | {
    "messages", "max_completion_tokens", "tools", "tool_choice", "parallel_tool_calls",
    "response_format", "chat_template_kwargs", "reasoning_effort", "add_generation_prompt",
    "continue_final_message"}
COMPLETION_FIELDS = _COMMON_FIELDS | {"prompt", "echo", "suffix", "best_of"}

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_ROLES = {"system", "developer", "user", "assistant", "tool"}


def _reject_unknown(body: dict, allowed: set[str]) -> None:
    for key in body:
        if key not in allowed:
            raise invalid(f"Unrecognized request argument supplied: {key}", key)


def parse_sampling(f: Fields, defaults: SamplingParams) -> SamplingParams:
    """Sampling fields; each one left out takes the model's preset (`defaults`)."""
    d = defaults
    top_k = f.integer("top_k", d.top_k, lo=-1)
    params = SamplingParams(
        temperature=f.number("temperature", d.temperature, lo=0.0, hi=2.0),
        top_p=f.number("top_p", d.top_p, lo=0.0, hi=1.0, lo_open=True),
        top_k=max(top_k, 0),
        min_p=f.number("min_p", d.min_p, lo=0.0, hi=1.0),
        repetition_penalty=f.number("repetition_penalty", d.repetition_penalty, lo=0.0, hi=2.0,
                                    lo_open=True),
        presence_penalty=f.number("presence_penalty", d.presence_penalty, lo=-2.0, hi=2.0),
        frequency_penalty=f.number("frequency_penalty", d.frequency_penalty, lo=-2.0, hi=2.0),
        seed=f.integer("seed", d.seed, lo=-(2**63), hi=2**64 - 1),
    )
    try:
        params.validate()
    except ValueError as exc:
        raise invalid(str(exc)) from None
    return params


#: the most choices one request may ask for (`n`): each is a sequence in the batch
MAX_CHOICES = 16
#: the most `bad_words` one request may list (each is matched against the output every step)
MAX_BAD_WORDS = 64


def _reject_unsupported(f: Fields) -> None:
    f.boolean("store")
    f.string("user")
    f.string("service_tier")
    f.obj("metadata")


def _common(body: Any, allowed: set[str]) -> tuple[Fields, dict]:
    body = require_object(body)
    _reject_unknown(body, allowed)
    f = Fields(body)
    f.string("model", required=True)
    _reject_unsupported(f)
    return f, body


def _stream_options(f: Fields, stream: bool) -> bool:
    options = f.obj("stream_options")
    if options is None:
        return False
    if not stream:
        raise invalid("stream_options is only allowed with stream=true", "stream_options")
    return bool(Fields(options, "stream_options.").boolean("include_usage", False))


def _choices(f: Fields) -> int:
    return f.integer("n", 1, lo=1, hi=MAX_CHOICES)


def _chat_logprobs(f: Fields) -> int | None:
    """Chat: `logprobs` (bool) and `top_logprobs` (0..20, which needs logprobs)."""
    top = f.integer("top_logprobs", None, lo=0, hi=MAX_TOP_LOGPROBS)
    if not f.boolean("logprobs", False):
        if top is not None:
            raise invalid("top_logprobs needs logprobs=true", "top_logprobs")
        return None
    return top or 0


def _prompt_logprobs(f: Fields, stream: bool) -> int | None:
    """vLLM's `prompt_logprobs` (0..20 alternatives a prompt token); like vLLM, not with
    stream=true."""
    top = f.integer("prompt_logprobs", None, lo=0, hi=MAX_TOP_LOGPROBS)
    if top is not None and stream:
        raise invalid("prompt_logprobs are not available with stream=true", "prompt_logprobs")
    return top


def continuation(f: Fields) -> dict[str, bool]:
    """vLLM's `continue_final_message` (the final message left open for the model to
    continue) and `add_generation_prompt`: continuing implies no generation prompt, and asking
    for both is a 400, as in vLLM."""
    continuing = f.boolean("continue_final_message", False)
    if continuing and f.raw("add_generation_prompt") is True:
        raise invalid("continue_final_message and add_generation_prompt cannot both be true",
                      "continue_final_message")
    return {"continue_final_message": continuing,
            "add_generation_prompt": f.boolean("add_generation_prompt", not continuing)}


def _logit_bias(f: Fields) -> dict[int, float]:
    """`logit_bias` {"token id": bias}, every bias a number in [-100, 100], at most
    MAX_LOGIT_BIAS entries. -100 (never drawn) and 100 (the 100-biased tokens are the only
    ones drawn) become token masks; a value between is added to the logit (generation.py)."""
    given = f.obj("logit_bias", {})
    if len(given) > MAX_LOGIT_BIAS:
        raise invalid(f"logit_bias has {len(given)} entries; at most {MAX_LOGIT_BIAS} are "
                      "allowed", "logit_bias")
    out: dict[int, float] = {}
    for key, value in given.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit()):
            raise invalid(f"logit_bias keys must be token ids, got {key!r}", "logit_bias")
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not -LOGIT_BIAS_LIMIT <= value <= LOGIT_BIAS_LIMIT):  # NaN fails too
            raise invalid(f"logit_bias[{key}]={value!r} must be a number in "
                          f"[{-LOGIT_BIAS_LIMIT:g}, {LOGIT_BIAS_LIMIT:g}]", "logit_bias")
        out[int(key)] = float(value)
    return out


def _vllm_text_options(f: Fields) -> dict[str, Any]:
    """vLLM's options on the prompt and the output text, as GenerationSpec fields."""
    return {"include_stop_str": f.boolean("include_stop_str_in_output", False),
            "skip_special_tokens": f.boolean("skip_special_tokens", True),
            "truncate_prompt_tokens": f.integer("truncate_prompt_tokens", None, lo=1)}


def _min_tokens(f: Fields, max_tokens: int | None) -> int:
    """`min_tokens` (vLLM's): at most max_tokens, when that is given."""
    least = f.integer("min_tokens", 0, lo=0)
    if max_tokens is not None and least > max_tokens:
        raise invalid(f"min_tokens ({least}) must not exceed max_tokens ({max_tokens})",
                      "min_tokens")
    return least


def _token_ids(f: Fields, name: str) -> list[int] | None:
    """An array of token ids (None when absent); range checks against the vocabulary are
    the tokenizer's (generation.py)."""
    ids = f.array(name, None)
    if ids is not None and not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                   for i in ids):
        raise invalid(f"{name} must be an array of non-negative integers", name)
    return ids


def _stop_token_ids(f: Fields) -> list[int]:
    return _token_ids(f, "stop_token_ids") or []


def _vllm_engine_options(f: Fields) -> dict[str, Any]:
    """vLLM's `allowed_token_ids` (the only tokens drawn), `bad_words` (strings never
    generated) and `priority` (the queue's order under the priority policy), as
    GenerationSpec fields."""
    allowed = _token_ids(f, "allowed_token_ids")
    if allowed is not None and not allowed:
        raise invalid("allowed_token_ids must not be empty", "allowed_token_ids")
    bad_words = string_list(f.raw("bad_words"), "bad_words", max_items=MAX_BAD_WORDS)
    if any(not w.strip() for w in bad_words):
        raise invalid("bad_words entries must not be empty", "bad_words")
    return {"allowed_token_ids": allowed, "bad_words": bad_words,
            "priority": f.integer("priority", 0)}


# --- chat ------------------------------------------------------------------------------------

def content_text(content: Any, param: str) -> str | None:
    """A message's content: a string, or text parts (`text`, `input_text`, `output_text`)
    joined; None stays None."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(f"{param} must be a string or an array of content parts", param)
    texts = []
    for i, part in enumerate(content):
        pf = Fields(require_object(part, f"{param}[{i}]"), f"{param}[{i}].")
        kind = pf.string("type", required=True)
        if kind not in ("text", "input_text", "output_text"):
            raise invalid(f"content part type {kind!r} is not supported by this model",
                          f"{param}[{i}].type")
        texts.append(pf.string("text", required=True))
    return "".join(texts)


def _tool_call_arguments(text: Any, param: str) -> Any:
    if not isinstance(text, str):
        raise invalid(f"{param} must be a string", param)
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return text  # the template renders it verbatim


def parse_messages(messages: list) -> list[dict[str, Any]]:
    if not messages:
        raise invalid("messages must contain at least one message", "messages")
    out = []
    for i, raw in enumerate(messages):
        param = f"messages[{i}]"
        m = Fields(require_object(raw, param), f"{param}.")
        role = m.string("role", required=True)
        if role not in _ROLES:
            raise invalid(f"{param}.role {role!r} is not one of {sorted(_ROLES)}", f"{param}.role")
        msg: dict[str, Any] = {"role": "system" if role == "developer" else role,
                               "content": content_text(m.raw("content"), f"{param}.content")}
        if m.string("name") is not None:
            msg["name"] = m.string("name")
        if role == "tool":
            msg["tool_call_id"] = m.string("tool_call_id", "")
        if role == "assistant":
            reasoning = m.string("reasoning_content") or m.string("reasoning")
            if reasoning:  # under both names templates read it by (Qwen3's, gpt-oss's)
                msg["reasoning_content"] = msg["thinking"] = reasoning
            calls = m.array("tool_calls", [])
            if calls:
                msg["tool_calls"] = [_parse_history_call(c, f"{param}.tool_calls[{j}]")
                                     for j, c in enumerate(calls)]
        if msg["content"] is None and not msg.get("tool_calls"):
            if role != "assistant":
                raise invalid(f"{param}.content is required", f"{param}.content")
            msg["content"] = ""
        out.append(msg)
    return out


def _parse_history_call(raw: Any, param: str) -> dict[str, Any]:
    c = Fields(require_object(raw, param), f"{param}.")
    fn = Fields(c.obj("function", required=True), f"{param}.function.")
    return {"id": c.string("id", ""), "type": "function",
            "function": {"name": fn.string("name", required=True),
                         "arguments": _tool_call_arguments(fn.raw("arguments") or "{}",
                                                           f"{param}.function.arguments")}}


def parse_tools(tools: list | None) -> list[dict[str, Any]] | None:
    if not tools:
        return None
    out = []
    for i, raw in enumerate(tools):
        param = f"tools[{i}]"
        t = Fields(require_object(raw, param), f"{param}.")
        if t.string("type", "function") != "function":
            raise invalid(f"{param}.type must be 'function'", f"{param}.type")
        fn = Fields(t.obj("function", required=True), f"{param}.function.")
        name = fn.string("name", required=True)
        if not _TOOL_NAME.match(name):
            raise invalid(f"{param}.function.name {name!r} must match {_TOOL_NAME.pattern}",
                          f"{param}.function.name")
        function = {"name": name,
                    "parameters": fn.obj("parameters", {"type": "object", "properties": {}})}
        if (description := fn.string("description")) is not None:
            function["description"] = description
        out.append({"type": "function", "function": function})
    return out


def parse_tool_choice(raw: Any, tools: list[dict[str, Any]] | None) -> ToolChoice:
    names = [t["function"]["name"] for t in tools or ()]
    if raw is None:
        return ToolChoice("auto")
    if isinstance(raw, str):
        if raw not in ("auto", "none", "required"):
            raise invalid(f"tool_choice {raw!r} must be auto, none, required or a named "
                          "function", "tool_choice")
        if raw == "required" and not names:
            raise invalid("tool_choice 'required' needs tools", "tool_choice")
        return ToolChoice(raw)
    choice = Fields(require_object(raw, "tool_choice"), "tool_choice.")
    if choice.string("type", "function") != "function":
        raise invalid("tool_choice.type must be 'function'", "tool_choice.type")
    name = Fields(choice.obj("function", required=True), "tool_choice.function.").string(
        "name", required=True)
    if name not in names:
        raise invalid(f"tool_choice names function {name!r}, which is not in tools",
                      "tool_choice.function.name")
    return ToolChoice("named", name)


#: OpenAI's `reasoning_effort` values; the first two turn thinking off
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")


def reasoning_effort(effort: str | None, param: str) -> tuple[bool | None, dict[str, str]]:
    """A request's reasoning effort: whether it turns thinking on (None: not said), and the
    chat-template variable it sets: `reasoning_effort` low, medium or high, which a template
    that reads it renders (gpt-oss's "Reasoning: high"; the others ignore it). A
    `chat_template_kwargs.reasoning_effort` of the request wins over it."""
    if effort is None:
        return None, {}
    if effort not in REASONING_EFFORTS:
        raise invalid(f"{param} {effort!r} is not valid", param)
    if effort in REASONING_EFFORTS[:2]:
        return False, {}
    return True, {"reasoning_effort": effort}


def parse_chat_request(body: Any, defaults: SamplingParams = SamplingParams()
                       ) -> GenerationSpec:
    f, body = _common(body, CHAT_FIELDS)
    stream = f.boolean("stream", False)
    max_tokens = f.integer("max_completion_tokens", None, lo=1)
    if max_tokens is None:
        max_tokens = f.integer("max_tokens", None, lo=1)
    tools = parse_tools(f.array("tools"))
    kwargs = f.obj("chat_template_kwargs", {})
    enable_thinking = kwargs.get("enable_thinking")
    if enable_thinking is not None and not isinstance(enable_thinking, bool):
        raise invalid("chat_template_kwargs.enable_thinking must be a boolean",
                      "chat_template_kwargs.enable_thinking")
    thinking, effort = reasoning_effort(f.string("reasoning_effort"), "reasoning_effort")
    if enable_thinking is None:
        enable_thinking = thinking
    return GenerationSpec(
        model=f.string("model"), sampling=parse_sampling(f, defaults), max_tokens=max_tokens,
        messages=parse_messages(f.array("messages", required=True)),
        stop=string_list(f.raw("stop"), "stop"), stop_token_ids=_stop_token_ids(f),
        tools=tools, tool_choice=parse_tool_choice(f.raw("tool_choice"), tools),
        parallel_tool_calls=f.boolean("parallel_tool_calls", True),
        stream=stream, include_usage=_stream_options(f, stream),
        enable_thinking=enable_thinking,
        template_kwargs={**effort, **{k: v for k, v in kwargs.items()
                                      if k != "enable_thinking"}},
        **continuation(f),
        response_format=_output_format(f, parse_response_format(f.raw("response_format"))),
        logprobs=_chat_logprobs(f), n=_choices(f), ignore_eos=f.boolean("ignore_eos", False),
        min_tokens=_min_tokens(f, max_tokens), logit_bias=_logit_bias(f),
        prompt_logprobs=_prompt_logprobs(f, stream), **_vllm_text_options(f),
        **_vllm_engine_options(f),
    )


#: vLLM's guided-decoding keys (`structured_outputs.<key>`, or `guided_<key>` at the top
#: level) -> ResponseFormat type
_GUIDED = {"json": "json_schema", "regex": "regex", "choice": "choice", "grammar": "grammar"}


def _output_format(f: Fields, response_format: ResponseFormat | None) -> ResponseFormat | None:
    """`response_format`, or the one guided-decoding constraint the request gives instead;
    two constraints at once are a 400."""
    given = [(f"guided_{key}", key, f.raw(f"guided_{key}")) for key in _GUIDED
             if f.raw(f"guided_{key}") is not None]
    nested = f.obj("structured_outputs")
    if nested is not None:
        unknown = sorted(set(nested) - set(_GUIDED))
        if unknown:
            raise invalid(f"structured_outputs.{unknown[0]} is not supported (one of "
                          f"{', '.join(_GUIDED)})", "structured_outputs")
        given += [(f"structured_outputs.{key}", key, value) for key, value in nested.items()
                  if value is not None]
    if not given:
        return response_format
    if len(given) > 1 or response_format is not None:
        names = [name for name, _, _ in given] + (["response_format"] if response_format
                                                  else [])
        raise invalid(f"one output constraint per request, got {', '.join(names)}", names[0])
    (name, key, value), = given
    if key == "json":
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise invalid(f"{name} must be a JSON schema", name) from None
        if not isinstance(value, (dict, bool)):
            raise invalid(f"{name} must be a JSON schema", name)
    elif key == "choice":
        if not (isinstance(value, list) and value
                and all(isinstance(c, str) and c for c in value)):
            raise invalid(f"{name} must be a non-empty array of non-empty strings", name)
    elif not (isinstance(value, str) and value):
        raise invalid(f"{name} must be a non-empty string", name)
    return ResponseFormat(_GUIDED[key], value)


def parse_response_format(raw: Any) -> ResponseFormat | None:
    """`response_format`: None for text; json_object; json_schema {name, schema, strict}."""
    if raw is None:
        return None
    f = Fields(require_object(raw, "response_format"), "response_format.")
    kind = f.string("type", required=True)
    if kind == "text":
        return None
    if kind == "json_object":
        return ResponseFormat("json_object")
    if kind != "json_schema":
        raise invalid(f"response_format.type {kind!r} must be text, json_object or "
                      "json_schema", "response_format.type")
    js = Fields(f.obj("json_schema", required=True), "response_format.json_schema.")
    js.string("name", required=True)
    schema = js.raw("schema")
    if schema is None:
        schema = {}
    if not isinstance(schema, (dict, bool)):
        raise invalid("response_format.json_schema.schema must be an object",
                      "response_format.json_schema.schema")
    return ResponseFormat("json_schema", schema, bool(js.boolean("strict", False)))


# --- completions -----------------------------------------------------------------------------

#: prompts one legacy completion request may batch (each with its `n` choices)
MAX_PROMPTS = 64


def _prompts(raw: Any, param: str = "prompt", limit: int = MAX_PROMPTS
              ) -> list[str | list[int]]:
    """`prompt` (or embeddings' `input`): a string, token ids, or an array of either (a
    batch of up to `limit`)."""
    if isinstance(raw, str) or (isinstance(raw, list) and raw and all(
            isinstance(t, int) and not isinstance(t, bool) for t in raw)):
        return [raw]
    if isinstance(raw, list) and raw and all(
            isinstance(p, str) or (isinstance(p, list) and p and all(
                isinstance(t, int) and not isinstance(t, bool) for t in p)) for p in raw):
        if len(raw) > limit:
            raise invalid(f"at most {limit} {param}s a request, got {len(raw)}", param)
        return list(raw)
    raise invalid(f"{param} must be a non-empty string or array of token ids, or an array of "
                  "them", param)


def parse_completion_request(body: Any, defaults: SamplingParams = SamplingParams()
                             ) -> GenerationSpec:
    f, body = _common(body, COMPLETION_FIELDS)
    if f.raw("prompt") is None:
        raise invalid("prompt is required", "prompt")
    echo = f.boolean("echo", False)
    if f.string("suffix"):
        raise invalid("suffix is not supported by this server", "suffix")
    n = _choices(f)
    if f.integer("best_of", n) != n:
        raise invalid("best_of must equal n: this server returns every choice it generates "
                      "and does not rank extra ones", "best_of")
    stream = f.boolean("stream", False)
    max_tokens = f.integer("max_tokens", 16, lo=0)
    if max_tokens == 0 and not echo:
        raise invalid("max_tokens=0 asks for no output, which only echo=true (the prompt "
                      "alone) allows", "max_tokens")
    first, *more = _prompts(f.raw("prompt"))
    return GenerationSpec(
        model=f.string("model"), sampling=parse_sampling(f, defaults),
        max_tokens=max_tokens, prompt=first, more_prompts=more, echo=echo,
        stop=string_list(f.raw("stop"), "stop"), stop_token_ids=_stop_token_ids(f),
        stream=stream, include_usage=_stream_options(f, stream),
        logprobs=f.integer("logprobs", None, lo=0, hi=MAX_TOP_LOGPROBS), n=n,
        ignore_eos=f.boolean("ignore_eos", False), min_tokens=_min_tokens(f, max_tokens),
        logit_bias=_logit_bias(f), response_format=_output_format(f, None),
        prompt_logprobs=_prompt_logprobs(f, stream), **_vllm_text_options(f),
        **_vllm_engine_options(f))


# --- embeddings ------------------------------------------------------------------------------

EMBEDDING_FIELDS = {"model", "input", "encoding_format", "dimensions", "user",
                    "truncate_prompt_tokens"}
#: the most inputs one /v1/embeddings request may carry (each is a sequence in the batch)
MAX_EMBEDDING_INPUTS = 256
ENCODING_FORMATS = ("float", "base64")


@dataclass(frozen=True, slots=True)
class EmbeddingsRequest:
    """/v1/embeddings: one prompt-only generation a input (`GenerationSpec.embed`), and how
    the vectors are returned."""

    model: str
    specs: list[GenerationSpec]
    encoding_format: str
    dimensions: int | None


def parse_embeddings_request(body: Any) -> EmbeddingsRequest:
    f = Fields(require_object(body))
    _reject_unknown(body, EMBEDDING_FIELDS)
    model = f.string("model", required=True)
    if f.raw("input") is None:
        raise invalid("input is required", "input")
    inputs = _prompts(f.raw("input"), "input", MAX_EMBEDDING_INPUTS)
    fmt = f.string("encoding_format") or "float"
    if fmt not in ENCODING_FORMATS:
        raise invalid(f"encoding_format must be one of {ENCODING_FORMATS}, got {fmt!r}",
                      "encoding_format")
    f.string("user")
    keep = f.integer("truncate_prompt_tokens", None, lo=1)
    specs = [GenerationSpec(model=model, sampling=SamplingParams(), max_tokens=0, prompt=p,
                            embed=True, truncate_prompt_tokens=keep) for p in inputs]
    return EmbeddingsRequest(model, specs, fmt, f.integer("dimensions", None, lo=1))


def embeddings_response(*, model: str, vectors: list[list[float] | str],
                        prompt_tokens: int) -> dict[str, Any]:
    return {"object": "list", "model": model,
            "data": [{"object": "embedding", "index": i, "embedding": v}
                     for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}}


# --- responses -------------------------------------------------------------------------------

def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
          ) -> dict[str, Any]:
    """OpenAI usage; `cached_tokens`: prompt tokens served from the prefix cache."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens}}


def chat_choice(*, index: int, content: str | None, reasoning: str, tool_calls: list[dict],
                finish_reason: str, logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        message["reasoning"] = message["reasoning_content"] = reasoning
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"index": index, "message": message, "finish_reason": finish_reason,
            "logprobs": logprobs}


def chat_completion(*, rid: str, model: str, created: int, choices: list[dict[str, Any]],
                    usage: dict[str, Any], prompt_logprobs: list[Any] | None = None
                    ) -> dict[str, Any]:
    """`prompt_logprobs` (vLLM's, when asked) is one list for the whole response."""
    body = {"id": rid, "object": "chat.completion", "created": created, "model": model,
            "choices": choices, "usage": usage}
    if prompt_logprobs is not None:
        body["prompt_logprobs"] = prompt_logprobs
    return body


def chat_chunk(*, rid: str, model: str, created: int, delta: dict[str, Any], index: int = 0,
               finish_reason: str | None = None, logprobs: dict[str, Any] | None = None,
               with_usage_field: bool = False) -> dict[str, Any]:
    chunk: dict[str, Any] = {"id": rid, "object": "chat.completion.chunk", "created": created,
                             "model": model,
                             "choices": [{"index": index, "delta": delta, "logprobs": logprobs,
                                          "finish_reason": finish_reason}]}
    if with_usage_field:
        chunk["usage"] = None
    return chunk


def completion_choice(*, index: int, text: str, finish_reason: str | None,
                      logprobs: dict[str, Any] | None = None,
                      prompt_logprobs: list[Any] | None = None) -> dict[str, Any]:
    """`prompt_logprobs` (vLLM's, when asked): its prompt's, per choice."""
    choice = {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}
    if prompt_logprobs is not None:
        choice["prompt_logprobs"] = prompt_logprobs
    return choice


def completion(*, rid: str, model: str, created: int, choices: list[dict[str, Any]],
               usage: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": rid, "object": "text_completion", "created": created,
                            "model": model, "choices": choices}
    if usage is not None:
        body["usage"] = usage
    return body


def now_s() -> int:
    return int(time.time())
