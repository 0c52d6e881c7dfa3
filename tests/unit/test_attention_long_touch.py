"""ATLAS_DECODE_ATTN_LONG_TOUCH: which launches take the staged entry's page-touching twin
(attention_long.cu TouchPages)."""

from __future__ import annotations

from dataclasses import replace

from atlas.runtime.kernel_abi import (DECODE_ATTN_LONG_ROPE_EARLY, DECODE_ATTN_LONG_ROPE_LATE,
                                      DECODE_ATTN_LONG_ROPE_STAGED,
                                      DECODE_ATTN_LONG_ROPE_STAGED_TOUCH,
                                      DECODE_ATTN_LONG_ROPE_WAIT)
from atlas.runtime.ops.attention_long import long_rope_kernel_for
from atlas.runtime.ops.routes import KernelRoutes


def test_batches_take_the_twin_when_switched_on() -> None:
    routes = KernelRoutes()
    assert routes.decode_attn_long_touch is False
    assert long_rope_kernel_for(routes, 64) is DECODE_ATTN_LONG_ROPE_STAGED
    touch = replace(routes, decode_attn_long_touch=True)
    assert long_rope_kernel_for(touch, 64) is DECODE_ATTN_LONG_ROPE_STAGED_TOUCH
    assert long_rope_kernel_for(touch, 2) is DECODE_ATTN_LONG_ROPE_STAGED_TOUCH
    # batch 1 keeps its early entry, the late trigger its own twin, the waiting prologue its
    assert long_rope_kernel_for(touch, 1) is DECODE_ATTN_LONG_ROPE_EARLY
    late = replace(touch, decode_attn_long_early=False, decode_attn_long_late_trigger=True)
    assert long_rope_kernel_for(late, 1) is DECODE_ATTN_LONG_ROPE_LATE
    assert long_rope_kernel_for(replace(touch, decode_attn_long_staged=False), 64) \
        is DECODE_ATTN_LONG_ROPE_WAIT
    env = KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LONG_TOUCH": "1"})
    assert env.decode_attn_long_touch is True
