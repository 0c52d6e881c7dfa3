"""What a caller hands the engine (`EngineRequest`) and what it gets back (`EngineOutput`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.sampling import SamplingParams
from ..model.batch import TokenLogprobs
from .grammar_state import GrammarRequest


@dataclass(frozen=True, slots=True)
class ThinkingBudget:
    """Cap on reasoning tokens: after `budget` tokens inside a think block, the close tokens
    are forced in place of what the model would sample."""

    open_id: int | None
    close_ids: tuple[int, ...]
    budget: int
    starts_inside: bool = False


@dataclass(slots=True)
class EngineRequest:
    """One request as the engine sees it: tokens, sampling, limits, and when to give up."""

    prompt_ids: list[int]
    sampling: SamplingParams
    max_tokens: int
    stop_token_ids: frozenset[int] = frozenset()
    deadline: float | None = None
    thinking: ThinkingBudget | None = None
    #: structured output: every generated token follows this grammar
    grammar: GrammarRequest | None = None
    #: report each generated token's logprob and this many alternatives (None: no logprobs)
    logprobs: int | None = None
    #: report each prompt token's logprob (from the first on, given the tokens before it)
    #: and this many alternatives, from the raw logits (None: none). Such a sequence is
    #: admitted without prefix-cache reuse and its prefill chunks are cut to the logits
    #: rows a step has (engine/prompt_logprobs.py)
    prompt_logprobs: int | None = None
    #: output tokens drawn before a stop token may be: until then `stop_token_ids` are
    #: masked out of the draws (engine/token_masks.py)
    min_tokens: int = 0
    #: tokens never drawn, and (when not None) the only tokens drawn: OpenAI's logit_bias at
    #: -100 and 100, vLLM's allowed_token_ids and one-token bad words (engine/token_masks.py)
    banned_tokens: frozenset[int] = frozenset()
    allowed_tokens: frozenset[int] | None = None
    #: token sequences of two or more tokens the output never ends with: a draw that would
    #: complete one (its other tokens end the output so far) is masked (vLLM's bad_words)
    bad_words: tuple[tuple[int, ...], ...] = ()
    #: the queue's order under the priority policy (lower first; scheduling_policy.py)
    priority: int = 0
    #: report the prompt's last-token final-norm hidden state (an embedding model's pooled
    #: output, /v1/embeddings) with the request's first output
    embed: bool = False


class FinishReason:
    STOP = "stop"          # a stop token id (or the caller's stop check)
    LENGTH = "length"      # max_tokens or the context limit
    ABORT = "abort"        # the client went away
    TIMEOUT = "timeout"    # --request-timeout
    ERROR = "error"        # the executor failed, or the grammar reached a dead end


@dataclass(frozen=True, slots=True)
class EngineOutput:
    """What one step produced for one request: its new tokens, and the reason once it ends."""

    seq_id: int
    new_token_ids: tuple[int, ...]
    finish_reason: str | None
    num_prompt_tokens: int
    num_output_tokens: int
    num_cached_tokens: int = 0
    #: why a request ended with "error", when the engine knows (a grammar dead end)
    error: str | None = None
    #: with `EngineRequest.logprobs`: one entry per new token (None for a forced token)
    logprobs: tuple[TokenLogprobs | None, ...] = ()
    #: with `EngineRequest.prompt_logprobs`, on the request's first output with tokens:
    #: prompt tokens 1 .. P - 1's logprobs (token 0 has none)
    prompt_logprobs: tuple[TokenLogprobs, ...] | None = None
    #: with `EngineRequest.embed`, on the same output: the last prompt token's final-norm
    #: hidden state, float32 [hidden]
    embedding: np.ndarray | None = None
