"""Expert parallelism for mixture-of-experts decoders: which experts a rank holds, the slice
of the weight plan it loads, and the two calls its MoE layers add to the forward pass.

`--expert-parallel-size N` runs N ranks that split the routed experts and replicate the rest:
* rank r holds experts [r*E/N, (r+1)*E/N) of every sparse layer (one contiguous block of the
  packed `[E, 2I, H]` / `[E, H, I]` buffers, so the expert kernels index it unchanged);
* attention, norms, dense MLP layers, the router, embedding and LM head are replicated: every
  rank computes the same hidden rows, so the router picks the same experts everywhere and no
  token has to be dispatched (the tiny MoE fixtures and many MoE checkpoints have fewer KV
  heads than ranks, which a tensor-parallel attention split cannot take);
* a sparse layer runs the router and top-k on every rank, rewrites the top-k ids to the
  rank's local indices (-1 for another rank's expert: the expert kernels skip it), runs its
  experts, and one bf16 all-reduce of the partial weighted sums gives every rank the layer's
  output (the all-reduce scheme of docs/parallel.md, right for decode-sized batches);
* the shared expert (Qwen2-MoE, Qwen3.5-MoE) runs on rank 0 only, as one more expert of its
  share, so the all-reduce adds it exactly once; the other ranks do not load it.
Every rank ends a step with the same full logits and samples the same ids (as under tensor
parallelism), so rank 0's tokens are the answer.

With `--tensor-parallel-size N` as well, attention, dense MLPs and the LM head split as for a
dense model (parallel.py) and the experts shard over the same ranks: the all-reduce that
follows every MLP then sums the experts' partials too, so the MoE block adds none.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..comm import CommBackend
from ..core.config import ModelConfig
from ..core.dtype import DType
from ..runtime.gpu import DevicePtr, GpuBackend, Stream
from ..runtime.ops import KernelCache
from ..runtime.ops.moe import MoeShape
from ..runtime.ops.moe_ep import localize_ids
from ..runtime.synthetic_weights import SyntheticWeights
from ..runtime.weights import WeightStore
from .loaders.dense import TensorSlot, UnsupportedModelError, WeightPlan

#: WeightPlan buffers of a sparse layer (l{i}.<suffix>) holding the packed routed experts
EXPERT_BUFFERS = ("experts_gate_up", "experts_down")
#: ... and its shared expert, which only rank 0 loads
SHARED_BUFFERS = ("shared_gate_up", "shared_down", "shared_gate")
#: ... and its router, which every rank holds whole
ROUTER_BUFFERS = ("router", "score_bias")

def check_expert_parallel(cfg: ModelConfig, world: int) -> None:
    """Reject a model or split expert parallelism cannot serve, naming the value."""
    if world == 1:
        return
    moe = cfg.moe
    if moe is None:
        raise UnsupportedModelError(
            f"--expert-parallel-size {world}: {cfg.model_type} has no experts (use "
            "--tensor-parallel-size for a dense model)")
    if moe.expert_bias:
        raise UnsupportedModelError(
            f"--expert-parallel-size {world}: {cfg.model_type}'s experts (host-converted "
            "layout, per-expert biases) are not split across ranks yet: serve it on one GPU")
    if moe.num_experts % world:
        raise UnsupportedModelError(
            f"--expert-parallel-size {world} does not divide num_experts={moe.num_experts}: "
            "each rank holds an equal block of experts")
    if moe.num_experts // world < moe.top_k:
        raise UnsupportedModelError(
            f"--expert-parallel-size {world}: {moe.num_experts // world} experts per rank is "
            f"fewer than num_experts_per_tok={moe.top_k}")


@dataclass(frozen=True, slots=True)
class ExpertShard:
    """One rank's block of experts and the group it combines partial outputs over."""

    comm: CommBackend
    first: int
    count: int
    #: sum the partial outputs here (False: tensor parallelism's all-reduce after every
    #: MLP already does, attention being split over the same ranks)
    reduce: bool = True

    @classmethod
    def of(cls, comm: CommBackend, num_experts: int, combine: bool = True) -> "ExpertShard":
        count = num_experts // comm.world_size
        return cls(comm, comm.rank * count, count, combine)

    @property
    def holds_shared(self) -> bool:
        """The shared expert runs on rank 0 alone (the all-reduce adds it once)."""
        return self.comm.rank == 0

    def select(self, kc: KernelCache, s: Stream, topk_ids: DevicePtr, tokens: int,
               shape: MoeShape) -> MoeShape:
        """Rewrite the step's top-k ids to this rank's local experts (in place) and return
        the shape the expert kernels run with (its expert count the rank's)."""
        localize_ids(kc, s, topk_ids, tokens, shape.slots, shape.top_k, self.first, self.count)
        return replace(shape, experts=self.count)

    def combine(self, s: Stream, delta: DevicePtr, tokens: int, hidden: int) -> None:
        """Sum the ranks' partial MoE outputs (in place): every rank gets the whole output."""
        if self.reduce:
            self.comm.all_reduce(delta, tokens * hidden, DType.BF16, s)


