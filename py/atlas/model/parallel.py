"""Tensor parallelism for dense decoders: which slice of each weight a rank holds, the
rank-local dimensions, and the collectives the forward pass adds.

Megatron-style split over `world` ranks:
* attention: rank r owns q heads [r*H/w, (r+1)*H/w) and KV heads [r*K/w, (r+1)*K/w), so the
  q/k/v projections are split by rows (column-parallel) and o_proj by columns
  (row-parallel); each rank's paged KV pool holds only its KV heads. GQA groups stay whole
  because K % w == 0 is required.
* MLP: gate/up split by rows, down by columns; SwiGLU is elementwise so it runs on the shard.
* after o_proj and after down, one bf16 all-reduce of the [tokens, hidden] delta, before the
  residual add (the add+RMSNorm kernel then runs replicated on every rank).
* LM head: vocabulary-parallel. Rank r computes logits for vocab rows [r*V/w, (r+1)*V/w)
  and an all-gather assembles the full f32 logits on every rank, so every rank runs the
  same deterministic sampler on the same numbers and draws the same ids: no broadcast of
  ids, and each rank's sampler state (penalty counts) stays in step by construction.
* embedding: replicated, not vocabulary-parallel. The lookup is a row gather (no compute);
  splitting it would need a masking lookup kernel plus one more [tokens, hidden] all-reduce
  per step, to save V*h bf16 per rank (1.5 GB on a Qwen3-32B config). With tied embeddings
  the LM-head shard is a view into the replicated table, so it costs nothing extra.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..comm import CommBackend
from ..core.config import ModelConfig
from ..core.dtype import DType
from ..runtime.gpu import DevicePtr, GpuBackend, Stream
from ..runtime.synthetic_weights import SyntheticWeights
from ..runtime.weights import WeightStore
from .expert_parallel import add_moe_buffer, buffers_of
from .loaders.dense import UnsupportedModelError, WeightPlan

#: checkpoint tensor suffix -> which axis is split ("rows" = output features)
_ROW_SPLIT = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
              "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
              "mlp.gate_proj.weight", "mlp.up_proj.weight", "lm_head.weight")
_COL_SPLIT = ("self_attn.o_proj.weight", "mlp.down_proj.weight")
_REPLICATED = ("input_layernorm.weight", "post_attention_layernorm.weight",
               "self_attn.q_norm.weight", "self_attn.k_norm.weight", "model.norm.weight",
               "model.embed_tokens.weight")


def check_tensor_parallel(cfg: ModelConfig, world: int, experts_sharded: bool = False) -> None:
    """Reject a configuration the split cannot serve, naming the value and the rule.
    `experts_sharded`: the same ranks also split a mixture of experts' experts
    (expert_parallel.py), the only way tensor parallelism takes an MoE model."""
    if world == 1:
        return
    if cfg.is_hybrid or cfg.linear_attention is not None:
        raise UnsupportedModelError(
            f"tensor parallelism supports dense attention models; {cfg.model_type} has "
            "linear-attention layers")
    if cfg.bias_in_f32:
        raise UnsupportedModelError(
            f"tensor parallelism splits attention projections; {cfg.model_type} adds their "
            "biases to the float32 sums, which the bf16 all-reduce of partial products cannot "
            "carry, and its experts are not split across ranks yet: serve it on one GPU per "
            "replica")
    if cfg.moe is not None and not experts_sharded:
        raise UnsupportedModelError(
            f"tensor parallelism supports dense models; {cfg.model_type} is a mixture of "
            f"experts: split its experts with --expert-parallel-size {world}")
    if cfg.qk_norm_whole:
        raise UnsupportedModelError(
            f"tensor parallelism splits attention heads; {cfg.model_type} normalizes q and k "
            "over all heads at once: serve it on one GPU per replica, or split only its experts "
            f"(--expert-parallel-size {world})")
    rules = (("num_key_value_heads", cfg.num_key_value_heads,
              "each rank must own whole KV heads (and so whole GQA groups)"),
             ("num_attention_heads", cfg.num_attention_heads, "each rank owns whole q heads"),
             ("vocab_size", cfg.vocab_size, "the LM head is split by vocabulary rows"))
    for name, value, why in rules:
        if value % world:
            raise UnsupportedModelError(
                f"--tensor-parallel-size {world} does not divide {name}={value}: {why}")
    if (cfg.intermediate_size // world) % 16 or cfg.intermediate_size % world:
        raise UnsupportedModelError(
            f"--tensor-parallel-size {world}: intermediate_size={cfg.intermediate_size} / "
            f"{world} must be a whole multiple of 16 (the GEMM tile)")


def shard_config(cfg: ModelConfig, world: int) -> ModelConfig:
    """The rank-local view of the config the layers are built from: heads, KV heads and the
    MLP width divided; hidden and vocabulary (embedding, full logits) stay whole.

    Sharding the config rather than the derived dims means every block built from it
    (the attention dims, each layer's MLP width) is the rank's without knowing about TP.
    The weight plan and the checkpoint check keep using the whole config.
    """
    if world == 1:
        return cfg
    return dataclasses.replace(cfg, num_attention_heads=cfg.num_attention_heads // world,
                               num_key_value_heads=cfg.num_key_value_heads // world,
                               intermediate_size=cfg.intermediate_size // world)


@dataclass(frozen=True, slots=True)
class ShardedPlan:
    """The rank's weight plan (local shapes, so the layout is the rank's memory) and, per
    tensor, the [rows, cols] slice of the checkpoint tensor it holds."""

    plan: WeightPlan
    slices: dict[str, tuple[slice, slice]]


def shard_plan(full: WeightPlan, rank: int, world: int, experts: int = 0) -> ShardedPlan:
    """Rank `rank`'s share of `full`; every tensor must be one this module knows how to split.
    `experts` > 0: a mixture of experts whose experts the same ranks shard (its MoE buffers
    planned by expert_parallel.add_moe_buffer, the rest split as for a dense model)."""
    local = WeightPlan()
    slices: dict[str, tuple[slice, slice]] = {}
    for buffer, parts in buffers_of(full).items():
        moe_rows: dict[str, slice | None] = {}
        if experts and add_moe_buffer(local, moe_rows, full, buffer, parts, rank, world,
                                      experts):
            for s in parts:
                if s.name in moe_rows:
                    rows = moe_rows[s.name] or slice(0, s.shape[0])
                    slices[s.name] = (rows, slice(0, math.prod(s.shape[1:])))
            continue
        shapes = []
        for s in parts:
            rows, cols = s.shape[0], (s.shape[1] if len(s.shape) > 1 else 1)
            if s.name.endswith(_ROW_SPLIT):
                n = rows // world
                sl = (slice(rank * n, (rank + 1) * n), slice(0, cols))
                shape = (n,) + s.shape[1:]
            elif s.name.endswith(_COL_SPLIT):
                n = cols // world
                sl = (slice(0, rows), slice(rank * n, (rank + 1) * n))
                shape = (rows, n)
            elif s.name.endswith(_REPLICATED):
                sl, shape = (slice(0, rows), slice(0, cols)), s.shape
            else:
                raise UnsupportedModelError(
                    f"tensor parallelism does not know how to split {s.name}")
            slices[s.name] = sl
            shapes.append((s.name, shape))
        local.add(buffer, shapes, parts[0].dtype)
    for name, lp in full.linears.items():  # each projection's [n, k] as this rank holds it
        if lp.format != "bf16":
            raise UnsupportedModelError(
                f"tensor parallelism supports bf16 checkpoints; {name} is stored as {lp.format}")
        col_split = any(part.endswith(_COL_SPLIT) for part, _ in lp.parts)
        local.linears[name] = dataclasses.replace(
            lp, parts=tuple((part, rows // world if part.endswith(_ROW_SPLIT) else rows)
                            for part, rows in lp.parts),
            k=lp.k // world if col_split else lp.k)
    return ShardedPlan(local, slices)


def upload_shards(store: WeightStore | SyntheticWeights, dev: GpuBackend,
                  sharded: ShardedPlan, dst: dict[str, DevicePtr]) -> None:
    """Read each tensor's slice from the checkpoint (only its bytes) and copy it to `dst`
    (benchmark weights: made whole on the device and cut)."""
    for s in sharded.plan.slots:
        rows, cols = sharded.slices[s.name]
        if isinstance(store, SyntheticWeights):
            store.upload_slice(dev, s.name, rows, dst[s.name], cols)
        else:
            dev.copy_h2d(dst[s.name], np.ascontiguousarray(store.read_slice(s.name, rows, cols)))
    dev.synchronize()


@dataclass(frozen=True, slots=True)
class TensorParallel:
    """What the forward pass needs to be one rank of a tensor-parallel group.

    `logits_local` is f32 [max_batch, vocab_local] scratch for this rank's LM-head shard;
    the all-gather writes the full rows into the step's logits buffer.
    """

    comm: CommBackend
    vocab_local: int
    logits_local: DevicePtr

    @property
    def world(self) -> int:
        return self.comm.world_size

    def reduce_delta(self, s: Stream, delta: DevicePtr, n_tokens: int, hidden: int) -> None:
        """Sum the row-parallel projection's partial outputs across ranks (in place)."""
        self.comm.all_reduce(delta, n_tokens * hidden, DType.BF16, s)

    def gather_logits(self, s: Stream, logits: DevicePtr, n_rows: int) -> None:
        """Full logits rows from every rank's vocabulary slice.

        All-gather puts rank r's block at r * count, so gathering one row at a time lands
        each slice at its vocabulary offset inside the row: no transpose kernel needed.
        """
        v = self.vocab_local
        for row in range(n_rows):
            self.comm.all_gather(self.logits_local + 4 * row * v,
                                 logits + 4 * row * v * self.world, v, DType.FP32, s)
