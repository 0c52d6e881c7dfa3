"""ATLAS_DECODE_ATTN_LONG_EARLY: the rope-fused long-attention entries that read all but the
qkv rows before their PDL wait (one sequence only), and the whole-tile split rule their
merging launches follow (ops/attention_long.early_split_rule)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from atlas.runtime.kernel_abi import (DECODE_ATTN_LONG_ROPE_EARLY,
                                      DECODE_ATTN_LONG_ROPE_EARLY_LATE,
                                      DECODE_ATTN_LONG_ROPE_STAGED, DECODE_ATTN_LONG_ROPE_WAIT)
from atlas.runtime.ops.attention import decode_split_rule
from atlas.runtime.ops.attention_long import (LONG_TILE_KEYS, early_split_rule,
                                              long_rope_kernel_for)
from atlas.runtime.ops.routes import KernelRoutes


def test_the_routes_pick_the_early_entries_at_one_sequence() -> None:
    routes = KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LONG_EARLY": "1"})
    assert routes.decode_attn_long_early
    # (padded heads or sinks: their _exact twins, test_attention_long_exact.py, take the rest)
    assert long_rope_kernel_for(routes, 1, exact=False) is DECODE_ATTN_LONG_ROPE_EARLY
    late = replace(routes, decode_attn_long_late_trigger=True)
    assert long_rope_kernel_for(late, 1, exact=False) is DECODE_ATTN_LONG_ROPE_EARLY_LATE
    # a batch's blocks keep waiting on entry (a second wave would hold SMs before its wait)
    assert long_rope_kernel_for(routes, 2) is DECODE_ATTN_LONG_ROPE_STAGED
    assert long_rope_kernel_for(replace(routes, decode_attn_long_staged=False), 1) \
        is DECODE_ATTN_LONG_ROPE_WAIT
    assert KernelRoutes().decode_attn_long_early  # the default since gpu62
    off = KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LONG_EARLY": "0"})
    assert long_rope_kernel_for(off, 1) is DECODE_ATTN_LONG_ROPE_STAGED


@pytest.mark.parametrize("num_splits", [1, 3, 16, 30, 33, 64])
def test_whole_tiles_never_lengthen_a_split(num_splits: int) -> None:
    for kv_len in range(0, 5000, 7):
        chunk, active = early_split_rule(kv_len, num_splits)
        base_chunk, base_active = decode_split_rule(kv_len, num_splits)
        assert chunk % LONG_TILE_KEYS == 0 and active <= num_splits
        # the splits cover [0, kv_len) and the last active one holds a key
        assert active * chunk >= kv_len > (active - 1) * chunk or kv_len == active == 0
        # as many tiles as the plain rule's longest split, and no more splits
        assert -(-chunk // LONG_TILE_KEYS) == max(1, -(-base_chunk // LONG_TILE_KEYS))
        assert active <= base_active


def test_short_contexts_merge_fewer_partials() -> None:
    # Qwen3-0.6B's batch-1 grid of 30 splits at 568 keys: 18 splits of 32 keys before
    assert decode_split_rule(568, 30) == (32, 18)
    assert early_split_rule(568, 30) == (64, 9)
    assert early_split_rule(2500, 30) == (128, 20)
