"""Kernel-path switches for A/B runs, read from the environment when a KernelCache is built.

Read when the runner (its KernelCache) is built, not when a module is imported: a process
that builds two runners under different settings (a benchmark comparing paths, a test) gets
what it asked for each time, and importing Atlas never depends on the environment.

* ATLAS_GEMM_SM90=0: every GEMM on the mma.sync kernel, never the Hopper wgmma one.
* ATLAS_BATCHED_GEMV=0: decode batches of more than GEMV rows on the skinny GEMM, never on
  the tensor-core batched GEMV (gemv_mma).
* ATLAS_BATCHED_GEMV_MIN_M=N: fewest rows routed to the batched GEMV (default
  DEFAULT_BATCHED_GEMV_MIN_M).
* ATLAS_GEMV_MMA_WIDE=1 / 0: the batched GEMV's wide / narrow blocks for every product that
  allows them; unset, its wave model decides.
* ATLAS_MOE_SM90=0: the MoE grouped GEMMs on the mma.sync kernels (moe_grouped), never the
  Hopper wgmma ones (moe_grouped_sm90).
* ATLAS_FUSED_NORM=0: batch-1 decode runs add_rmsnorm before qkv / gate_up instead of the
  GEMV with the add + norm fused into its x load (gemv_add_rmsnorm_bf16_single).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

#: Fewest rows routed to the batched GEMV where it is available: the CUDA-core GEMV keeps up
#: to 8 rows in registers but is FMA-bound at 8. Measured on the H200 (Qwen3-8B decode,
#: 2026-11-30, tools/gpu/run_suite.sh batched_min_m): batch 2 / 4 / 8 at 403.7 / 690.7 /
#: 983.8 tok/s on the CUDA-core GEMV vs 324.0 / 623.3 / 1,217.0 on gemv_mma; 5..7 not measured.
DEFAULT_BATCHED_GEMV_MIN_M = 8


def env_switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    """A kernel-path switch the environment may override (NAME=0 or 1), for A/B runs."""
    value = env.get(name, "").strip().lower()
    return default if not value else value not in ("0", "false", "off", "no")


@dataclass(frozen=True, slots=True)
class KernelRoutes:
    """Which kernel paths the launch builders may take (defaults: every path on)."""

    gemm_sm90: bool = True
    batched_gemv: bool = True
    batched_gemv_min_m: int = DEFAULT_BATCHED_GEMV_MIN_M
    gemv_mma_wide: bool | None = None
    moe_sm90: bool = True
    fused_norm: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "KernelRoutes":
        """The switches in the module docstring; a malformed value is a ValueError naming it."""
        env = os.environ if env is None else env
        min_m = env.get("ATLAS_BATCHED_GEMV_MIN_M", "").strip()
        wide = env.get("ATLAS_GEMV_MMA_WIDE", "").strip()
        if min_m and not min_m.isdigit():
            raise ValueError(f"ATLAS_BATCHED_GEMV_MIN_M={min_m!r} is not a row count")
        if wide not in ("", "0", "1"):
            raise ValueError(f"ATLAS_GEMV_MMA_WIDE={wide!r} must be 0, 1 or unset")
        return cls(gemm_sm90=env_switch(env, "ATLAS_GEMM_SM90", True),
                   batched_gemv=env_switch(env, "ATLAS_BATCHED_GEMV", True),
                   batched_gemv_min_m=int(min_m) if min_m else DEFAULT_BATCHED_GEMV_MIN_M,
                   gemv_mma_wide={"1": True, "0": False}.get(wide),
                   moe_sm90=env_switch(env, "ATLAS_MOE_SM90", True),
                   fused_norm=env_switch(env, "ATLAS_FUSED_NORM", True))
