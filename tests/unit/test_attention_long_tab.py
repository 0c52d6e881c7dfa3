"""ATLAS_DECODE_ATTN_LONG_TAB: the staged entry's table-window twin (attention_long.cu
TableWindow): which launches take it, the shared memory its window adds, and that its
constants mirror the kernel's."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from atlas.runtime.kernel_abi import (DECODE_ATTN_LONG_ROPE_EARLY, DECODE_ATTN_LONG_ROPE_LATE,
                                      DECODE_ATTN_LONG_ROPE_STAGED,
                                      DECODE_ATTN_LONG_ROPE_STAGED_TAB)
from atlas.runtime.ops import attention_long
from atlas.runtime.ops.attention_long import long_rope_kernel_for, long_smem_bytes
from atlas.runtime.ops.routes import KernelRoutes

SOURCE = (Path(__file__).resolve().parents[2] / "kernels" / "hopper" / "common"
          / "attention_long.cu").read_text()


def test_batches_take_the_twin_when_switched_on() -> None:
    routes = KernelRoutes()
    assert routes.decode_attn_long_tab is False
    assert long_rope_kernel_for(routes, 64) is DECODE_ATTN_LONG_ROPE_STAGED
    tab = replace(routes, decode_attn_long_tab=True)
    assert long_rope_kernel_for(tab, 64) is DECODE_ATTN_LONG_ROPE_STAGED_TAB
    assert long_rope_kernel_for(tab, 2) is DECODE_ATTN_LONG_ROPE_STAGED_TAB
    # batch 1 keeps its early entry, and the late trigger its own twin
    assert long_rope_kernel_for(tab, 1) is DECODE_ATTN_LONG_ROPE_EARLY
    late = replace(tab, decode_attn_long_early=False, decode_attn_long_late_trigger=True)
    assert long_rope_kernel_for(late, 1) is DECODE_ATTN_LONG_ROPE_LATE
    env = KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LONG_TAB": "1"})
    assert env.decode_attn_long_tab is True


def test_the_window_follows_the_stage() -> None:
    entries = int(re.search(r"kTabEntries = (\d+);", SOURCE).group(1))
    assert attention_long.LONG_TAB_ENTRIES == entries
    for d in (64, 128):
        assert long_smem_bytes(d, True, tab=True) == long_smem_bytes(d, True) + 4 * entries
        # two blocks an SM still fit (1 KiB reserved a block)
        assert 2 * (long_smem_bytes(d, True, tab=True) + 1024) <= 228 * 1024
    assert "decode_attn_long_rope_staged_tab_bf16" in SOURCE
