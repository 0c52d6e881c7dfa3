"""One request's generation, API-neutral: prompt building, admission checks, and the
stream of deltas with the outcome (finish reason, usage, timings) at the end.

Pure logic over the tokenizer and the AsyncEngine; the handlers in app_*.py shape the
deltas into each API's wire format.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any, AsyncIterator, Mapping

import numpy as np

from ..core.sampling import LOGIT_BIAS_LIMIT, SamplingParams
from ..engine.grammar_state import GrammarRequest
from ..engine.request import EngineRequest, FinishReason, ThinkingBudget
from ..model.batch import TokenLogprobs
from .chat_template import TemplateError
from .context import ServerContext
from .errors import ApiError, ErrorKind, invalid
from .harmony import HARMONY, HarmonyParser
from .reasoning import THINK_CLOSE, THINK_OPEN, ReasoningParser, prompt_opens_thinking
from .request_spec import GenerationSpec
from .response_stream import ResponseStream, StreamDelta
from .tokenizer import TextTokenizer
from .tool_parsers import OutputParser, ToolCall, parser_class


@dataclass(slots=True)
class RenderedPrompt:
    """The prompt after the chat template: its token ids, its text, and the assistant text
    appended to force a tool call (the response stream parses it as the output's start)."""

    ids: list[int]
    text: str
    forced_prefix: str = ""


def render_prompt(spec: GenerationSpec, ctx: ServerContext) -> RenderedPrompt:
    """Chat template (or raw prompt) -> token ids. A bad template or conversation is a 400."""
    tok = ctx.tokenizer
    if spec.messages is None:
        if isinstance(spec.prompt, list):
            bad = [t for t in spec.prompt if not tok.is_valid_id(t)]
            if bad:
                raise invalid(f"prompt token ids out of vocabulary: {bad[:5]}", "prompt")
            return RenderedPrompt(list(spec.prompt),
                                  tok.decode(spec.prompt, skip_special_tokens=False))
        text = spec.prompt or ""
        return RenderedPrompt(tok.encode(text, add_special_tokens=True), text)
    use_tools = bool(spec.tools) and spec.tool_choice.mode != "none"
    if use_tools and ctx.options.tool_parser is None:
        raise invalid("this model has no tool-call format; start the server with "
                      "--tool-call-parser to enable tools", "tools")
    thinking = thinking_enabled(spec, ctx)
    # special-token strings in message text stay text unless the server allows them
    protected = tok.protect(spec.messages,
                            escape=not ctx.options.allow_special_tokens_in_content)
    continuing = spec.continue_final_message
    try:
        template = tok.chat_template(use_tools)
        text = template.render(protected.messages, tools=spec.tools if use_tools else None,
                               add_generation_prompt=spec.add_generation_prompt and not continuing,
                               enable_thinking=thinking, extra=spec.template_kwargs)
    except (TemplateError, ValueError) as exc:
        raise invalid(str(exc), "messages") from None
    if continuing:
        text = open_final_message(text, protected.messages[-1])
    forced = ""
    enforced = ctx.structured is not None and ctx.structured.enforces_tool_calls
    if use_tools and spec.tool_choice.forces_call and not enforced:
        if continuing:
            raise invalid("a forced tool call cannot continue a final message's text",
                          "tool_choice")
        # no grammar for this tool-call format: commit the model by writing its opening
        forced = output_parser_class(ctx.options.tool_parser)().forced_prefix(
            spec.tool_choice.name)
        text += forced
    return RenderedPrompt(tok.encode_rendered(text, protected), protected.restore(text),
                          forced)


def output_parser_class(name: str) -> type[OutputParser]:
    """The output format `--tool-call-parser` / MODEL.toml's `tool_parser` names: a tool-call
    format, or harmony (gpt-oss's channels, which carry the reasoning too)."""
    return HarmonyParser if name == HARMONY else parser_class(name)


def bad_word_ids(tok: TextTokenizer, word: str) -> list[tuple[int, ...]]:
    """The token sequences of a bad word, as vLLM derives them: the word (leading spaces
    removed) as encoded alone, and with one leading space when that encodes to as many
    tokens starting with another one (the same word after a space, mid-text)."""
    bare = tuple(tok.encode(word.lstrip(), add_special_tokens=False))
    spaced = tuple(tok.encode(" " + word.lstrip(), add_special_tokens=False))
    out = [bare]
    if spaced and len(spaced) == len(bare) and spaced[0] != bare[0]:
        out.append(spaced)
    return out


def open_final_message(text: str, message: Mapping[str, Any]) -> str:
    """The rendered conversation `text` cut right after the final message's text, leaving
    that message open for the model to continue (the template's end of turn after it is
    dropped). Templates may trim a message's whitespace, so its stripped text is looked for
    when the whole is not there; a template that rewrites the text is a 400."""
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        raise invalid("the final message has no text to continue", "messages")
    for wanted in (content, content.strip()):
        end = text.rfind(wanted)
        if end >= 0:
            return text[:end + len(wanted)]
    raise invalid("the chat template does not keep the final message's text as given, so it "
                  "cannot be continued", "messages")


def thinking_enabled(spec: GenerationSpec, ctx: ServerContext) -> bool:
    if ctx.options.disable_thinking:
        return False
    return spec.enable_thinking if spec.enable_thinking is not None else True


def choice_seed(seed: int, index: int) -> int:
    """Choice `index`'s seed: the request's for choice 0, a splitmix64-style odd-multiple
    step away for the others (distinct for every index, never the neighbours' seed + 1)."""
    return (seed + index * 0x9E3779B97F4A7C15) % (1 << 64) if index else seed


@dataclass(slots=True)
class Outcome:
    """How a generation ended, for the response's usage and finish fields, metrics and the
    one log line per request."""

    finish_reason: str = FinishReason.ERROR   # stop | length | tool_calls | stop_sequence | error
    stop_sequence: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0   # prompt tokens the prefix cache held
    ttft_s: float | None = None
    elapsed_s: float = 0.0
    tool_calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None    # why the engine ended it with "error", when it says


class Generation:
    """Prepare in the constructor (raising ApiError on bad input), then iterate `deltas()`;
    `outcome` is complete once the iteration ends.

    A prompt that leaves no room in the context is a 400. A `max_tokens` beyond what the
    context has left is clamped (finish_reason "length"), not refused: agent clients ask
    for more output than a small context holds and expect an answer. `max_tokens` 0 (a
    legacy completion's echo alone) runs the prompt for its logprobs and drops the one
    token the engine must sample, as vLLM does.

    Prompt logprobs are asked by choice 0 of a prompt only (`sibling`s share its prompt,
    and would only recompute the same numbers): `prompt_logprobs` holds them once the
    first output came.
    """

    def __init__(self, spec: GenerationSpec, ctx: ServerContext, started: float,
                 prompt: RenderedPrompt | None = None, index: int = 0) -> None:
        """`prompt`, `index`: choice `index` of a request whose prompt is rendered already
        (see `sibling`)."""
        if ctx.engine is None:
            raise ApiError(ErrorKind.UNAVAILABLE, "the model is still loading",
                           code="model_not_loaded")
        self.spec = spec
        self.ctx = ctx
        self.started = started
        self.index = index
        #: set once the engine has the prompt's KV (the first output) or the request ended:
        #: the moment sibling choices can find the prompt in the prefix cache
        self.prefilled = asyncio.Event()
        self.prompt = prompt if prompt is not None else render_prompt(spec, ctx)
        keep = spec.truncate_prompt_tokens
        if keep is not None and len(self.prompt.ids) > keep:  # vLLM's left truncation
            self.prompt = replace(self.prompt, ids=self.prompt.ids[-keep:])
        limit = ctx.context_limit
        n = len(self.prompt.ids)
        if n == 0:
            raise invalid("the prompt is empty", "messages" if spec.messages else "prompt")
        if n >= limit:
            raise invalid(f"the prompt has {n} tokens; this model's context holds {limit} "
                          "tokens including the completion", "messages" if spec.messages
                          else "prompt")
        if spec.priority and not ctx.scheduling_priority:
            raise invalid("priority needs the priority scheduling policy (start the server "
                          "with --scheduling-policy priority)", "priority")
        #: max_tokens 0: the prompt alone (its logprobs), no output
        self.prompt_only = spec.max_tokens == 0
        self.max_tokens = 1 if self.prompt_only else min(spec.max_tokens or limit, limit - n)
        #: the prompt's logprobs from its second token on (`spec.prompt_top_n`), once known
        self.prompt_logprobs: tuple[TokenLogprobs, ...] | None = None
        #: `spec.embed`: the prompt's last-token final-norm hidden state, once known
        self.embedding: np.ndarray | None = None
        self.outcome = Outcome(prompt_tokens=n)
        self.grammar = self._grammar()
        self.stream = self._make_stream()
        self.request = self._make_request()

    def sibling(self, index: int) -> "Generation":
        """Choice `index` (n > 1) of the same request: the same prompt, its own seed derived
        from the request's (so the choices are independent yet reproducible; a request
        without a seed leaves each choice to the engine's fresh seeds)."""
        spec = self.spec
        seed = spec.sampling.seed
        if seed is not None:
            spec = replace(spec, sampling=replace(spec.sampling,
                                                  seed=choice_seed(seed, index)))
        return Generation(spec, self.ctx, self.started, self.prompt, index)

    def _make_stream(self) -> ResponseStream:
        tok, spec, name = self.ctx.tokenizer, self.spec, self.ctx.options.tool_parser
        output = output_parser_class(name) if name else None
        splits = output is not None and output.splits_reasoning
        chat = spec.messages is not None
        reasoning = None
        if chat and not splits and tok.token_id(THINK_OPEN) is not None:
            reasoning = ReasoningParser(
                starts_in_thinking=prompt_opens_thinking(self.prompt.text[-256:]),
                emit_reasoning=thinking_enabled(spec, self.ctx),
                verbatim_answer=self.grammar is not None)
        use_tools = bool(spec.tools) and spec.tool_choice.mode != "none"
        schemas = {t["function"]["name"]: t["function"]["parameters"]
                   for t in spec.tools or ()}
        max_calls = None if spec.parallel_tool_calls else 1
        tools: OutputParser | None = None
        if output is not None and splits and chat:   # the whole answer's format
            tools = output(schemas, max_calls=max_calls, use_tools=use_tools,
                           emit_reasoning=thinking_enabled(spec, self.ctx),
                           verbatim_answer=self.grammar is not None)
        elif output is not None and use_tools and not splits:
            tools = output(schemas, max_calls=max_calls)
        decode = tok.decoder(spec.skip_special_tokens,
                             keep=tools.special_markers if tools is not None else ())
        return ResponseStream(decode, context_ids=self.prompt.ids, stops=spec.stop,
                              hidden_ids=self.ctx.tokenizer.eos_token_ids | self._stop_ids(),
                              reasoning=reasoning, tools=tools,
                              forced_prefix=self.prompt.forced_prefix,
                              min_tokens=spec.min_tokens, keep_stop=spec.include_stop_str)

    def _stop_ids(self) -> frozenset[int]:
        """The tokens that end the output: the request's, and the model's EOS tokens unless
        `ignore_eos` (they are still never shown as text)."""
        eos = frozenset() if self.spec.ignore_eos else self.ctx.tokenizer.eos_token_ids
        return eos | frozenset(self.spec.stop_token_ids)

    def _make_request(self) -> EngineRequest:
        timeout = self.ctx.options.request_timeout_s
        masks = self._logit_masks()
        return EngineRequest(self.prompt.ids, self._sampling(), self.max_tokens,
                             stop_token_ids=self._stop_ids(),
                             deadline=self.started + timeout if timeout else None,
                             thinking=self._thinking_budget(), grammar=self.grammar,
                             logprobs=self.spec.logprobs, min_tokens=self.spec.min_tokens,
                             prompt_logprobs=self.spec.prompt_top_n if self.index == 0
                             else None, priority=self.spec.priority, embed=self.spec.embed,
                             **masks)

    def _sampling(self) -> SamplingParams:
        """The spec's sampling with `logit_bias`'s values strictly between the mask values
        (-100 and 100 are `_logit_masks`'; 0 changes nothing), which the GPU sampler adds to
        the logits after the penalties."""
        bias = {t: b for t, b in self.spec.logit_bias.items()
                if -LOGIT_BIAS_LIMIT < b < LOGIT_BIAS_LIMIT and b != 0}
        return replace(self.spec.sampling, logit_bias=bias) if bias else self.spec.sampling

    def _logit_masks(self) -> dict[str, Any]:
        """`logit_bias`, `allowed_token_ids` and `bad_words` as the engine's token masks:
        -100 bans a token; 100 makes the 100-biased tokens the only ones drawn, and
        allowed_token_ids the listed ones (both: those in both); a bad word of one token is
        banned, a longer one masked where it would complete (`bad_word_ids`). An id outside
        the vocabulary (the tokenizer's, and the model's logits), or nothing left to draw,
        is a 400."""
        spec, tok = self.spec, self.ctx.tokenizer
        structured = self.ctx.structured
        logits = structured.vocab_size if structured is not None else tok.vocab_size
        for name, ids in (("logit_bias", list(spec.logit_bias)),
                          ("allowed_token_ids", spec.allowed_token_ids or [])):
            bad = [t for t in ids if not (tok.is_valid_id(t) and t < logits)]
            if bad:
                raise invalid(f"{name} token ids out of vocabulary: {bad[:5]}", name)
        allowed = frozenset(t for t, b in spec.logit_bias.items()
                            if b >= LOGIT_BIAS_LIMIT) or None
        if spec.allowed_token_ids is not None:
            listed = frozenset(spec.allowed_token_ids)
            allowed = listed if allowed is None else allowed & listed
            if not allowed:
                raise invalid("logit_bias and allowed_token_ids leave no token to draw",
                              "allowed_token_ids")
        words = {w for word in spec.bad_words for w in bad_word_ids(tok, word)}
        return {"banned_tokens": frozenset(t for t, b in spec.logit_bias.items()
                                           if b <= -LOGIT_BIAS_LIMIT)
                | {w[0] for w in words if len(w) == 1},
                "allowed_tokens": allowed,
                "bad_words": tuple(sorted(w for w in words if len(w) > 1))}

    def _grammar(self) -> GrammarRequest | None:
        """The grammar this request's output must follow (response_format, forced tool
        calls); it starts after the reasoning block when thinking is on."""
        structured, spec = self.ctx.structured, self.spec
        grammar = structured.grammar_for(spec) if structured is not None else None
        if grammar is None:
            return None
        assert structured is not None
        thinking = spec.messages is not None and thinking_enabled(spec, self.ctx)
        return structured.request(grammar, thinking,
                                  prompt_opens_thinking(self.prompt.text[-256:]))

    def _thinking_budget(self) -> ThinkingBudget | None:
        tok, spec = self.ctx.tokenizer, self.spec
        budgets = [b for b in (spec.thinking_budget, self.ctx.options.max_thinking_budget) if b]
        close = tok.token_id(THINK_CLOSE)
        if not budgets or close is None or spec.messages is None:
            return None
        return ThinkingBudget(open_id=tok.token_id(THINK_OPEN), close_ids=(close,),
                              budget=min(budgets),
                              starts_inside=prompt_opens_thinking(self.prompt.text[-256:]))

    async def deltas(self) -> AsyncIterator[StreamDelta]:
        assert self.ctx.engine is not None
        outcome, reason = self.outcome, FinishReason.ERROR
        # aclosing: leaving early (a stop string, a disconnect) aborts the sequence at once
        hidden = self._stop_ids()
        async with aclosing(self.ctx.engine.generate(self.request)) as outputs:
            async for out in outputs:
                if out.prompt_logprobs is not None:
                    self.prompt_logprobs = out.prompt_logprobs
                if out.embedding is not None:
                    self.embedding = out.embedding
                self.prefilled.set()
                new = () if self.prompt_only else out.new_token_ids
                outcome.completion_tokens = 0 if self.prompt_only else out.num_output_tokens
                outcome.cached_tokens = out.num_cached_tokens
                outcome.error = out.error
                if out.new_token_ids and outcome.ttft_s is None:
                    outcome.ttft_s = time.monotonic() - self.started
                    self.ctx.metrics.record_ttft(outcome.ttft_s)
                delta = self.stream.push(new)
                delta.logprobs = [lp for t, lp in zip(new, out.logprobs)
                                  if lp is not None and t not in hidden]
                done = out.finish_reason is not None or self.stream.matched_stop is not None
                if done:
                    reason = ("stop_sequence" if self.stream.matched_stop is not None
                              else out.finish_reason)
                    delta.extend(self.stream.finish())
                if delta:
                    yield delta
                if done:
                    break
        self.prefilled.set()
        outcome.elapsed_s = time.monotonic() - self.started
        outcome.tool_calls = list(self.stream.tool_calls)
        outcome.stop_sequence = self.stream.matched_stop
        outcome.finish_reason = self._final_reason(reason)

    def _final_reason(self, reason: str) -> str:
        if self.prompt_only and reason != FinishReason.ERROR:
            return "length"   # the budget of 0 output tokens ended it
        if reason == "stop_sequence":
            return reason
        if reason in (FinishReason.LENGTH, FinishReason.TIMEOUT):
            return "length"
        if reason == FinishReason.STOP:
            return "tool_calls" if self.outcome.tool_calls else "stop"
        return "error"
