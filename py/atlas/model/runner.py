"""ModelRunner: a model bound to a device, executing engine steps (a StepExecutor).

Prefill and mixed steps run eagerly. A decode-shaped step (every sequence feeds its last
token, plus its speculative drafts when it verifies) replays the CUDA graph captured for
the smallest row-count bucket that holds its rows: each token is a decode attention row
with its own context length and block-table row, so a verification of K drafts for B
sequences is a decode step of B * (K + 1) rows, reading the weights once. Per-step inputs
(the sampler's row records among them) are written into graph-stable device buffers first
(one host-to-device copy, plus the block-table rows that changed), and only the sampled
token ids come back.

A step is `launch`ed (inputs uploaded, work queued, the sampled ids' copy to the host
queued) and later `collect`ed (wait for it, read the ids): between the two the engine plans
and launches the next step, whose decode tokens are the ones this step samples, copied on
the device from the sampler's output (`SeqChunk.carried`). The host rewrites its pinned
input buffers only once the device has consumed the previous step's (an event), and the
sampled ids land in one of two pinned buffers, alternating, so nothing in flight is
overwritten. `execute` is launch + collect.

Row invariance. A verification step has graphs of its own (`verify_graphs`): each row
attends to the keys its sequence's earlier rows append (AttentionPlan.step_keys: the
rope-fused attention computes them itself, or K/V are appended in a launch of their own
before attention), and up to
`row_invariant_rows` rows every product runs the CUDA-core GEMV and decode attention uses
batch 1's split count. Row i of such a step then computes bit for bit what a plain decode
step at its position computes (the GEMV's reduction order and the attention's chunking
depend on a row's own inputs only): greedy speculation emits the plain tokens on the GPU
too, and an oracle drafting the plain greedy output gets exactly its acceptance. A hybrid
model's Gated-DeltaNet layers run the decode kernel over a verifying sequence's rows token
by token (the same code per token as a decode step), the state after each token in an out
slot of its own (`state_map`): the sequence keeps its accepted prefix's slot, so no
rejected draft is ever recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..comm import CommBackend
from ..core.config import ModelConfig
from ..core.target import KernelTarget
from ..core.dtype import DType
from ..core.numerics import bf16_bits_to_f32
from ..core.sampling import GREEDY
from ..runtime.buffers import BufferArena
from ..runtime.gpu import H200_FACTS, DevicePtr, EventHandle, GpuBackend, GraphHandle
from ..runtime.kernel_abi import SAMPLE_ROW
from ..runtime.kv_cache import PagedKvCache
from ..runtime.ops import KernelCache, argmax, embedding, step_io
from ..runtime.ops.matmul import GEMV_MAX_M, linear_route
from ..runtime.ops.matmul_quant import Bf16Linear
from ..runtime.ops.sampling import PublishIds
from ..runtime.sampler import Sampler
from .batch import (SeqChunk, StepResult, TokenLogprobs, WithEmbedding, WithPromptLogprobs,
                    accept)
from .gated_deltanet import decodes_fused, proj_width
from .model import AttentionPlan, DenseDecoderModel, Dims, StepBuffers
from .mtp import MtpProposer
from .state_pools import RecurrentStatePools, StateSlotMap
from .step_inputs import (StepLayout, decode_buckets, decode_splits, leading_decode_rows,
                          pack_step, row_owners, verification_buckets)


@dataclass(frozen=True, slots=True)
class RunnerLimits:
    """What the runner is sized for; every buffer is allocated for these at startup."""

    max_seq_len: int
    max_batch_size: int
    max_prefill_tokens: int
    block_size: int = 16
    num_sms: int = H200_FACTS.sm_count  # load_runner passes the device's (device_facts)
    #: decode split-K factor fixed for every batch size, so a sequence's attention is computed
    #: the same way however many others share its step (with exact reference kernels this
    #: makes outputs independent of batching; the CUDA path trades that for speed)
    batch_invariant: bool = False
    #: speculative drafts per sequence a verification step may carry (0: no speculation)
    num_draft_tokens: int = 0
    #: hybrid models: recurrent-state snapshots kept for the prefix cache (--ssm-cache-slots)
    ssm_cache_slots: int = 0

    def decode_splits(self, batch: int, kv_heads: int) -> int:
        return decode_splits(1 if self.batch_invariant else batch, kv_heads, self.max_seq_len,
                             self.num_sms)

    @property
    def max_tokens(self) -> int:
        return max(self.max_prefill_tokens, self.max_sample_rows)

    @property
    def max_sample_rows(self) -> int:
        """Rows sampled in one step: one per sequence, K + 1 per verifying sequence."""
        return self.max_batch_size * (1 + self.num_draft_tokens)

    @property
    def verify_slots(self) -> int:
        """First recurrent-state slot of the verifications' out slots, K + 1 per sequence
        (after the sequences' slots and the padding rows'; state_pools.StateSlotMap)."""
        return self.max_batch_size + 1

    @property
    def snapshot_slots(self) -> int:
        """First recurrent-state slot of the prefix cache's snapshots."""
        return self.verify_slots + self.max_batch_size * (self.num_draft_tokens + 1 if
                                                          self.num_draft_tokens else 0)

    @property
    def num_state_slots(self) -> int:
        """Recurrent-state slots of a hybrid model: one per sequence, the graph padding
        rows', with speculation K + 1 more per sequence (the states after each token of a
        verification), and the prefix cache's snapshots."""
        return self.snapshot_slots + self.ssm_cache_slots

    @property
    def max_blocks(self) -> int:
        return -(-self.max_seq_len // self.block_size)


#: reads of the echo word before `_await_staged` waits for the step's end instead (running
#: ahead, the staging kernel read the inputs long before the host writes the next ones)
STAGED_SPINS = 64


def step_layout(limits: RunnerLimits) -> StepLayout:
    """The per-step input layout: a step has up to max_tokens tokens, and up to
    max_sample_rows attention rows (a decode-shaped verification step has one per token),
    each sampled under a sampler row record uploaded with the rest (Sampler.stage_rows)."""
    return StepLayout(limits.max_tokens, limits.max_sample_rows, limits.max_blocks,
                      limits.max_sample_rows, SAMPLE_ROW.itemsize // 4)


@dataclass(slots=True)
class LaunchedStep:
    """A step queued on the device whose sampled tokens `ModelRunner.collect` reads."""

    steps: Sequence[SeqChunk]
    #: the sampled rows in order: (chunk, i) draws at the chunk's RNG position + i
    rows: list[tuple[SeqChunk, int]]
    #: the pinned arrays its logprobs are copied into, when a row asked for them
    logprobs: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    #: verification chunks of a hybrid model (their state moves to the accepted prefix's slot)
    verifying: list[SeqChunk]
    #: the pinned buffer the sampled ids are copied into, and the event after that copy
    host_ids: np.ndarray
    done: EventHandle | None   # None: an empty step
    #: the runner's count of launched steps when this one was (1 for its first)
    number: int = 0
    #: the pinned bf16 [rows, hidden] copy of the sampled rows' final-norm hidden states, when
    #: a chunk asked for its embedding (`SeqChunk.embed`)
    hidden: np.ndarray | None = None


@dataclass
class RunnerInfo:
    """Facts about how this runner was built, for logs, /metrics, gates and benchmarks."""

    model_dir: Path
    backend_kind: str
    weights_bytes: int
    target: KernelTarget | None = None
    closure_hash: str | None = None
    behavior: dict[str, Any] = field(default_factory=dict)
    #: the PTX sets in use, as built (target, arch, compiler_version, flags, closure_hash):
    #: what a benchmark record attests it measured
    kernel_stamps: tuple[dict[str, Any], ...] = ()
    load_s: float = 0.0


def row_invariant_rows(kc: KernelCache) -> int:
    """Most rows a decode step may have while every bf16 product of it runs the CUDA-core
    GEMV (`linear_route` "gemv"), whose per-row FMA chain and butterfly reduction do not
    depend on the row count (gemv_core.cuh): row i of an m-row product is bit for bit the
    one-row product of row i. The batched GEMV and the GEMMs beyond it reduce in other
    orders (7 on an H200 with the default routes, 8 where gemv_mma is not loaded)."""
    m = 0
    while m < GEMV_MAX_M and linear_route(kc, m + 1, 1) == "gemv":
        m += 1
    return m


def _all_bf16(model: DenseDecoderModel) -> bool:
    """Whether every projection is a bf16 weight (row_invariant_rows reasons about the bf16
    GEMV; the quantized formats route by row count on kernels of their own)."""
    return isinstance(model.lm_head, Bf16Linear) and all(
        isinstance(w, Bf16Linear) for lw in model.layers
        for w in (lw.qkv, lw.o, getattr(lw.mlp, "gate_up", None),
                  getattr(lw.mlp, "down", None)) if w is not None)


#: rows the attention partial buffers hold at least: prefill attention's split entry keeps
#: its (token, split) partials there (ops/attention_sm90.PrefillPartials), and a small-batch
#: runner's decode rows alone (one at batch 1) would leave a short chunk no split
PREFILL_SPLIT_PARTIAL_ROWS = 64


def partial_rows(limits: RunnerLimits) -> int:
    """Rows of the attention partial buffers (part_o, part_ml): the decode rows, at least
    PREFILL_SPLIT_PARTIAL_ROWS."""
    return max(limits.max_sample_rows, PREFILL_SPLIT_PARTIAL_ROWS)


def plan_step_buffers(arena: BufferArena, dims: Dims, limits: RunnerLimits,
                      layout: StepLayout, max_splits: int, weight_scratch_bytes: int = 0) -> None:
    """Reserve every per-step buffer once, sized for the worst case the limits allow.

    `weight_scratch_bytes`: the largest bf16 copy a quantized weight dequantizes into for a
    step of `limits.max_tokens` rows (0 for bf16 checkpoints)."""
    t, b = limits.max_tokens, limits.max_sample_rows  # b: decode attention rows
    arena.reserve("step_i32", DType.I32, (layout.total,))
    # q: the rotated q rows attention reads (heads of attn_dim); attn: its output, o_proj's
    # input (heads of head_dim)
    for name, width in (("resid", dims.hidden), ("delta", dims.hidden),
                        ("normed", dims.hidden), ("qkv", dims.qkv_width),
                        ("q", dims.heads * dims.attn_dim),
                        ("attn", dims.q_width), ("gate_up", 2 * dims.inter),
                        ("act", dims.inter)):
        arena.reserve(name, DType.BF16, (t, width))
    arena.reserve("sample_hidden", DType.BF16, (limits.max_sample_rows, dims.hidden))
    arena.reserve("logits", DType.FP32, (limits.max_sample_rows, dims.vocab))
    rows = partial_rows(limits)
    arena.reserve("part_o", DType.FP32, (rows, dims.heads, max_splits, dims.attn_dim))
    arena.reserve("part_ml", DType.FP32, (rows, dims.heads, max_splits, 2))
    # split tickets per (row, head slice) of decode attention: at most one per q head, two a
    # kv head on the gated entry (attention_long.cu SpreadMerge: arrivals and departures)
    arena.reserve("attn_counters", DType.I32, (b, 2 * dims.heads))  # zeroed by the loader
    arena.reserve("w_scratch", DType.BF16, (-(-weight_scratch_bytes // 2),))
    if dims.proj_f32_width:  # a biased projection's float32 sums (Dims.bias_f32)
        arena.reserve("proj_f32", DType.FP32, (t, dims.proj_f32_width))
    if dims.linear is not None:
        la = dims.linear
        for name, width in (("lin_proj", proj_width(la)), ("lin_conv", la.conv_dim),
                            ("lin_core", la.value_dim), ("lin_gated", la.value_dim)):
            arena.reserve(name, DType.BF16, (t, width))


class ModelRunner:
    """Implements StepExecutor over a DenseDecoderModel, a paged KV cache and the sampler."""

    def __init__(self, backend: GpuBackend, cfg: ModelConfig, model: DenseDecoderModel,
                 kv: PagedKvCache, arena: BufferArena, sampler: Sampler,
                 limits: RunnerLimits, info: RunnerInfo,
                 comm: CommBackend | None = None, mtp: MtpProposer | None = None) -> None:
        """`mtp`: the checkpoint's MTP head, drafting after every step (`mtp_drafts`)."""
        self.backend = backend
        #: the tensor- or expert-parallel group this runner is one rank of (None: alone)
        self.comm = comm
        self.cfg = cfg
        self.model = model
        self.kv = kv
        self.arena = arena
        self.sampler = sampler
        self.limits = limits
        self.info = info
        self.mtp = mtp
        #: run the MTP head after each step (a benchmark turns it off for its baselines,
        #: between batches: drafts and carried rows are per live sequence)
        self.draft_with_mtp = mtp is not None
        self.block_size = limits.block_size
        self.num_kv_blocks = kv.num_blocks
        self.max_batch_size = limits.max_batch_size
        self.max_seq_len = limits.max_seq_len
        self.vocab_size = cfg.vocab_size
        self.max_num_draft_tokens = limits.num_draft_tokens
        self.stream = backend.create_stream()
        self.layout = step_layout(limits)
        i32 = arena["step_i32"]
        lay = self.layout
        #: hybrid models keep recurrent state per sequence in slot-indexed pools (one slot per
        #: sampler slot, plus the padding rows' slot); dense models have none. Such a
        #: sequence must start at position 0 (a scheduler must not prefix-cache it)
        self.has_recurrent_state = model.dims.linear is not None
        self.state_pools = (RecurrentStatePools(
            backend, tuple(lw.linear for lw in model.layers if lw.linear is not None),
            model.dims.linear, limits.num_state_slots) if model.dims.linear is not None
            else None)
        self.num_state_snapshots = limits.ssm_cache_slots if self.state_pools else 0
        #: the state slot of each sampler slot's sequence, and its verifications' out slots
        self.state_map = StateSlotMap(limits.verify_slots, limits.num_draft_tokens)
        if (self.has_recurrent_state and limits.num_draft_tokens
                and not decodes_fused(model.kc, model.dims.linear)):
            raise ValueError("speculation on a hybrid model verifies through the fused "
                             "Gated-DeltaNet decode kernel (token by token, per-token state "
                             "slots), which these head shapes or ATLAS_GDN_FUSED=0 rule out")
        lin = (("lin_proj", "lin_conv", "lin_core", "lin_gated") if self.has_recurrent_state
               else ()) + (("proj_f32",) if "proj_f32" in arena else ())
        self.bufs = StepBuffers(
            ids=i32 + 4 * lay.ids, positions=i32 + 4 * lay.positions, slots=i32 + 4 * lay.slots,
            cu_q=i32 + 4 * lay.cu_q, kv_lens=i32 + 4 * lay.kv_lens,
            sample_rows=i32 + 4 * lay.sample_rows, block_tables=kv.block_tables,
            state_slots=i32 + 4 * lay.state_slots, state_out=i32 + 4 * lay.state_out,
            **{n: arena[n] for n in ("resid", "delta", "normed", "qkv", "q", "attn", "gate_up",
                                     "act", "sample_hidden", "logits", "part_o", "part_ml",
                                     "attn_counters", "w_scratch") + lin})
        self.host_i32 = backend.alloc_host_pinned(4 * lay.total).view(np.int32)
        # the sampler's row records ride in the step inputs' upload
        sampler.stage_rows(i32 + 4 * lay.sample_params, self.host_i32[lay.sample_params:])
        #: two pinned buffers for the sampled ids, alternating between launched steps (one
        #: is read while the next step's copy may already be queued into the other), halves
        #: of one allocation (a captured step publishes into either: `_graph_io`), and
        #: the event recorded after each step's copy
        ids_host = backend.alloc_host_pinned(8 * limits.max_sample_rows).view(np.int32)
        self._host_ids = [ids_host[:limits.max_sample_rows], ids_host[limits.max_sample_rows:]]
        self._step_i32 = i32
        #: the launch number a captured step's staging kernel echoes once it has read the
        #: inputs (`_await_staged`)
        self._ack = backend.alloc_host_pinned(4).view(np.int32)
        self._ack[0] = 0
        #: (the step inputs', the sampled ids', the echo's) device addresses of their host
        #: buffers where captured decode steps stage their own inputs and publish their
        #: sampled ids (ops/step_io.py): nothing then runs on the stream between two such
        #: steps
        self._graph_io = self._mapped_io(ids_host)
        #: (launch number, its event) of the last step that staged its own inputs, until
        #: its staging kernel has read them
        self._staged: tuple[int, EventHandle] | None = None
        self._done = [backend.create_event(timing=False) for _ in range(2)]
        #: the same alternation for the logprobs of steps that report them
        #: per parity, the pinned pooled hidden states of embedding chunks (`_host_hidden`)
        self._hidden_host: list[np.ndarray | None] = [None, None]
        self._host_logprobs = ([sampler.logprob_host_buffers() for _ in range(2)]
                               if sampler.max_logprobs else [None, None])
        self._parity = 0
        #: recorded once a step's host inputs are on the device: the pinned input buffers
        #: are rewritten for the next step only after it
        self._inputs_done = backend.create_event(timing=False)
        self._inputs_pending = False
        self._launched = 0  # steps launched (LaunchedStep.number of the latest)
        #: sampled row of each sequence in the last launched step (its carried token's source)
        self._sample_row: dict[int, int] = {}
        #: an MTP pass's gather rows, then its drafted ids
        self.host_mtp = (backend.alloc_host_pinned(4 * limits.max_tokens).view(np.int32)
                         if mtp is not None else np.zeros(0, np.int32))
        self.pad_slot = limits.max_batch_size  # sampler slot owned by graph padding rows
        self._slot_of: dict[int, int] = {}
        self._free_slots = list(range(limits.max_batch_size - 1, -1, -1))
        #: (sequence, table length) each block-table row holds, to skip unchanged uploads
        self._row_state: list[tuple[int, int]] = [(-1, -1)] * limits.max_sample_rows
        self.graphs: dict[int, GraphHandle] = {}
        #: the same decode steps without the sampler, for steps under grammar masks (the
        #: masks are filled on the host while these run; the sampler follows eagerly)
        self.forward_graphs: dict[int, GraphHandle] = {}
        self._masked_last = False  # the last step uploaded a grammar mask
        self._logprobs_last = False  # the last step asked the sampler for logprobs
        #: verification steps of up to this many rows compute each row as a plain decode
        #: step would (see the module docstring); 0 without speculation, for mixtures of
        #: experts (whose expert kernels route by row count), for models whose sliding
        #: windows bind or whose heads are padded (their rows attend on the long kernel,
        #: whose splits follow the row count: `long_only`), where a plain step runs the
        #: persistent decode kernel (ATLAS_PERSISTENT_DECODE=1: its own GEMV sums, not the
        #: per-op kernels'), and where verification steps of one sequence attend on the
        #: verification kernel (each
        #: sequence's K/V read once for all its rows; ATLAS_DECODE_ATTN_VERIFY=0: on decode
        #: attention, one row a sequence; `verifies_on_kernel` says which larger steps do),
        #: whose rows are not the plain decode kernel's bit for bit
        self.verify_kernel = self.verifies_on_kernel(1 + limits.num_draft_tokens)
        self.invariant_rows = (row_invariant_rows(model.kc) if limits.num_draft_tokens
                               and cfg.moe is None
                               and model.persistent is None
                               and not model.long_only
                               and not self.verify_kernel
                               and _all_bf16(model) else 0)
        #: row counts with a captured decode graph: batch sizes
        self.buckets = decode_buckets(limits.max_batch_size)
        #: row counts with a captured verification graph
        self.verify_buckets = (verification_buckets(limits.max_sample_rows, self.invariant_rows)
                               if limits.num_draft_tokens else [])
        self.verify_graphs: dict[int, GraphHandle] = {}
        self.verify_forward_graphs: dict[int, GraphHandle] = {}

    # ---- StepExecutor ------------------------------------------------------------------
    def execute(self, steps: Sequence[SeqChunk]) -> list[StepResult]:
        """Run one step and wait for its tokens (`launch` then `collect`)."""
        return self.collect(self.launch(steps))

    @property
    def can_run_ahead(self) -> bool:
        """Steps may be launched before the previous one is collected: not while the MTP
        head drafts after every step (it reads each step's tokens on the host)."""
        return not (self.mtp is not None and self.draft_with_mtp)

    def launch(self, steps: Sequence[SeqChunk]) -> LaunchedStep:
        """Queue one step's chunks; each sampling chunk draws at its own RNG position (a
        verification chunk at each of its num_draft + 1 positions, on consecutive rows).

        On a hybrid model a verification leaves its sequence's recurrent state after each
        token in a slot of its own, and `collect` keeps the accepted prefix's
        (`_keep_accepted_states`), so the state ends after the last accepted token, as the
        KV does. Prefix-cache state snapshots are loaded before the forward and taken
        after it. A `carried` chunk's last token is the one the previously launched step
        sampled for its sequence, copied on the device."""
        parity = self._parity
        host_ids, done = self._host_ids[parity], self._done[parity]
        if not steps:
            return LaunchedStep(steps, [], None, [], host_ids, None)
        self._parity ^= 1
        self._launched += 1
        if self._inputs_pending:
            self.backend.event_synchronize(self._inputs_done)  # pinned inputs free again
        self._await_staged()
        for st in steps:
            self._ensure_slot(st)
        rows = [(st, i) for st in steps if st.sample for i in range(st.num_draft + 1)]
        verifying = [st for st in steps if st.num_draft] if self.state_pools else []
        self._copy_snapshots(steps, restore=True)
        want_logprobs, n_scored = self._prepare_logprobs(steps, rows)
        n_tokens, n_logits, published, decode = self._forward(steps, rows, n_scored, parity)
        if published:
            self._staged = (self._launched, done)
        self._copy_snapshots(steps, restore=False)
        if self.mtp is not None and self.draft_with_mtp:
            self.mtp.save_hidden(self.stream, self.bufs, n_tokens, normed_final=n_logits > 0)
        if rows and not published:
            self.backend.copy_d2h(host_ids[:len(rows)], self.sampler.out_ids, self.stream)
        logprobs = self._host_logprobs[parity] if want_logprobs else None
        if logprobs is not None:
            self.sampler.queue_logprobs(len(rows) + n_scored, logprobs, self.stream)
        hidden = None
        if any(st.embed for st in steps):   # the sampled rows' final-norm hidden states
            hidden = self._host_hidden(parity)[:len(rows)]
            self.backend.copy_d2h(hidden, self.model.sampled_hidden(self.bufs, decode),
                                  self.stream)
        self.backend.record_event(done, self.stream)
        self._sample_row = {st.seq_id: j for j, (st, _) in enumerate(rows)}
        return LaunchedStep(steps, rows, logprobs, verifying, host_ids, done, self._launched,
                            hidden)

    def collect(self, launched: LaunchedStep) -> list[StepResult]:
        """Wait for a launched step and return the sampled token per chunk (None where
        sample=False, a tuple of num_draft + 1 tokens for a verification chunk), with the
        logprobs its chunks asked for (`_with_logprobs`). Steps verifying drafts or drafting
        with MTP must be collected before the next launch (the engine steps synchronously
        for them)."""
        steps, rows = launched.steps, launched.rows
        if not steps:
            return []
        assert launched.done is not None
        self.backend.event_synchronize(launched.done)
        if launched.number == self._launched:
            # the device has passed everything queued so far, the input copies included:
            # the next launch (a synchronous engine's) rewrites them without another wait
            self._inputs_pending = False
            self._staged = None
        logprobs = launched.logprobs
        ids = launched.host_ids[:len(rows)].tolist()
        out: list[StepResult] = [None] * len(steps)
        j = 0
        for i, st in enumerate(steps):
            if st.sample:
                n = st.num_draft + 1
                out[i] = tuple(ids[j:j + n]) if st.num_draft else ids[j]
                j += n
        if launched.verifying:
            self._keep_accepted_states([(st, got) for st, got in zip(steps, out)
                                        if st.num_draft])
        if self.mtp is not None and self.draft_with_mtp:
            self.mtp.propose(self._mtp_pass, self.stream, self.bufs, steps, out, self._slot_of)
        if logprobs is not None:
            out = _with_logprobs(steps, out, logprobs)
        return out if launched.hidden is None else _with_embeddings(steps, out, launched.hidden)

    def _host_hidden(self, parity: int) -> np.ndarray:
        """The pinned bf16 [max_sample_rows, hidden] buffer of a step parity's pooled hidden
        states, made the first time a chunk asks for one (embedding requests)."""
        if self._hidden_host[parity] is None:
            rows, hidden = self.limits.max_sample_rows, self.model.dims.hidden
            self._hidden_host[parity] = self.backend.alloc_host_pinned(
                2 * rows * hidden).view(np.uint16).reshape(rows, hidden)
        return self._hidden_host[parity]

    def release(self, seq_id: int) -> None:
        """Forget a sequence. Its block-table rows are invalidated too: a live sequence's
        table only grows, but a released one may come back with different blocks."""
        self._row_state = [(-1, -1) if st[0] == seq_id else st for st in self._row_state]
        slot = self._slot_of.pop(seq_id, None)
        if slot is not None:
            self._free_slots.append(slot)
        if self.mtp is not None:
            self.mtp.forget(seq_id)

    def mtp_drafts(self, seq_id: int) -> list[int]:
        """The MTP head's drafts to follow the sequence's last token ([] before its first
        sampled token, or without an MTP head)."""
        return self.mtp.drafts.get(seq_id, []) if self.mtp is not None else []

    def state_slot_usage(self) -> tuple[int, int]:
        """(slots held, slots in the pool) of the recurrent-state pools: a hybrid model's
        sequences each hold one from their first chunk to their release; (0, 0) for a model
        without recurrent state."""
        if not self.has_recurrent_state:
            return 0, 0
        return len(self._slot_of), self.max_batch_size

    def read_recurrent_state(self, seq_id: int) -> np.ndarray:
        """A live sequence's recurrent state, every linear layer's conv ring then delta
        state, as bytes (for parity checks: the slot a verification left it in)."""
        assert self.state_pools is not None
        return self.state_pools.read(self.state_map.current(self._slot_of[seq_id]))

    def read_logits(self, rows: int) -> np.ndarray:
        """f32 logits of the last step's first `rows` sampled rows (for parity checks)."""
        return self.backend.download(self.bufs.logits, np.float32, (rows, self.vocab_size))

    # ---- internals ---------------------------------------------------------------------
    def _forward(self, steps: Sequence[SeqChunk], rows: Sequence[tuple[SeqChunk, int]],
                 n_scored: int, parity: int) -> tuple[int, int, bool, bool]:
        """Upload the step's inputs and enqueue its forward and sampling: the captured graph
        of its row count when it is decode-shaped, else eagerly. `rows` are the sampled
        rows in order: (chunk, i) draws at the chunk's RNG position + i; `n_scored` rows
        that score prompt tokens follow them (never in a decode-shaped step: such a chunk
        does not sample, or is more than its last token). Returns the rows run, the rows
        given logits (graph padding included), whether the graph published the sampled ids
        into the host buffer of `parity` itself (`_graph_io`), and whether it ran
        decode-shaped (`AttentionPlan.decode`: one row per token). A hybrid model's
        verification is decode-shaped even without a graph (its recurrent state is kept per
        token)."""
        shape = self._decode_shape(steps)
        bucket = self._graph_bucket(shape)
        verify = shape is not None and shape[1]
        per_row = bucket > 0 or (verify and self.has_recurrent_state)
        graphs, forward_graphs = ((self.verify_graphs, self.verify_forward_graphs) if verify
                                  else (self.graphs, self.forward_graphs))
        n_tokens, n_sample, max_q = pack_step(self.host_i32, self.layout, steps,
                                              self.block_size, pad_to=bucket, per_row=per_row)
        owners = row_owners(steps, per_row=per_row)
        self._pack_state_slots(steps, owners, max(len(owners), bucket), per_row)
        pad = n_sample - len(rows)
        self.sampler.prepare([self._slot_of[st.seq_id] for st, _ in rows] + [self.pad_slot] * pad,
                             [st.sampling for st, _ in rows] + [GREEDY] * pad,
                             [st.rng_position + i for st, i in rows] + [0] * pad, self.stream)
        masked = any(st.token_mask is not None for st in steps if st.sample)
        if bucket and not masked and not verify and self._graph_io is not None:
            # the graph stages the inputs (carried ids as -1 - their sampled row), echoes the
            # launch number, and publishes its ids into host buffer `parity`
            for dst, src in self._carry_pairs(steps):
                self.host_i32[self.layout.ids + dst] = -1 - src
            self.host_i32[self.layout.io_parity] = parity
            self.host_i32[self.layout.io_seq] = self._launched
            self._upload_block_rows(owners, n_rows=max(len(owners), bucket))
            # the block-table and mask rows' copies, if any, precede the staging kernel: its
            # echo frees their host rows too
            self._upload_token_masks(rows, masked)
            self.backend.launch_graph(graphs[bucket], self.stream)
            return n_tokens, n_sample, True, True
        self._upload_inputs(owners, n_rows=max(len(owners), bucket))
        self._carry_tokens(steps)
        if bucket and not masked:
            self._upload_token_masks(rows, masked)
            self._mark_inputs_sent()
            self.backend.launch_graph(graphs[bucket], self.stream)
            return n_tokens, n_sample, False, True
        # the forward is enqueued first: the host fills the grammar masks while the device
        # runs it, and the sampler (queued after the mask upload) waits for both
        if bucket:
            self.backend.launch_graph(forward_graphs[bucket], self.stream)
        else:
            if per_row:  # a hybrid model's eager verification: decode-shaped
                plan = AttentionPlan(decode=True, num_seqs=n_tokens,
                                     num_splits=self.verify_splits(n_tokens),
                                     step_keys=1 + self.max_num_draft_tokens,
                                     split_capacity=self.split_capacity,
                                     row_invariant=self.row_invariant(n_tokens))
            else:
                ones = leading_decode_rows(steps)
                histories = [st.start_pos + len(st.token_ids) for st in steps[ones:]]
                plan = AttentionPlan(decode=False, num_seqs=len(steps), max_q_len=max_q,
                                     num_splits=self.decode_splits(ones) if ones else 1,
                                     decode_rows=ones, split_capacity=self.split_capacity,
                                     row_invariant=self.row_invariant(ones),
                                     max_kv_len=max(histories, default=0),
                                     partial_slots=self.partial_slots)
            self.model.forward(self.stream, self.bufs, n_tokens, plan, n_sample + n_scored)
        self._upload_token_masks(rows, masked)
        self._mark_inputs_sent()
        if n_sample:
            self.sampler.enqueue(self.stream, self.bufs.logits, n_sample)
        if n_scored:
            self.sampler.score(self.stream, self.bufs.logits, n_sample, n_scored)
        return n_tokens, n_sample + n_scored, False, per_row

    def _mapped_io(self, ids_host: np.ndarray) -> tuple[DevicePtr, DevicePtr, DevicePtr] | None:
        """The device addresses of the host's step inputs, sampled-id and echo buffers, where
        the routes take the in-graph copies (routes.graph_step_io), the kernels are loaded
        and the backend maps host memory; else None (the copies run on the stream)."""
        kc = self.model.kc
        if not (kc.routes.graph_step_io and step_io.available(kc)):
            return None
        ptrs = tuple(self.backend.mapped_host_ptr(h) for h in (self.host_i32, ids_host,
                                                              self._ack))
        return None if None in ptrs else ptrs  # type: ignore[return-value]

    def _await_staged(self) -> None:
        """Before the host rewrites the step inputs: the last step that stages its own has
        read them (its kernel echoed the step's number), else wait for that step's end."""
        if self._staged is None:
            return
        number, done = self._staged
        for _ in range(STAGED_SPINS):
            if int(self._ack[0]) == number:
                break
        else:
            self.backend.event_synchronize(done)
        self._staged = None

    def _stage_and_publish(self, bs: int) -> tuple[Callable[[], None], PublishIds]:
        """The launch that stages a captured step's inputs from the host, and where its
        sampler publishes the bs sampled ids: the host buffer its parity word names
        (`_graph_io`)."""
        assert self._graph_io is not None
        src, ids_host, ack = self._graph_io
        lay, kc, s = self.layout, self.model.kc, self.stream

        def stage() -> None:
            step_io.stage_inputs(kc, s, src, self._step_i32, bs, lay.max_tokens, lay.cu_q,
                                 lay.sample_params - lay.cu_q + bs * lay.record_words,
                                 self.sampler.out_ids, ack, lay.io_seq)

        return stage, PublishIds(ids_host, self._step_i32 + 4 * lay.io_parity,
                                 self.limits.max_sample_rows)

    def _mark_inputs_sent(self) -> None:
        """Every pinned input of the step is queued for the device: the event after the
        copies tells the next launch when it may rewrite them."""
        self.backend.record_event(self._inputs_done, self.stream)
        self._inputs_pending = True

    def _carry_tokens(self, steps: Sequence[SeqChunk]) -> None:
        """Copy each carried chunk's token from the sampler's output of the step launched
        before (still on the device) over its placeholder in the packed ids: one device copy
        per run of consecutive rows, so a steady decode batch costs one copy."""
        pairs = self._carry_pairs(steps)
        i = 0
        while i < len(pairs):
            dst, src = pairs[i]
            n = 1
            while i + n < len(pairs) and pairs[i + n] == (dst + n, src + n):
                n += 1
            self.backend.copy_d2d(self.bufs.ids + 4 * dst, self.sampler.out_ids + 4 * src,
                                  4 * n, self.stream)
            i += n

    def _carry_pairs(self, steps: Sequence[SeqChunk]) -> list[tuple[int, int]]:
        """(ids position, sampled row of the step launched before) of each carried chunk's
        last token."""
        pairs: list[tuple[int, int]] = []
        pos = 0
        for st in steps:
            pos += len(st.token_ids)
            if st.carried:
                row = self._sample_row.get(st.seq_id)
                if row is None:
                    raise RuntimeError(f"sequence {st.seq_id} carries its last token, but the "
                                       "step launched before did not sample for it")
                pairs.append((pos - 1 - st.num_draft, row))
        return pairs

    def _mtp_pass(self, chunks: Sequence[SeqChunk], table: DevicePtr,
                  rows: Sequence[int]) -> list[int]:
        """One MTP pass (see mtp.MtpProposer): gather each row's main hidden state from
        `table`, run the head eagerly, return the argmax of each sampling chunk's row."""
        assert self.mtp is not None
        mb, s, h = self.mtp.bufs, self.stream, self.model.dims.hidden
        n_tokens, n_sample, max_q = pack_step(self.host_i32, self.layout, chunks,
                                              self.block_size)
        self._upload_inputs(chunks, len(chunks))
        self.host_mtp[:len(rows)] = rows
        self.backend.copy_h2d(mb.rows, self.host_mtp[:len(rows)], s)
        bound = mb.max_tokens + self.max_batch_size if table == mb.hidden else n_tokens
        embedding.embedding(self.model.kc, s, mb.rows, table, mb.hidden_in, len(rows), h, bound)
        plan = AttentionPlan(decode=False, num_seqs=len(chunks), max_q_len=max_q)
        self.mtp.head.forward(self.model, s, self.bufs, mb.hidden_in, n_tokens, plan, n_sample)
        if not n_sample:
            self.backend.synchronize(s)
            return []
        argmax.argmax(self.model.kc, s, self.bufs.logits, mb.ids, mb.argmax_partials,
                      mb.argmax_counters, n_sample, self.vocab_size)
        self.backend.copy_d2h(self.host_mtp[:n_sample], mb.ids, s)
        self.backend.synchronize(s)
        return [int(t) for t in self.host_mtp[:n_sample]]

    def _state_slot(self, st: SeqChunk) -> int:
        """The recurrent-state slot holding the chunk's sequence's state."""
        return self.state_map.current(self._slot_of[st.seq_id])

    def _copy_snapshots(self, steps: Sequence[SeqChunk], restore: bool) -> None:
        """Load (`restore`) or take the prefix-cache state snapshots the chunks name."""
        for st in steps:
            snapshot = st.state_restore if restore else st.state_save
            if snapshot is None:
                continue
            if not 0 <= snapshot < self.num_state_snapshots:
                raise ValueError(f"sequence {st.seq_id}: state snapshot {snapshot} outside "
                                 f"0..{self.num_state_snapshots - 1}")
            assert self.state_pools is not None
            seq_slot, snap_slot = self._state_slot(st), self.limits.snapshot_slots + snapshot
            self.state_pools.copy(*((seq_slot, snap_slot) if restore else (snap_slot, seq_slot)),
                                  self.stream)

    def _keep_accepted_states(self, verified: Sequence[tuple[SeqChunk, StepResult]]) -> None:
        """Hybrid models: the verification left each sequence's recurrent state after each
        of its tokens in that token's out slot; the sequence keeps the state after the
        tokens the engine keeps (`accept`, the rule the scheduler commits by)."""
        for st, got in verified:
            assert isinstance(got, tuple) and len(st.token_ids) == st.num_draft + 1
            kept = len(accept(st.token_ids[1:], got))
            slot = self._slot_of[st.seq_id]
            self.state_map.keep(slot, self.state_map.outs(slot, len(st.token_ids))[kept - 1])

    def _decode_shape(self, steps: Sequence[SeqChunk]) -> tuple[int, bool] | None:
        """(rows, whether it verifies drafts) of a decode-shaped step (every chunk samples
        its last token and its drafts' positions, one row per token), else None."""
        rows, verify = 0, False
        for st in steps:
            if not st.sample or len(st.token_ids) != st.num_draft + 1:
                return None
            verify = verify or st.num_draft > 0
            rows += len(st.token_ids)
        return rows, verify

    def _graph_bucket(self, shape: tuple[int, bool] | None) -> int:
        """Rows of the captured graph that runs a step of this `_decode_shape` (0: eagerly)."""
        if shape is None or not self.graphs:
            return 0
        rows, verify = shape
        return next((b for b in (self.verify_buckets if verify else self.buckets)
                     if b >= rows), 0)

    def _upload_token_masks(self, rows: Sequence[tuple[SeqChunk, int]], masked: bool) -> None:
        """Grammar masks of this step's sampling rows (row j samples for rows[j]'s chunk;
        `masked`: whether any has a mask), filled into the sampler's pinned rows; rows
        without one sample unmasked."""
        if self.sampler.token_bitmask is None:
            if masked:
                raise RuntimeError("a chunk carries a grammar mask, but the sampler was built "
                                   "without token_masks")
            return
        if not masked and not self._masked_last:
            return  # the device's mask rows already say "none"
        self._masked_last = masked
        fills = [st.token_mask for st, _ in rows]
        for row, fill in enumerate(fills):
            if fill is not None:
                fill(self.sampler.host_bitmask, row)
        self.sampler.upload_token_masks([f is not None for f in fills], self.stream)

    def _prepare_logprobs(self, steps: Sequence[SeqChunk],
                          rows: Sequence[tuple[SeqChunk, int]]) -> tuple[bool, int]:
        """Tell the sampler which rows report logprobs (row j samples for rows[j]'s chunk;
        a verification's rows report none), then the rows scoring prompt tokens after them
        with their tokens. Returns (whether any row reports, how many rows score). Rows
        that ask nothing cost the sampler's finishing blocks nothing."""
        scoring = [st.prompt_logprobs for st in steps if st.prompt_logprobs is not None]
        asked = bool(scoring) or any(st.logprobs >= 0 for st in steps
                                     if st.sample and not st.num_draft)
        targets = [t for sc in scoring for t in sc.targets]
        if self.sampler.max_logprobs and (asked or self._logprobs_last):
            top_n = [st.logprobs if not st.num_draft else -1 for st, _ in rows]
            self.sampler.prepare_logprobs(
                top_n + [sc.top_n for sc in scoring for _ in sc.targets], self.stream, targets)
        elif asked:
            raise RuntimeError("a chunk asks for logprobs, but the sampler was built without "
                               "max_logprobs")
        self._logprobs_last = asked
        return asked, len(targets)

    def _pack_state_slots(self, steps: Sequence[SeqChunk], owners: Sequence[SeqChunk],
                          n_rows: int, per_row: bool) -> None:
        """Each row's recurrent-state slot (its sequence's; padding rows the pad slot) and
        the slot it leaves its state in: its own, or in a decode-shaped step's verification
        the out slot of each of its tokens (StateSlotMap)."""
        if not self.has_recurrent_state:
            return
        pad = [self.pad_slot] * (n_rows - len(owners))
        cur = [self._state_slot(st) for st in owners] + pad
        out = list(cur)
        if per_row:
            row = 0
            for st in steps:
                n = len(st.token_ids)
                if st.num_draft:
                    out[row:row + n] = self.state_map.outs(self._slot_of[st.seq_id], n)
                row += n
        elif any(st.num_draft for st in steps):
            raise RuntimeError("a hybrid model verifies drafts only in decode-shaped steps "
                               "(its recurrent state is kept per token there); the scheduler "
                               "plans no prefill beside them (verify_apart)")
        self.host_i32[self.layout.state_slots:self.layout.state_slots + n_rows] = cur
        self.host_i32[self.layout.state_out:self.layout.state_out + n_rows] = out

    def _ensure_slot(self, st: SeqChunk) -> None:
        """Give a sequence its sampler slot, (re)built from the history its chunk carries
        (its first chunk, and the first after a release)."""
        if st.seq_id in self._slot_of and st.history is None:
            return
        if st.history is None:
            raise ValueError(f"sequence {st.seq_id} is new to the runner: its first chunk "
                             "must carry its penalty history")
        slot = self._slot_of.get(st.seq_id)
        if slot is None:
            if self.has_recurrent_state and st.start_pos != 0 and st.state_restore is None:
                # the recurrent state of positions < start_pos exists nowhere
                raise RuntimeError(f"sequence {st.seq_id} starts at position {st.start_pos}: "
                                   "a hybrid model's recurrent state must be computed from "
                                   "position 0 or restored from a state snapshot")
            if not self._free_slots:
                raise RuntimeError(f"more than {self.max_batch_size} live sequences; release "
                                   "finished sequences before starting new ones")
            slot = self._slot_of[st.seq_id] = self._free_slots.pop()
            self.state_map.reset(slot)
        self.sampler.assign(slot, st.history.prompt_ids, st.sampling, st.history.drawn_counts,
                            self.stream)

    def _upload_inputs(self, owners: Sequence[SeqChunk], n_rows: int) -> None:
        """Copy the packed step inputs (the sampler's row records with them: prepare them
        first), and the block-table rows whose contents changed (row i lists the blocks of
        `owners[i]`).

        A row is rewritten only when a different sequence occupies it or its sequence
        grew a block, so steady decode uploads a row once every block_size tokens.
        """
        self.backend.copy_h2d(self.bufs.ids, self.host_i32, self.stream)
        self._upload_block_rows(owners, n_rows)

    def _upload_block_rows(self, owners: Sequence[SeqChunk], n_rows: int) -> None:
        """Copy the block-table rows whose contents changed (`_upload_inputs`)."""
        for row in range(n_rows):
            if row < len(owners):
                st = owners[row]
                state, table = (st.seq_id, len(st.block_table)), st.block_table
            else:
                state, table = (-1, 1), [0]  # graph padding rows read block 0
            if self._row_state[row] != state:
                self.kv.set_block_table(row, table)
                self._row_state[row] = state
        self.kv.upload_block_tables(self.stream)

    def row_invariant(self, rows: int) -> bool:
        """Whether a step of `rows` decode rows keeps batch 1's attention kernels (and split
        count, `decode_splits`): up to `invariant_rows` rows, so each row computes what a
        batch-1 step computes."""
        return 0 < rows <= self.invariant_rows

    def decode_splits(self, rows: int) -> int:
        """Decode attention's split count in the captured step of `rows` rows: batch 1's up
        to `invariant_rows` (a row's chunking then depends on its context length only), the
        occupancy rule's for the row count beyond."""
        kv_heads = self.model.dims.kv_heads
        return self.limits.decode_splits(1 if rows <= self.invariant_rows else rows, kv_heads)

    def verifies_on_kernel(self, rows: int) -> bool:
        """Whether a verification step of `rows` rows (graph bucket) attends on the
        verification kernel (model.verifies_on_kernel at K + 1 rows a sequence)."""
        return (self.max_num_draft_tokens > 0
                and self.model.verifies_on_kernel(1 + self.max_num_draft_tokens, rows))

    def verify_splits(self, rows: int) -> int:
        """Decode attention's split count in a verification step of `rows` rows: on the
        verification kernel, whose blocks serve a sequence's rows together, the occupancy
        rule's for the fewest sequences the rows can be (rows / (K + 1): batch 1's count for
        one sequence's K + 1 rows); else `decode_splits`."""
        if not self.verifies_on_kernel(rows):
            return self.decode_splits(rows)
        seqs = -(-rows // (1 + self.max_num_draft_tokens))
        return self.limits.decode_splits(seqs, self.model.dims.kv_heads)

    @property
    def partial_slots(self) -> int:
        """(row, split) pairs of every head the decode partial buffers hold: the scratch a
        prefill step's split attention takes (ops/attention_sm90.PrefillPartials)."""
        return partial_rows(self.limits) * self.split_capacity

    @property
    def split_capacity(self) -> int:
        """The splits a row of the decode partial buffers holds (load.py sizes them by batch
        1's count, the most any batch gets)."""
        return self.limits.decode_splits(1, self.model.dims.kv_heads)

    def capture_graphs(self) -> None:
        """Capture one decode graph per bucket and one verification graph per verification
        bucket, largest first (nano-vllm's order)."""
        kinds = [(rows, False) for rows in self.buckets]
        kinds += [(rows, True) for rows in self.verify_buckets]
        for rows, verify in sorted(kinds, reverse=True):
            self._capture(rows, verify)
        self.backend.synchronize(self.stream)

    def _capture(self, bs: int, verify: bool) -> None:
        """The graph of a decode-shaped step of `bs` rows (and its sampler-less twin for
        steps under grammar masks), into graphs or verify_graphs."""
        dummy = [SeqChunk(-1 - i, [0], 0, [0], GREEDY) for i in range(bs)]
        pack_step(self.host_i32, self.layout, dummy, self.block_size)
        for i in range(bs):  # padding-style rows: never write the KV cache
            self.host_i32[self.layout.slots + i] = -1
            self.host_i32[self.layout.state_slots + i] = self.pad_slot
            self.host_i32[self.layout.state_out + i] = self.pad_slot
        self.sampler.prepare([self.pad_slot] * bs, [GREEDY] * bs, [0] * bs)
        self._upload_inputs([], bs)
        plan = AttentionPlan(decode=True, num_seqs=bs,
                             num_splits=self.verify_splits(bs) if verify
                             else self.decode_splits(bs),
                             step_keys=1 + self.max_num_draft_tokens if verify else 1,
                             split_capacity=self.split_capacity,
                             row_invariant=self.row_invariant(bs))
        graphs, forward_graphs = ((self.verify_graphs, self.verify_forward_graphs) if verify
                                  else (self.graphs, self.forward_graphs))
        # a plain step's graph stages its inputs (then lets the host rewrite them) and its
        # sampler publishes the sampled ids (`_graph_io`); the warm-up runs them as the graph
        # will
        self.host_i32[self.layout.io_parity] = 0
        io = self._stage_and_publish(bs) if self._graph_io is not None and not verify else None
        # Warm-up outside capture resolves every kernel before the graph is recorded.
        for capture in (False, True):
            if capture:
                self.backend.synchronize(self.stream)
                self.backend.begin_capture(self.stream)
            if io is not None:
                io[0]()
            self.model.forward(self.stream, self.bufs, bs, plan, bs)
            # the graph replays only for steps without a grammar mask (`_forward`): no mask
            # launch in it (the warm-up resolves that kernel too)
            self.sampler.enqueue(self.stream, self.bufs.logits, bs, masked=not capture,
                                 publish=io[1] if io is not None else None)
        graphs[bs] = self.backend.end_capture(self.stream)
        if self.sampler.token_bitmask is not None:
            self.backend.begin_capture(self.stream)
            self.model.forward(self.stream, self.bufs, bs, plan, bs)
            forward_graphs[bs] = self.backend.end_capture(self.stream)


def _with_logprobs(steps: Sequence[SeqChunk], out: list[StepResult],
                   logprobs: tuple[np.ndarray, np.ndarray, np.ndarray]) -> list[StepResult]:
    """`out` with the logprobs the chunks asked for: a sampled token's from its row, and
    the prompt tokens a chunk scored from the rows after every sampled one (in chunk
    order, as `pack_step` gathered them)."""
    j = 0
    scored = sum(st.num_draft + 1 for st in steps if st.sample)
    for i, st in enumerate(steps):
        if st.sample:
            got = out[i]
            if not st.num_draft and st.logprobs >= 0:
                assert isinstance(got, int)
                out[i] = _token_logprobs(got, logprobs, j, st.logprobs)
            j += st.num_draft + 1
        sc = st.prompt_logprobs
        if sc is not None:
            got = out[i]
            assert not isinstance(got, (tuple, WithPromptLogprobs))
            out[i] = WithPromptLogprobs(tuple(
                _token_logprobs(t, logprobs, scored + k, sc.top_n)
                for k, t in enumerate(sc.targets)), got)
            scored += len(sc.targets)
    return out


def _with_embeddings(steps: Sequence[SeqChunk], out: list[StepResult],
                     hidden: np.ndarray) -> list[StepResult]:
    """`out` with the hidden state of each chunk that asked for it (`SeqChunk.embed`): its
    sampled row's, as float32."""
    j = 0
    for i, st in enumerate(steps):
        if not st.sample:
            continue
        if st.embed:
            got = out[i]
            assert not isinstance(got, (tuple, WithPromptLogprobs, WithEmbedding))
            out[i] = WithEmbedding(bf16_bits_to_f32(hidden[j]), got)
        j += st.num_draft + 1
    return out


def _token_logprobs(token: int, logprobs: tuple[np.ndarray, np.ndarray, np.ndarray],
                    row: int, top_n: int) -> TokenLogprobs:
    """Row `row` of the sampler's logprob buffers as `token`'s `TokenLogprobs` (the sampled
    token, or the prompt token a row scored)."""
    sampled, top_ids, top_lps = logprobs
    return TokenLogprobs(token, float(sampled[row]),
                         tuple((int(top_ids[row, k]), float(top_lps[row, k]))
                               for k in range(top_n)))
