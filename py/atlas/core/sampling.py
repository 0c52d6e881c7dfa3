"""SamplingParams: what a request asks of the sampler. Validated here, applied on the GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Per-request sampling settings.

    temperature 0 means greedy. top_k 0 means no top-k limit. repetition_penalty 1 and
    presence/frequency 0 are neutral. A repetition_penalty of 0 is treated as neutral (1):
    dividing by it would produce inf/NaN logits.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None

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


GREEDY = SamplingParams(temperature=0.0)
