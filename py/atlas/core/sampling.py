"""SamplingParams: what a request asks of the sampler. Validated here, applied on the GPU."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

#: the most logit biases one request may carry: the sampler keeps this many (token, bias)
#: entries per sequence slot on the device ([slots, MAX_LOGIT_BIAS] ids and values), and the
#: server rejects a `logit_bias` with more entries (a 400 naming the limit)
MAX_LOGIT_BIAS = 300
#: the range of a logit bias (OpenAI's); the server applies the two ends as token masks
LOGIT_BIAS_LIMIT = 100.0


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Per-request sampling settings.

    temperature 0 means greedy. top_k 0 means no top-k limit. repetition_penalty 1 and
    presence/frequency 0 are neutral. A repetition_penalty of 0 is treated as neutral (1):
    dividing by it would produce inf/NaN logits. `logit_bias` is (token id, bias) pairs,
    sorted by id without repeats (a mapping or any iterable of pairs, such as a JSON list of
    lists, is normalized to that), each bias added to its token's logit after the penalties.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    logit_bias: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        bias = self.logit_bias
        if bias:  # the canonical form: hashable, sorted by id, plain ints and floats
            pairs = bias.items() if isinstance(bias, Mapping) else bias
            object.__setattr__(self, "logit_bias",
                               tuple(sorted((int(t), float(b)) for t, b in pairs)))
        elif not isinstance(bias, tuple):
            object.__setattr__(self, "logit_bias", ())

    @property
    def is_greedy(self) -> bool:
        return self.temperature <= 0.0

    @property
    def has_penalties(self) -> bool:
        return (self.effective_repetition_penalty != 1.0 or self.presence_penalty != 0.0
                or self.frequency_penalty != 0.0)

    @property
    def effective_repetition_penalty(self) -> float:
        return 1.0 if self.repetition_penalty <= 0.0 else self.repetition_penalty

    def validate(self) -> None:
        """Raise ValueError naming the first out-of-range field.

        Every float must be finite. Infinity passes the range checks below, yet an infinite
        temperature scales logits by 1/inf = 0, and a masked (-inf) logit times 0 is NaN.
        """
        for name in ("temperature", "top_p", "min_p", "repetition_penalty",
                     "presence_penalty", "frequency_penalty"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name}={getattr(self, name)!r} is not a finite number")
        checks = [
            ("temperature", self.temperature >= 0.0),
            ("top_p", 0.0 < self.top_p <= 1.0),
            ("top_k", self.top_k >= 0),
            ("min_p", 0.0 <= self.min_p <= 1.0),
            ("repetition_penalty", self.repetition_penalty >= 0.0),
            ("presence_penalty", -2.0 <= self.presence_penalty <= 2.0),
            ("frequency_penalty", -2.0 <= self.frequency_penalty <= 2.0),
        ]
        for name, ok in checks:
            if not ok:
                raise ValueError(f"{name}={getattr(self, name)!r} is out of range")
        self._validate_logit_bias()

    def _validate_logit_bias(self) -> None:
        entries = self.logit_bias
        if len(entries) > MAX_LOGIT_BIAS:
            raise ValueError(f"logit_bias has {len(entries)} entries; at most "
                             f"{MAX_LOGIT_BIAS} are allowed")
        previous = -1
        for token, bias in entries:
            if token <= previous:
                raise ValueError(f"logit_bias token {token} must be an id >= 0, listed once")
            if not (math.isfinite(bias) and -LOGIT_BIAS_LIMIT <= bias <= LOGIT_BIAS_LIMIT):
                raise ValueError(f"logit_bias[{token}]={bias!r} is not a finite number in "
                                 f"[{-LOGIT_BIAS_LIMIT:g}, {LOGIT_BIAS_LIMIT:g}]")
            previous = token


GREEDY = SamplingParams(temperature=0.0)
