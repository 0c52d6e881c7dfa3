"""Multi-token prediction (MTP): the draft head Qwen3.5 / Qwen3-Next checkpoints carry.

transformers skips the `mtp.*` tensors; the architecture, as published with the checkpoints:
for position p, with the main model's output hidden state h_p (after its final norm) and the
token x_{p+1} that follows it,

    e = RMSNorm_e(embed(x_{p+1}))     mtp.pre_fc_norm_embedding (the main model's embedding)
    g = RMSNorm_h(h_p)                mtp.pre_fc_norm_hidden
    u = fc([e | g])                   mtp.fc [H, 2H]
    u = decoder layer(u, position p)  mtp.layers.0: gated full attention (its own KV cache)
                                      and the family's MLP, like a main-model layer
    o = RMSNorm(u)                    mtp.norm
    logits = lm_head(o)               the main model's head

The argmax of the logits drafts x_{p+2}; feeding (x_{p+2}, o) at position p + 1 drafts
x_{p+3}, and so on: one MTP layer gives K drafts autoregressively. Norms are (1 + w) like the
main model's. fc([e | g]) = W_e e + W_g g: the loader stores W's two column halves as two
[H, H] matrices (`fc_half_moves`), the first product lands in the residual stream, the
second in `delta`, and the layer's fused add + RMSNorm sums them.

Drafting rides on the step (`MtpProposer`): after the main forward, each sequence runs the
MTP over the positions the step kept (KV for the MTP layer's attention), the last of them
drafts the first token, and K - 1 single-row passes draft the rest. Every op is a main-model
op, so every op has its reference kernel on the host backend.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from ..core.config import ModelConfig
from ..core.dtype import DType
from ..core.sampling import GREEDY
from ..runtime.buffers import BufferArena
from ..runtime.gpu import DevicePtr, GpuBackend, Stream
from ..runtime.ops import embedding, matmul, norm
from ..runtime.ops.argmax import argmax_scratch_bytes
from .batch import SeqChunk, StepResult, accept
from .loaders.dense import WeightPlan
from .loaders.hybrid import Qwen35Loader, RowMove
from .loaders.linear_plan import add_linear
from .model import AttentionPlan, DenseDecoderModel, LayerWeights, StepBuffers

if TYPE_CHECKING:
    from .runner import RunnerLimits

#: where a checkpoint keeps the MTP head's tensors
MTP_PREFIX = "mtp."


def mtp_layer_index(cfg: ModelConfig) -> int:
    """The MTP layer's index in the weight plan's `l{i}.` buffers: after the main layers."""
    return cfg.num_hidden_layers


def plan_mtp(loader: Qwen35Loader, plan: WeightPlan, cfg: ModelConfig,
             names: Container[str]) -> None:
    """Add the MTP head's tensors to `plan`: `mtp.fc`, its norms, and its decoder layer as
    layer `mtp_layer_index` (a full-attention layer of the family, MLP included)."""
    h, d, i = cfg.hidden_size, cfg.head_dim, mtp_layer_index(cfg)
    p = MTP_PREFIX + "layers.0."
    plan.add("mtp.fc", [(MTP_PREFIX + "fc.weight", (h, 2 * h))])
    for buffer, name in (("mtp.norm_embed", "pre_fc_norm_embedding"),
                         ("mtp.norm_hidden", "pre_fc_norm_hidden"), ("mtp.norm", "norm")):
        plan.add(buffer, [(f"{MTP_PREFIX}{name}.weight", (h,))])
    q_rows, kv_rows = 2 * cfg.num_attention_heads * d, cfg.num_key_value_heads * d
    add_linear(plan, f"l{i}.qkv", [(p + "self_attn.q_proj.weight", q_rows),
                                   (p + "self_attn.k_proj.weight", kv_rows),
                                   (p + "self_attn.v_proj.weight", kv_rows)], h)
    add_linear(plan, f"l{i}.o", [(p + "self_attn.o_proj.weight", h)], cfg.num_attention_heads * d)
    plan.add(f"l{i}.q_norm", [(p + "self_attn.q_norm.weight", (d,))])
    plan.add(f"l{i}.k_norm", [(p + "self_attn.k_norm.weight", (d,))])
    plan.add(f"l{i}.in_norm", [(p + "input_layernorm.weight", (h,))])
    plan.add(f"l{i}.post_norm", [(p + "post_attention_layernorm.weight", (h,))])
    loader.plan_layer_mlp(plan, cfg, i, p, names)


def fc_half_moves(hidden: int) -> list[RowMove]:
    """Rows of `mtp.fc` [H, 2H] as H-wide half rows: half 2r (W_e's row r) goes to row r,
    half 2r + 1 (W_g's row r) to row H + r, leaving W_e and W_g as two [H, H] matrices."""
    return ([RowMove(2 * r, r, 1) for r in range(hidden)]
            + [RowMove(2 * r + 1, hidden + r, 1) for r in range(hidden)])


@dataclass(frozen=True, slots=True)
class MtpHead:
    """The MTP head's device weights (the embedding and LM head are the model's)."""

    fc: DevicePtr            # [W_e; W_g], each [H, H] (fc_half_moves)
    norm_embed: DevicePtr
    norm_hidden: DevicePtr
    layer: LayerWeights
    final_norm: DevicePtr

    def forward(self, model: DenseDecoderModel, s: Stream, b: StepBuffers, hidden_in: DevicePtr,
                t: int, plan: AttentionPlan, n_sample: int) -> None:
        """MTP over the step's t rows (token ids in b.ids, the main hidden states in
        `hidden_in`): f32 logits of the sample rows into b.logits; every row's output
        hidden o (after mtp.norm) stays in b.normed."""
        d, kc = model.dims, model.kc
        h, off = d.hidden, d.norm_offset
        embedding.embedding(kc, s, b.ids, model.embed, b.delta, t, h, d.vocab)
        norm.rmsnorm(kc, s, b.delta, self.norm_embed, b.normed, t, h, d.eps, off)
        matmul.linear(kc, s, b.normed, self.fc, b.resid, t, h, h)
        norm.rmsnorm(kc, s, hidden_in, self.norm_hidden, b.normed, t, h, d.eps, off)
        matmul.linear(kc, s, b.normed, self.fc + 2 * h * h, b.delta, t, h, h)
        lw = self.layer
        norm.add_rmsnorm(kc, s, b.resid, b.delta, lw.in_norm, b.normed, t, h, d.eps, off)
        model._attention(s, b, lw, t, plan)   # the main layers' attention, on this layer
        norm.add_rmsnorm(kc, s, b.resid, b.delta, lw.post_norm, b.normed, t, h, d.eps, off)
        lw.mlp.forward(kc, s, b, t)
        norm.add_rmsnorm(kc, s, b.resid, b.delta, self.final_norm, b.normed, t, h, d.eps, off)
        if n_sample:
            embedding.embedding(kc, s, b.sample_rows, b.normed, b.sample_hidden, n_sample, h, t)
            model.lm_head.linear(kc, s, b.sample_hidden, b.logits, n_sample, out_f32=True)


@dataclass(frozen=True, slots=True)
class MtpBuffers:
    """The proposer's device scratch (carved from the arena).

    `hidden` holds the main step's output hidden rows (rows < max_tokens) and, at row
    max_tokens + slot, a sequence's carried last row (a prefill chunk that does not sample
    ends on a position whose next token arrives with the next chunk); `rows` are gather
    indices into it; `hidden_in` the gathered rows an MTP pass reads."""

    hidden: DevicePtr
    hidden_in: DevicePtr
    rows: DevicePtr
    ids: DevicePtr
    argmax_partials: DevicePtr
    argmax_counters: DevicePtr
    max_tokens: int


_MTP_BUFFERS = ("mtp_hidden", "mtp_hidden_in", "mtp_rows", "mtp_ids", "mtp_argmax_partials",
                "mtp_argmax_counters")


def reserve_mtp_buffers(arena: BufferArena, limits: "RunnerLimits", hidden: int,
                        vocab: int) -> None:
    """The proposer's scratch, sized for the runner's largest step (see MtpBuffers)."""
    t, rows = limits.max_tokens, limits.max_sample_rows
    partials, counters = argmax_scratch_bytes(rows, vocab)
    arena.reserve("mtp_hidden", DType.BF16, (t + limits.max_batch_size, hidden))
    arena.reserve("mtp_hidden_in", DType.BF16, (t, hidden))
    arena.reserve("mtp_rows", DType.I32, (t,))
    arena.reserve("mtp_ids", DType.I32, (rows,))
    arena.reserve("mtp_argmax_partials", DType.U8, (partials,))
    arena.reserve("mtp_argmax_counters", DType.U8, (counters,))


def bind_mtp_buffers(arena: BufferArena, backend: GpuBackend,
                     limits: "RunnerLimits") -> MtpBuffers:
    """The reserved scratch, once allocated (the argmax counters must start at zero)."""
    ptrs = [arena[name] for name in _MTP_BUFFERS]
    backend.memset(ptrs[-1], 0, arena.slice("mtp_argmax_counters").nbytes)
    return MtpBuffers(*ptrs, max_tokens=limits.max_tokens)


#: runs one MTP pass: (chunks, table, rows) -> the argmax token of each sampling chunk;
#: row i of the pass reads its main hidden state from table row rows[i]
MtpPass = Callable[[Sequence[SeqChunk], DevicePtr, Sequence[int]], list[int]]


@dataclass
class MtpProposer:
    """Runs the MTP head after each step and keeps each sequence's next drafts."""

    backend: GpuBackend
    model: DenseDecoderModel
    head: MtpHead
    bufs: MtpBuffers
    num_draft_tokens: int
    block_size: int
    drafts: dict[int, list[int]] = field(default_factory=dict)
    carried: set[int] = field(default_factory=set)

    def forget(self, seq_id: int) -> None:
        self.drafts.pop(seq_id, None)
        self.carried.discard(seq_id)

    def save_hidden(self, s: Stream, b: StepBuffers, n_tokens: int, normed_final: bool) -> None:
        """Keep the main step's output hidden rows (before the MTP passes overwrite the
        scratch). `normed_final`: the forward ran its final norm (it sampled);
        else run it here over the residual stream it left."""
        d = self.model.dims
        if not normed_final:
            norm.add_rmsnorm(self.model.kc, s, b.resid, b.delta, self.model.final_norm,
                             b.normed, n_tokens, d.hidden, d.eps, d.norm_offset)
        self.backend.copy_d2d(self.bufs.hidden, b.normed, 2 * n_tokens * d.hidden, s)

    def propose(self, run: MtpPass, s: Stream, b: StepBuffers, steps: Sequence[SeqChunk],
                results: Sequence[StepResult], slot_of: Mapping[int, int]) -> None:
        """Draft up to K tokens after every sampling chunk of the step just run: one pass
        over the kept positions (its sampling rows draft the first token), then K - 1
        one-row passes, each fed the last draft and the previous pass's output hidden. A
        chain stops where the sequence's block table ends (its KV has no slot there)."""
        chunks, gather, carry_out = mtp_catch_up(steps, results, slot_of,
                                                 self.bufs.max_tokens, self.carried)
        for st in steps:
            self.drafts.pop(st.seq_id, None)
        drafting = [c for c in chunks if c.sample]
        firsts = run(chunks, self.bufs.hidden, gather) if chunks else []
        row_bytes = 2 * self.model.dims.hidden
        for _, row, slot in carry_out:   # after the pass read the rows they replace
            self.backend.copy_d2d(self.bufs.hidden + row_bytes * (self.bufs.max_tokens + slot),
                                  self.bufs.hidden + row_bytes * row, row_bytes, s)
        out = {c.seq_id: [t] for c, t in zip(drafting, firsts)}
        last = {c.seq_id: c.start_pos + len(c.token_ids) - 1 for c in drafting}
        for _ in range(self.num_draft_tokens - 1):
            prev = [i for i, c in enumerate(drafting)
                    if last[c.seq_id] + 1 < len(c.block_table) * self.block_size]
            if not prev:
                break
            drafting = [SeqChunk(drafting[i].seq_id, [out[drafting[i].seq_id][-1]],
                                 last[drafting[i].seq_id] + 1, drafting[i].block_table, GREEDY)
                        for i in prev]
            for c, t in zip(drafting, run(drafting, b.sample_hidden, prev)):
                out[c.seq_id].append(t)
                last[c.seq_id] += 1
        self.drafts.update(out)


def mtp_catch_up(steps: Sequence[SeqChunk], results: Sequence[StepResult],
                 slot_of: Mapping[int, int], max_tokens: int, carried: set[int]
                 ) -> tuple[list[SeqChunk], list[int], list[tuple[int, int, int]]]:
    """The first MTP pass of a step: per chunk, a chunk over the positions whose KV the step
    kept, each fed the token that follows it (a verification keeps its accepted drafts);
    the gather row of each MTP row's main hidden state; and (seq, row, slot) of the hidden
    rows to carry to the next step (the last position of a chunk that did not sample).
    Updates `carried` (the sequences whose carry row is live)."""
    chunks: list[SeqChunk] = []
    gather: list[int] = []
    carry_out: list[tuple[int, int, int]] = []
    base = 0
    for st, got in zip(steps, results):
        n = len(st.token_ids)
        rows = list(range(base, base + n))
        base += n
        if st.sample:
            assert got is not None
            samples = list(got) if isinstance(got, tuple) else [got]
            real = n - st.num_draft
            emitted = accept(st.token_ids[real:], samples) if st.num_draft else samples
            kept = real - 1 + len(emitted)
            nxt = st.token_ids[1:kept] + [emitted[-1]]
            rows = rows[:kept]
        else:
            nxt = st.token_ids[1:]
            carry_out.append((st.seq_id, rows[-1], slot_of[st.seq_id]))
            rows = rows[:-1]
        start = st.start_pos
        if st.seq_id in carried:
            nxt = [st.token_ids[0]] + nxt
            rows = [max_tokens + slot_of[st.seq_id]] + rows
            start -= 1
        carried.discard(st.seq_id)
        if nxt:
            chunks.append(SeqChunk(st.seq_id, nxt, start, st.block_table, GREEDY,
                                   sample=st.sample))
            gather += rows
    carried.update(seq for seq, _, _ in carry_out)
    return chunks, gather, carry_out
