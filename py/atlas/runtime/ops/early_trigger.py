"""Which launches let the kernel after them launch before their own PDL wait.

Every kernel triggers its dependents after its wait (atlas_common.cuh), so the kernel after it
starts its pre-wait prologue only once the one before has finished. A few short kernels that
the model always follows with a projection have *_early_* twins that trigger first instead:
the projection then launches while the kernel before the short one still runs and requests
its first weight tiles under it, not only during the short kernel's own 1-5 us. The twins
compute the same values (their references are the plain entries'); atlas_common.cuh
pdl_enter_early says why the overlap is sound. The kinds (routes.EARLY_TRIGGER_KINDS):

* ``norm``: add_rmsnorm before the qkv / gate_up projections (rmsnorm.cu, ops/norm.py);
* ``silu``: silu_mul before the down projection (silu_mul.cu, ops/activation.py);
* ``combine``: decode_attn_combine after the long attention's splits, before the o_proj or
  the output gate (attention.cu, ops/attention.py, ops/kv_quant.py);
* ``gate``: sigmoid_gate_mul before the o_proj of gated attention (attn_gate.cu, ops/gating.py).

What may follow them is the contract: a kernel that reads only weights and writes nothing
before its wait, never one of the kernels that read step inputs there (the early attention
entries, the Gated-DeltaNet step, the MoE down). The model's launch order keeps it.

The rule: batched steps (EARLY_MIN_ROWS rows or more) take the twins. One row does not: at
batch 1 the chain's time only moved (gpu102, 2026-12-04, the norm: the projection after it
gained what its neighbours lost, Qwen3-0.6B 0.725 -> 0.737 ms a step, Qwen3.5-35B-A3B NVFP4
1.885 -> 1.950). Batch 8 and 64 gained on the norm (gpu103: Qwen3-8B b8 4.970 -> 4.881 ms,
Qwen3-0.6B 1.232 -> 1.192, Qwen3-30B-A3B 11.120 -> 10.936, b64 x 1,536 8.898 -> 8.832); the
other kinds at batch 8 gained or tied (gpu106, against the norm alone: Qwen3-8B 4.882 -> 4.858,
Qwen3-0.6B 1.177 -> 1.164, Qwen3-30B-A3B 11.235 -> 11.187, NVFP4 3.976 -> 3.946, FP8 and
Qwen3.5-35B-A3B within 0.3%). ATLAS_EARLY_TRIGGER forces a set of kinds at every row count
for A/B runs.
"""

from __future__ import annotations

from . import KernelCache

#: the fewest rows whose launches take the early twins when ATLAS_EARLY_TRIGGER is unset
EARLY_MIN_ROWS = 2


def triggers_early(kc: KernelCache, kind: str, rows: int) -> bool:
    """Whether the `kind` launch over `rows` rows (sequences for the combine) takes its
    early-trigger twin."""
    forced = kc.routes.early_trigger
    if forced is None:
        return rows >= EARLY_MIN_ROWS
    return kind in forced
