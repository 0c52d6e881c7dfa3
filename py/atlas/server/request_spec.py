"""What a validated request asks for, independent of which API it came through.

The OpenAI and Anthropic protocol modules both produce a `GenerationSpec`; everything after
(templating, tokenizing, scheduling, parsing the output) is shared. Also here: the sampling
defaults a request gets for the fields it leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping

from ..core.sampling import SamplingParams

if TYPE_CHECKING:
    from .structured import ResponseFormat


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """auto | none | required, or `name` for one named function."""

    mode: str = "auto"
    name: str | None = None

    @property
    def forces_call(self) -> bool:
        return self.mode in ("required", "named")


@dataclass(slots=True)
class GenerationSpec:
    model: str
    sampling: SamplingParams
    max_tokens: int | None
    messages: list[dict[str, Any]] | None = None     # chat (OpenAI message shape)
    prompt: str | list[int] | None = None            # raw completion
    #: a legacy completion's further prompts (each with its `n` choices, after `prompt`'s)
    more_prompts: list[str | list[int]] = field(default_factory=list)
    #: a legacy completion's text starts with its prompt
    echo: bool = False
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    tools: list[dict[str, Any]] | None = None        # OpenAI {"type": "function", ...}
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    parallel_tool_calls: bool = True
    stream: bool = False
    include_usage: bool = False
    enable_thinking: bool | None = None
    thinking_budget: int | None = None
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    add_generation_prompt: bool = True
    #: the final message is left open for the model to continue (Anthropic's prefill of an
    #: assistant turn, vLLM's `continue_final_message`): rendered without a generation prompt
    #: and cut right after that message's text, so the answer is its continuation
    continue_final_message: bool = False
    response_format: "ResponseFormat | None" = None   # None: text
    #: report each output token's logprob with this many alternatives (None: no logprobs)
    logprobs: int | None = None
    #: vLLM's prompt_logprobs: each prompt token's logprob with this many alternatives
    prompt_logprobs: int | None = None
    #: independent choices to generate for the one prompt
    n: int = 1
    #: vLLM's extensions: the model's EOS tokens do not end the output (`ignore_eos`); no
    #: stop token may be drawn nor stop string end it before `min_tokens` output tokens
    ignore_eos: bool = False
    min_tokens: int = 0
    #: vLLM's include_stop_str_in_output: a matched stop string stays in the text
    include_stop_str: bool = False
    #: vLLM's: special tokens' text left out of the output (the default) or shown; the
    #: prompt cut to its last `truncate_prompt_tokens` tokens
    skip_special_tokens: bool = True
    truncate_prompt_tokens: int | None = None
    #: OpenAI's logit_bias, token id -> bias in [-100, 100]: -100 never drawn, 100 the only
    #: tokens drawn, a value between added to the token's logit
    logit_bias: dict[int, float] = field(default_factory=dict)
    #: vLLM's: the request's place in the queue under the priority policy (lower first)
    priority: int = 0
    #: /v1/embeddings: the prompt's last-token final-norm hidden state is the answer (with
    #: max_tokens 0: no text)
    embed: bool = False
    #: vLLM's: the only tokens drawn (None: any), and strings the output never contains
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] = field(default_factory=list)

    @property
    def prompt_top_n(self) -> int | None:
        """Alternatives the engine must report per prompt token (None: no prompt logprobs):
        `prompt_logprobs`, and a legacy completion's `logprobs` with `echo` (its prompt
        tokens are reported like the generated ones); each response trims to its own."""
        asked = [n for n in (self.prompt_logprobs, self.logprobs if self.echo else None)
                 if n is not None]
        return max(asked, default=None)


#: sampling fields a model's generation_config.json may set (Hugging Face names = ours)
GENERATION_CONFIG_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
#: what a request gets when neither the checkpoint nor MODEL.toml says: greedy, the same
#: default `atlas generate` has, so the server and the CLI answer a question the same way
ATLAS_DEFAULT_SAMPLING = SamplingParams(temperature=0.0)


def request_defaults(generation_config: Mapping[str, Any],
                     preset: SamplingParams | None) -> tuple[SamplingParams, str]:
    """The sampling a request gets for fields it leaves out, and where it came from.

    The checkpoint's generation_config.json wins (its author's choice for this checkpoint),
    on top of MODEL.toml's `[presets.default]` (the family's), on top of greedy. A
    generation_config with sampling fields but `do_sample: false` means greedy, as in
    transformers; one without sampling fields (token ids only) says nothing.
    """
    base, source = ((preset, "MODEL.toml [presets.default]") if preset is not None
                    else (ATLAS_DEFAULT_SAMPLING, "the Atlas default (greedy)"))
    fields = {k: generation_config[k] for k in GENERATION_CONFIG_FIELDS
              if isinstance(generation_config.get(k), (int, float))
              and not isinstance(generation_config.get(k), bool)}
    if not fields:
        return base, source
    if generation_config.get("do_sample") is False:
        fields["temperature"] = 0.0
    params = replace(base, **fields)
    params.validate()
    return params, "generation_config.json"
