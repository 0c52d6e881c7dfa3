"""ATLAS_DECODE_ATTN_LONG_DEEP: the staged entry's deep-ring twin (attention_long.cu Deep):
which launches take it, its shared memory and the split count of one block an SM."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from atlas.runtime.kernel_abi import (DECODE_ATTN_LONG_ROPE_EARLY, DECODE_ATTN_LONG_ROPE_LATE,
                                      DECODE_ATTN_LONG_ROPE_STAGED,
                                      DECODE_ATTN_LONG_ROPE_STAGED_DEEP)
from atlas.runtime.ops import attention_long
from atlas.runtime.ops.attention_long import (long_decode_splits, long_rope_kernel_for,
                                              long_smem_bytes)
from atlas.runtime.ops.routes import KernelRoutes

SOURCE = (Path(__file__).resolve().parents[2] / "kernels" / "hopper" / "common"
          / "attention_long.cu").read_text()


def test_batches_take_the_twin_when_switched_on() -> None:
    routes = KernelRoutes()
    assert routes.decode_attn_long_deep is False
    assert long_rope_kernel_for(routes, 64) is DECODE_ATTN_LONG_ROPE_STAGED
    deep = replace(routes, decode_attn_long_deep=True)
    assert long_rope_kernel_for(deep, 64) is DECODE_ATTN_LONG_ROPE_STAGED_DEEP
    assert long_rope_kernel_for(deep, 2) is DECODE_ATTN_LONG_ROPE_STAGED_DEEP
    # batch 1 keeps its early entry, the late trigger its own twin
    assert long_rope_kernel_for(deep, 1) is DECODE_ATTN_LONG_ROPE_EARLY
    late = replace(deep, decode_attn_long_early=False, decode_attn_long_late_trigger=True)
    assert long_rope_kernel_for(late, 1) is DECODE_ATTN_LONG_ROPE_LATE
    assert KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LONG_DEEP": "1"}).decode_attn_long_deep


def test_one_block_an_sm_fits_the_deep_ring() -> None:
    stages = int(re.search(r"kDeepStages = (\d+);", SOURCE).group(1))
    assert attention_long.LONG_DEEP_STAGES == stages
    assert "decode_attn_long_rope_staged_deep_bf16" in SOURCE
    assert "__launch_bounds__(kThreads, 1)\n    decode_attn_long_rope_staged_deep_bf16" in SOURCE
    for d in (64, 128):
        deep = long_smem_bytes(d, True, stages)
        assert deep == long_smem_bytes(d, True) + (stages - 3) * 2 * 64 * d * 2
        assert deep + 1024 <= 228 * 1024  # one block an SM
    assert 2 * (long_smem_bytes(128, True, stages) + 1024) > 228 * 1024  # not two
    assert attention_long.long_blocks_per_sm(128, deep=True) == 1


def test_split_counts_fill_one_block_an_sm() -> None:
    # Qwen3-8B batch 64: 512 pairs fill 132 slots in 3.9 waves at one split either way;
    # batch 8's 64 pairs: 2 splits fill one block an SM, 4 the two-block kernel's 264 slots
    assert long_decode_splits(512, 1536, 132, blocks_per_sm=1, min_split_keys=64) == 1
    assert long_decode_splits(64, 4096, 132, blocks_per_sm=1, min_split_keys=64) == 2
    assert long_decode_splits(64, 4096, 132, blocks_per_sm=2, min_split_keys=64) == 4
