"""`min_tokens`: a sequence may not draw a stop token before its first `min_tokens` output
tokens. As in vLLM, the stop tokens are masked out of those draws (not merely not acted on),
so the text never holds a stop token it did not end on; it rides on the sampler's token
masks (docs/grammar.md "On the GPU"), composed with a grammar's mask where both apply."""

from __future__ import annotations

import numpy as np

from ..model.batch import TokenMaskFiller

_ALL_ALLOWED = np.uint32(0xFFFFFFFF)


def banning(ids: frozenset[int], base: TokenMaskFiller | None = None) -> TokenMaskFiller:
    """A mask allowing what `base` allows (every token when None) except `ids`."""
    words = [(t // 32, ~np.uint32(1 << (t % 32))) for t in sorted(ids)]

    def fill(bitmask: np.ndarray, row: int) -> None:
        if base is None:
            bitmask[row] = _ALL_ALLOWED
        else:
            base(bitmask, row)
        for word, keep in words:
            if word < bitmask.shape[1]:
                bitmask[row, word] &= keep

    return fill
