"""Preflight: one synthetic prefill and decode step before the server binds.

Shape mismatches, kernels missing from the PTX set, launch-configuration errors and
out-of-range outputs show up here as one clear error at startup, not on the first request.
A mixture-of-experts model prefills the largest chunk the runner takes (what the KV pool
holds of it): its routing scratch is sized for that step, and only steps of more than
`ops.moe.DECODE_MAX_TOKENS` tokens run the grouped expert kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.sampling import GREEDY
from .batch import PenaltyHistory, SeqChunk

if TYPE_CHECKING:
    from .runner import ModelRunner

PREFLIGHT_SEQ = -1_000_000


class PreflightError(RuntimeError):
    """The synthetic step failed; the message says which part."""


def preflight_tokens(runner: "ModelRunner") -> int:
    """Prompt length of the synthetic prefill (see the module docstring)."""
    if runner.cfg.moe is None:
        return min(8, runner.limits.max_prefill_tokens, runner.max_seq_len - 1)
    return max(1, min(runner.limits.max_prefill_tokens, runner.max_seq_len - 1,
                      runner.num_kv_blocks * runner.block_size - 1))


def preflight(runner: "ModelRunner") -> None:
    n = preflight_tokens(runner)
    blocks = list(range(-(-(n + 1) // runner.block_size)))
    if len(blocks) > runner.num_kv_blocks:
        raise PreflightError(f"KV pool of {runner.num_kv_blocks} blocks cannot hold a "
                             f"{n + 1}-token sequence")
    prompt = [(7 * i + 1) % runner.vocab_size for i in range(n)]
    try:
        first = runner.execute([SeqChunk(PREFLIGHT_SEQ, prompt, 0, blocks, GREEDY,
                                         history=PenaltyHistory(prompt))])[0]
        second = runner.execute([SeqChunk(PREFLIGHT_SEQ, [int(first or 0)], n, blocks,
                                          GREEDY, rng_position=1)])[0]
    except Exception as exc:  # re-raised with context: the caller sees one clear line
        raise PreflightError(f"preflight step failed: {type(exc).__name__}: {exc}") from exc
    finally:
        runner.release(PREFLIGHT_SEQ)
    for label, tok in (("prefill", first), ("decode", second)):
        if tok is None or not 0 <= tok < runner.vocab_size:
            raise PreflightError(f"preflight {label} sampled token {tok!r}, outside the "
                                 f"vocabulary 0..{runner.vocab_size - 1}")
