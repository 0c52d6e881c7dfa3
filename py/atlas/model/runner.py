"""ModelRunner: a model bound to a device, executing engine steps (a StepExecutor).

Prefill and mixed steps run eagerly; a step where every sequence decodes one token replays
the CUDA graph captured for the smallest batch-size bucket that holds it. Per-step inputs
are written into graph-stable device buffers first (two host-to-device copies), and only
the sampled token ids come back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..core.config import ModelConfig
from ..core.target import KernelTarget
from ..core.dtype import DType
from ..core.sampling import GREEDY
from ..runtime.buffers import BufferArena
from ..runtime.gpu import H200_FACTS, GpuBackend, GraphHandle
from ..runtime.kv_cache import PagedKvCache
from ..runtime.sampler import Sampler
from .batch import SeqChunk, StepResult, TokenLogprobs
from .gated_deltanet import proj_width
from .model import AttentionPlan, DenseDecoderModel, Dims, StepBuffers
from .step_inputs import StepLayout, decode_buckets, decode_splits, pack_step


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

    def decode_splits(self, batch: int, kv_heads: int) -> int:
        return decode_splits(1 if self.batch_invariant else batch, kv_heads, self.max_seq_len,
                             self.num_sms)

    @property
    def max_tokens(self) -> int:
        return max(self.max_prefill_tokens, self.max_batch_size)

    @property
    def max_sample_rows(self) -> int:
        """Rows sampled in one step: one per sequence, K + 1 per verifying sequence."""
        return self.max_batch_size * (1 + self.num_draft_tokens)

    @property
    def max_blocks(self) -> int:
        return -(-self.max_seq_len // self.block_size)


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


def plan_step_buffers(arena: BufferArena, dims: Dims, limits: RunnerLimits,
                      layout: StepLayout, max_splits: int, weight_scratch_bytes: int = 0) -> None:
    """Reserve every per-step buffer once, sized for the worst case the limits allow.

    `weight_scratch_bytes`: the largest bf16 copy a quantized weight dequantizes into for a
    step of `limits.max_tokens` rows (0 for bf16 checkpoints)."""
    t, b = limits.max_tokens, limits.max_batch_size
    arena.reserve("step_i32", DType.I32, (layout.total,))
    for name, width in (("resid", dims.hidden), ("delta", dims.hidden),
                        ("normed", dims.hidden), ("qkv", dims.qkv_width), ("q", dims.q_width),
                        ("attn", dims.q_width), ("gate_up", 2 * dims.inter),
                        ("act", dims.inter)):
        arena.reserve(name, DType.BF16, (t, width))
    arena.reserve("sample_hidden", DType.BF16, (limits.max_sample_rows, dims.hidden))
    arena.reserve("logits", DType.FP32, (limits.max_sample_rows, dims.vocab))
    arena.reserve("part_o", DType.FP32, (b, dims.heads, max_splits, dims.head_dim))
    arena.reserve("part_ml", DType.FP32, (b, dims.heads, max_splits, 2))
    arena.reserve("w_scratch", DType.BF16, (-(-weight_scratch_bytes // 2),))
    if dims.linear is not None:
        la = dims.linear
        for name, width in (("lin_proj", proj_width(la)), ("lin_conv", la.conv_dim),
                            ("lin_core", la.value_dim), ("lin_gated", la.value_dim)):
            arena.reserve(name, DType.BF16, (t, width))


class ModelRunner:
    """Implements StepExecutor over a DenseDecoderModel, a paged KV cache and the sampler."""

    def __init__(self, backend: GpuBackend, cfg: ModelConfig, model: DenseDecoderModel,
                 kv: PagedKvCache, arena: BufferArena, sampler: Sampler,
                 limits: RunnerLimits, info: RunnerInfo) -> None:
        self.backend = backend
        self.cfg = cfg
        self.model = model
        self.kv = kv
        self.arena = arena
        self.sampler = sampler
        self.limits = limits
        self.info = info
        self.block_size = limits.block_size
        self.num_kv_blocks = kv.num_blocks
        self.max_batch_size = limits.max_batch_size
        self.max_seq_len = limits.max_seq_len
        self.vocab_size = cfg.vocab_size
        self.max_num_draft_tokens = limits.num_draft_tokens
        self.stream = backend.create_stream()
        self.layout = StepLayout(limits.max_tokens, limits.max_batch_size, limits.max_blocks,
                                 limits.max_sample_rows)
        i32 = arena["step_i32"]
        lay = self.layout
        #: hybrid models keep recurrent state per sequence in slot-indexed pools (one slot per
        #: sampler slot, plus the padding rows' slot); dense models have none. Such a
        #: sequence must start at position 0 (a scheduler must not prefix-cache it)
        self.has_recurrent_state = model.dims.linear is not None
        lin = (("lin_proj", "lin_conv", "lin_core", "lin_gated") if self.has_recurrent_state
               else ())
        self.bufs = StepBuffers(
            ids=i32 + 4 * lay.ids, positions=i32 + 4 * lay.positions, slots=i32 + 4 * lay.slots,
            cu_q=i32 + 4 * lay.cu_q, kv_lens=i32 + 4 * lay.kv_lens,
            sample_rows=i32 + 4 * lay.sample_rows, block_tables=kv.block_tables,
            state_slots=i32 + 4 * lay.state_slots,
            **{n: arena[n] for n in ("resid", "delta", "normed", "qkv", "q", "attn",
                                     "gate_up", "act", "sample_hidden", "logits", "part_o",
                                     "part_ml", "w_scratch") + lin})
        self.host_i32 = backend.alloc_host_pinned(4 * lay.total).view(np.int32)
        self.host_ids = backend.alloc_host_pinned(4 * limits.max_sample_rows).view(np.int32)
        self.pad_slot = limits.max_batch_size  # sampler slot owned by graph padding rows
        self._slot_of: dict[int, int] = {}
        self._free_slots = list(range(limits.max_batch_size - 1, -1, -1))
        self._row_state: list[tuple[int, int]] = [(-1, -1)] * limits.max_batch_size
        self.graphs: dict[int, GraphHandle] = {}
        #: the same decode steps without the sampler, for steps under grammar masks (the
        #: masks are filled on the host while these run; the sampler follows eagerly)
        self.forward_graphs: dict[int, GraphHandle] = {}
        self._masked_last = False  # the last step uploaded a grammar mask
        self._logprobs_last = False  # the last step asked the sampler for logprobs
        self.buckets = decode_buckets(limits.max_batch_size)

    # ---- StepExecutor ------------------------------------------------------------------
    def execute(self, steps: Sequence[SeqChunk]) -> list[StepResult]:
        """Run one step's chunks; each sampling chunk draws at its own RNG position (a
        verification chunk at each of its num_draft + 1 positions, on consecutive rows)."""
        if not steps:
            return []
        sampling_steps = [st for st in steps if st.sample]
        for st in steps:
            self._ensure_slot(st)
        decode = bool(self.graphs) and all(len(st.token_ids) == 1 and st.sample for st in steps)
        bucket = next((b for b in self.buckets if b >= len(steps)), 0) if decode else 0
        n_tokens, n_sample, max_q = pack_step(self.host_i32, self.layout, steps,
                                              self.block_size, pad_to=bucket)
        self._pack_state_slots(steps, max(len(steps), bucket))
        self._upload_inputs(steps, n_rows=max(len(steps), bucket))
        rows = [(st, i) for st in sampling_steps for i in range(st.num_draft + 1)]
        pad = n_sample - len(rows)
        self.sampler.prepare([self._slot_of[st.seq_id] for st, _ in rows] + [self.pad_slot] * pad,
                             [st.sampling for st, _ in rows] + [GREEDY] * pad,
                             [st.rng_position + i for st, i in rows] + [0] * pad, self.stream)
        want_logprobs = self._prepare_logprobs([st for st, _ in rows])
        masked = any(st.token_mask is not None for st, _ in rows)
        if decode and not masked:
            self._upload_token_masks([st for st, _ in rows])
            self.backend.launch_graph(self.graphs[bucket], self.stream)
        else:
            # the forward is enqueued first: the host fills the grammar masks while the
            # device runs it, and the sampler (queued after the mask upload) waits for both
            if decode:
                self.backend.launch_graph(self.forward_graphs[bucket], self.stream)
            else:
                plan = AttentionPlan(decode=False, num_seqs=len(steps), max_q_len=max_q)
                self.model.forward(self.stream, self.bufs, n_tokens, plan, n_sample)
            self._upload_token_masks([st for st, _ in rows])
            if n_sample:
                self.sampler.enqueue(self.stream, self.bufs.logits, n_sample)
        out: list[StepResult] = [None] * len(steps)
        if rows:
            self.backend.copy_d2h(self.host_ids[:len(rows)], self.sampler.out_ids, self.stream)
        self.backend.synchronize(self.stream)
        logprobs = self.sampler.read_logprobs(len(rows)) if want_logprobs else None
        j = 0
        for i, st in enumerate(steps):
            if st.sample:
                n = st.num_draft + 1
                got = [int(t) for t in self.host_ids[j:j + n]]
                out[i] = (tuple(got) if st.num_draft else
                          got[0] if logprobs is None or st.logprobs < 0 else
                          _token_logprobs(got[0], logprobs, j, st.logprobs))
                j += n
        return out

    def release(self, seq_id: int) -> None:
        """Forget a sequence. Its block-table rows are invalidated too: a live sequence's
        table only grows, but a released one may come back with different blocks."""
        self._row_state = [(-1, -1) if st[0] == seq_id else st for st in self._row_state]
        slot = self._slot_of.pop(seq_id, None)
        if slot is not None:
            self._free_slots.append(slot)

    def state_slot_usage(self) -> tuple[int, int]:
        """(slots held, slots in the pool) of the recurrent-state pools: a hybrid model's
        sequences each hold one from their first chunk to their release; (0, 0) for a model
        without recurrent state."""
        if not self.has_recurrent_state:
            return 0, 0
        return len(self._slot_of), self.max_batch_size

    def read_logits(self, rows: int) -> np.ndarray:
        """f32 logits of the last step's first `rows` sampled rows (for parity checks)."""
        return self.backend.download(self.bufs.logits, np.float32, (rows, self.vocab_size))

    # ---- internals ---------------------------------------------------------------------
    def _upload_token_masks(self, row_chunks: Sequence[SeqChunk]) -> None:
        """Grammar masks of this step's sampling rows (row j samples for row_chunks[j]),
        filled into the sampler's pinned rows; rows without one sample unmasked."""
        fills = [st.token_mask for st in row_chunks]
        if self.sampler.token_bitmask is None:
            if any(fills):
                raise RuntimeError("a chunk carries a grammar mask, but the sampler was built "
                                   "without token_masks")
            return
        if not any(fills) and not self._masked_last:
            return  # the device's mask rows already say "none"
        self._masked_last = any(fills)
        for row, fill in enumerate(fills):
            if fill is not None:
                fill(self.sampler.host_bitmask, row)
        self.sampler.upload_token_masks([f is not None for f in fills], self.stream)

    def _prepare_logprobs(self, row_chunks: Sequence[SeqChunk]) -> bool:
        """Tell the sampler which rows report logprobs (row j samples for row_chunks[j]);
        True when any does. Rows that ask nothing cost the logprobs launch nothing."""
        want = [st.logprobs if not st.num_draft else -1 for st in row_chunks]
        asked = any(n >= 0 for n in want)
        if self.sampler.max_logprobs and (asked or self._logprobs_last):
            self.sampler.prepare_logprobs(want, self.stream)
        elif asked:
            raise RuntimeError("a chunk asks for logprobs, but the sampler was built without "
                               "max_logprobs")
        self._logprobs_last = asked
        return asked

    def _pack_state_slots(self, steps: Sequence[SeqChunk], n_rows: int) -> None:
        """Each row's recurrent-state slot (its sampler slot; padding rows the pad slot)."""
        if not self.has_recurrent_state:
            return
        base = self.layout.state_slots
        self.host_i32[base:base + n_rows] = ([self._slot_of[st.seq_id] for st in steps]
                                             + [self.pad_slot] * (n_rows - len(steps)))

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
            if self.has_recurrent_state and st.start_pos != 0:
                # the recurrent state of positions < start_pos exists nowhere (no snapshots)
                raise RuntimeError(f"sequence {st.seq_id} starts at position {st.start_pos}: "
                                   "a hybrid model's recurrent state must be computed from "
                                   "position 0 (prefix caching needs state snapshots)")
            if not self._free_slots:
                raise RuntimeError(f"more than {self.max_batch_size} live sequences; release "
                                   "finished sequences before starting new ones")
            slot = self._slot_of[st.seq_id] = self._free_slots.pop()
        self.sampler.assign(slot, st.history.prompt_ids, st.sampling, st.history.drawn_counts)

    def _upload_inputs(self, steps: Sequence[SeqChunk], n_rows: int) -> None:
        """Copy the packed step inputs, and the block-table rows whose contents changed.

        A row is rewritten only when a different sequence occupies it or its sequence
        grew a block, so steady decode uploads a row once every block_size tokens.
        """
        self.backend.copy_h2d(self.bufs.ids, self.host_i32, self.stream)
        for row in range(n_rows):
            if row < len(steps):
                st = steps[row]
                state, table = (st.seq_id, len(st.block_table)), st.block_table
            else:
                state, table = (-1, 1), [0]  # graph padding rows read block 0
            if self._row_state[row] != state:
                self.kv.set_block_table(row, table)
                self._row_state[row] = state
        self.kv.upload_block_tables(self.stream)

    def capture_graphs(self) -> None:
        """Capture one decode graph per bucket, largest first (nano-vllm's order)."""
        dims = self.model.dims
        for bs in sorted(self.buckets, reverse=True):
            dummy = [SeqChunk(-1 - i, [0], 0, [0], GREEDY) for i in range(bs)]
            pack_step(self.host_i32, self.layout, dummy, self.block_size)
            for i in range(bs):  # padding-style rows: never write the KV cache
                self.host_i32[self.layout.slots + i] = -1
                self.host_i32[self.layout.state_slots + i] = self.pad_slot
            self._upload_inputs([], bs)
            self.sampler.prepare([self.pad_slot] * bs, [GREEDY] * bs, [0] * bs)
            splits = self.limits.decode_splits(bs, dims.kv_heads)
            plan = AttentionPlan(decode=True, num_seqs=bs, num_splits=splits)
            # Warm-up outside capture resolves every kernel before the graph is recorded.
            self.model.forward(self.stream, self.bufs, bs, plan, bs)
            self.sampler.enqueue(self.stream, self.bufs.logits, bs)
            self.backend.synchronize(self.stream)
            self.backend.begin_capture(self.stream)
            self.model.forward(self.stream, self.bufs, bs, plan, bs)
            self.sampler.enqueue(self.stream, self.bufs.logits, bs)
            self.graphs[bs] = self.backend.end_capture(self.stream)
            if self.sampler.token_bitmask is not None:
                self.backend.begin_capture(self.stream)
                self.model.forward(self.stream, self.bufs, bs, plan, bs)
                self.forward_graphs[bs] = self.backend.end_capture(self.stream)
        self.backend.synchronize(self.stream)


def _token_logprobs(token: int, logprobs: tuple[np.ndarray, np.ndarray, np.ndarray],
                    row: int, top_n: int) -> TokenLogprobs:
    """Row `row` of the sampler's logprob buffers as the sampled token's `TokenLogprobs`."""
    sampled, top_ids, top_lps = logprobs
    return TokenLogprobs(token, float(sampled[row]),
                         tuple((int(top_ids[row, k]), float(top_lps[row, k]))
                               for k in range(top_n)))