@dataclass(frozen=True, slots=True)
class ExpertPlan:
    """The rank's weight plan and, per tensor, the leading-axis rows of the checkpoint
    tensor it holds (None: the whole tensor)."""

    plan: WeightPlan
    rows: dict[str, slice | None]


def expert_shard_plan(full: WeightPlan, cfg: ModelConfig, rank: int, world: int) -> ExpertPlan:
    """Rank `rank`'s share of `full`: its experts' part of each packed expert buffer, the
    shared expert on rank 0 only, every other buffer whole."""
    assert cfg.moe is not None  # check_expert_parallel
    local = WeightPlan(linears=dict(full.linears), quant=full.quant, stored=dict(full.stored))
    rows: dict[str, slice | None] = {}
    for buffer, parts in buffers_of(full).items():
        if not add_moe_buffer(local, rows, full, buffer, parts, rank, world,
                              cfg.moe.num_experts):
            add_whole(local, rows, full, buffer, parts)
    return ExpertPlan(local, rows)


def buffers_of(plan: WeightPlan) -> dict[str, list[TensorSlot]]:
    """The plan's tensors grouped by device buffer, in plan order."""
    by_buffer: dict[str, list[TensorSlot]] = {}
    for s in plan.slots:
        by_buffer.setdefault(s.buffer, []).append(s)
    return by_buffer


def add_whole(local: WeightPlan, rows: dict[str, slice | None], full: WeightPlan,
              buffer: str, parts: list[TensorSlot]) -> None:
    """`buffer` as the full plan has it (its padding included)."""
    local.add(buffer, [(s.name, s.shape) for s in parts], parts[0].dtype,
              min_bytes=full.buffers[buffer])
    rows.update({s.name: None for s in parts})


def add_moe_buffer(local: WeightPlan, rows: dict[str, slice | None], full: WeightPlan,
                   buffer: str, parts: list[TensorSlot], rank: int, world: int,
                   experts: int) -> bool:
    """Plan a sparse layer's MoE buffer for rank `rank` of an expert-parallel group (the
    rank's block of experts, the router whole, the shared expert on rank 0 only), noting in
    `rows` the leading-axis rows each tensor reads (None: all); False for any other buffer,
    which the caller plans (whole, or split by tensor parallelism)."""
    kind = buffer.split(".", 1)[-1]
    if kind in SHARED_BUFFERS:
        if rank == 0:
            add_whole(local, rows, full, buffer, parts)
        return True
    if kind in ROUTER_BUFFERS:
        add_whole(local, rows, full, buffer, parts)
        return True
    if kind not in EXPERT_BUFFERS:
        return False
    count = experts // world
    first = rank * count
    if len(parts) == 1:  # fused layout: one [E, rows, cols] tensor, a block of experts
        (s,) = parts
        local.add(buffer, [(s.name, (count,) + s.shape[1:])], s.dtype)
        rows[s.name] = slice(first, first + count)
        return True
    if len(parts) % experts:
        raise UnsupportedModelError(f"expert parallelism: {buffer} has {len(parts)} "
                                    f"tensors, not a multiple of num_experts={experts}")
    per = len(parts) // experts  # tensors per expert, in expert order
    mine = parts[first * per:(first + count) * per]
    local.add(buffer, [(s.name, s.shape) for s in mine], mine[0].dtype)
    rows.update({s.name: None for s in mine})
    return True


def upload_experts(store: WeightStore | SyntheticWeights, dev: GpuBackend, eplan: ExpertPlan,
                   dst: dict[str, DevicePtr], **upload_kwargs: object) -> None:
    """Whole tensors through the store's upload (fast path, progress, synthetic weights);
    a fused expert tensor's block of experts as one contiguous row read (or, synthetic,
    made whole on the device and cut)."""
    whole = [name for name, rows in eplan.rows.items() if rows is None]
    store.upload(dev, whole, {n: dst[n] for n in whole}, **upload_kwargs)
    for name, rows in eplan.rows.items():
        if rows is None:
            continue
        if isinstance(store, SyntheticWeights):
            store.upload_slice(dev, name, rows, dst[name])
        else:
            dev.copy_h2d(dst[name], np.ascontiguousarray(store.read_slice(name, rows)))
    dev.synchronize()
