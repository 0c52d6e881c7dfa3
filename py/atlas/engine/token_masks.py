"""Token masks beyond grammars, on the sampler's mask path (docs/grammar.md "On the GPU"),
composed with a grammar's mask where both apply:

* `min_tokens`: a sequence may not draw a stop token before its first `min_tokens` output
  tokens. As in vLLM, the stop tokens are masked out of those draws (not merely not acted
  on), so the text never holds a stop token it did not end on.
* OpenAI's `logit_bias` at its two documented extremes: -100 bans a token, 100 makes the
  100-biased tokens the only ones drawn ("exclusive selection"); vLLM's `allowed_token_ids`
  is the latter. (A value between is no mask: SamplingParams.logit_bias, added to the
  logits by the sampler's penalty launch.)
* vLLM's `bad_words`: a one-token word is banned from every draw; a longer one bans its last
  token from the draws that would complete it (`bad_word_bans`: its other tokens end the
  output so far; like vLLM, the prompt does not count). Such a mask depends on the last
  tokens, so these requests step synchronously, as grammars do.
"""

from __future__ import annotations

import numpy as np

from collections.abc import Sequence

from ..model.batch import TokenMaskFiller

_ALL_ALLOWED = np.uint32(0xFFFFFFFF)


def restricting(base: TokenMaskFiller | None = None, banned: frozenset[int] = frozenset(),
                allowed: frozenset[int] | None = None) -> TokenMaskFiller:
    """A mask allowing what `base` allows (every token when None), only `allowed` of those
    when given, and none of `banned`."""
    clear = [(t // 32, ~np.uint32(1 << (t % 32))) for t in sorted(banned)]
    only: dict[int, np.ndarray] = {}  # the allowed set as a mask row, by row width

    def allowed_row(width: int) -> np.ndarray:
        if width not in only:
            row = np.zeros(width, np.uint32)
            for t in allowed or ():
                if t // 32 < width:
                    row[t // 32] |= np.uint32(1 << (t % 32))
            only[width] = row
        return only[width]

    def fill(bitmask: np.ndarray, row: int) -> None:
        if base is None:
            bitmask[row] = _ALL_ALLOWED
        else:
            base(bitmask, row)
        if allowed is not None:
            bitmask[row] &= allowed_row(bitmask.shape[1])
        for word, keep in clear:
            if word < bitmask.shape[1]:
                bitmask[row, word] &= keep

    return fill


def bad_word_bans(bad_words: Sequence[Sequence[int]], output: Sequence[int]) -> frozenset[int]:
    """The last tokens of the multi-token `bad_words` whose other tokens end `output`: the
    draws that would complete a bad word now."""
    banned = set()
    for word in bad_words:
        head = len(word) - 1
        if head <= len(output) and list(output[len(output) - head:]) == list(word[:head]):
            banned.add(word[-1])
    return frozenset(banned)
