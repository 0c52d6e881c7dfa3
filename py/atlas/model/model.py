"""The decoder forward pass, written once for eager prefill and captured decode.

The residual stream stays in bf16 like transformers: `resid += delta` is rounded to bf16
inside the fused add+RMSNorm kernel, and every layer reads `normed` and writes `delta`.
`Residual` tracks whether a sublayer's update is pending in `delta`.
The forward launches kernels only; the step's inputs (token ids, positions, KV slots,
block tables) are already in device buffers, which is what makes it graph-capturable.
Each layer's MLP is a block chosen by the config (`DenseMlp` here, the mixture of experts in
`moe.py`); attention and the residual path are the same for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..core.config import LinearAttentionConfig, ModelConfig
from ..core.dtype import DType
from ..runtime.gpu import DevicePtr, Stream
from ..runtime.ops import KernelCache
from ..runtime.ops import (activation, attention, attention_long, attention_verify, bias,
                           decode_persistent, embedding, gating, kv_quant, matmul, norm, rope)
from ..runtime.ops import moe as moe_ops
from ..runtime.ops.attention_sm90 import PrefillPartials
from ..runtime.ops.decode_persistent import PersistentTables
from ..runtime.ops.matmul_quant import Bf16Linear, LinearWeight
from .gated_deltanet import GatedDeltaNetWeights, gated_deltanet

if TYPE_CHECKING:
    from .parallel import TensorParallel


def dense_mlp_width(cfg: ModelConfig) -> int:
    """The widest SwiGLU MLP run through the step's `gate_up`/`act` buffers: the dense
    layers' intermediate size, and in a mixture-of-experts model only where some layer is
    dense, or the shared expert's (the routed experts have scratch of their own)."""
    moe = cfg.moe
    if moe is None:
        return cfg.intermediate_size
    widths = [moe.shared_intermediate_size]
    if any(not moe.is_sparse(i) for i in range(cfg.num_hidden_layers)):
        widths.append(cfg.intermediate_size)
    return max(widths) or moe.intermediate_size  # never a zero-width buffer


@dataclass(frozen=True, slots=True)
class Dims:
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    #: width of the dense SwiGLU scratch (see dense_mlp_width)
    inter: int
    vocab: int
    layers: int
    eps: float
    #: hybrid families: each q head is followed by its sigmoid output gate in the q
    #: projection, RMSNorm weights apply as (1 + w), only rotary_dim dims of a head rotate
    gated_attn: bool = False
    norm_offset: bool = False
    rotary_dim: int = 0
    linear: LinearAttentionConfig | None = None
    #: Gemma 3: the softmax scale of q . k (0: head_dim^-0.5) and the token embeddings' scale
    attn_scale: float = 0.0
    embed_scale: float = 1.0
    #: the q/k/v and o_proj biases are added to the projections' float32 sums, one rounding
    #: (ModelConfig.bias_in_f32: gpt-oss), through the step's `proj_f32` scratch
    bias_f32: bool = False
    #: RMSNorm weights times the float32 normalized row, one rounding (ModelConfig.
    #: norm_one_round: gpt-oss)
    norm_one_round: bool = False

    @property
    def proj_f32_width(self) -> int:
        """Width of the float32 scratch of a biased projection (`bias_f32`; 0: none)."""
        return max(self.qkv_width, self.hidden) if self.bias_f32 else 0

    @property
    def q_pitch(self) -> int:
        """Distance between q heads in the qkv row (a gated head carries its gate)."""
        return 2 * self.head_dim if self.gated_attn else self.head_dim

    @property
    def q_width(self) -> int:
        """Width of the attention rows o_proj reads (compact whatever attn_dim is)."""
        return self.heads * self.head_dim

    @property
    def attn_dim(self) -> int:
        """The head dim attention computes at, the length of the K/V cache rows and the
        rotated q rows: head_dim, or for a head dim no attention kernel is compiled for
        (Phi-3-mini's 96) the D it is padded to (ops.attention.padded_head_dim: 128, those
        rows zero past head_dim); the projections stay compact either way."""
        return attention.padded_head_dim(self.head_dim)

    @property
    def padded(self) -> bool:
        """Whether heads are padded (attn_dim > head_dim): every attention launch then
        takes proj_dim = head_dim, and decode runs on the long kernel only."""
        return self.attn_dim != self.head_dim

    @property
    def qkv_width(self) -> int:
        return self.heads * self.q_pitch + 2 * self.kv_heads * self.head_dim

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> "Dims":
        return cls(cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
                   cfg.head_dim, dense_mlp_width(cfg), cfg.vocab_size, cfg.num_hidden_layers,
                   float(cfg.rms_norm_eps), gated_attn=cfg.is_hybrid,
                   norm_offset=cfg.norm_offset, rotary_dim=cfg.rotary_dim,
                   linear=cfg.linear_attention, attn_scale=cfg.attention_scale or 0.0,
                   embed_scale=cfg.embed_scale, bias_f32=cfg.bias_in_f32,
                   norm_one_round=cfg.norm_one_round)


class MlpBlock(Protocol):
    """A layer's MLP: reads the step's `normed` rows and writes its `delta` rows."""

    def forward(self, kc: KernelCache, s: Stream, b: "StepBuffers", t: int,
                norm: "moe_ops.RouterNorm | None" = None) -> None: ...

    def router_takes_norm(self, kc: KernelCache, t: int) -> bool:
        """Whether `forward` may be given the pending residual add + RMSNorm before the
        block (`norm`) for its router launch to do instead of an add_rmsnorm launch."""
        ...


def swiglu(kc: KernelCache, s: Stream, b: "StepBuffers", w_gate_up: DevicePtr,
           w_down: DevicePtr, out: DevicePtr, t: int, hidden: int, inter: int) -> None:
    """out = down(silu(gate(normed)) * up(normed)) through the step's gate_up/act scratch."""
    matmul.linear(kc, s, b.normed, w_gate_up, b.gate_up, t, 2 * inter, hidden)
    # SwiGLU fused into the down projection's input where `matmul.fuses_silu` allows (decode
    # steps on the GEMV); otherwise silu_mul into `act`, then the GEMM
    matmul.linear_silu(kc, s, b.gate_up, w_down, out, t, hidden, inter, scratch=b.act)


@dataclass(frozen=True, slots=True)
class DenseMlp:
    """The gated MLP of a dense layer: [gate|up] fused weight [2I, H], down [H, I], each
    bf16 or quantized (the LinearWeight interface); SwiGLU, or with `gelu` the tanh-GELU
    GLU (Gemma 3), which the bf16 single-row GEMV and the decode GEMM (9..256 rows) end
    gate_up with (else gate_up, gelu_tanh_mul, down)."""

    gate_up: LinearWeight
    down: LinearWeight
    gelu: bool = False

    def forward(self, kc: KernelCache, s: Stream, b: "StepBuffers", t: int,
                norm: "moe_ops.RouterNorm | None" = None) -> None:
        if norm is not None:
            raise ValueError("DenseMlp: no router to take the norm")
        self.project(kc, s, b, t, b.delta)

    def router_takes_norm(self, kc: KernelCache, t: int) -> bool:
        """A dense MLP has no router: its input norm is the model's launch."""
        return False

    def fuses_act(self, kc: KernelCache, t: int) -> bool:
        """Whether gate_up ends with the activation (the weight's route fuses it)."""
        return self.gate_up.fuses_swiglu(kc, t, self.gelu)

    def project(self, kc: KernelCache, s: Stream, b: "StepBuffers", t: int,
                out: DevicePtr) -> None:
        """out = the MLP of the step's `normed` rows (a quantized MoE layer's shared expert
        writes beside the routed experts' delta)."""
        if self.fuses_act(kc, t):
            # gate_up ends with the SwiGLU (no silu_mul): a quantized GEMV, or the bf16 decode
            # GEMM, batch-1 GEMV or prefill GEMM (a quantized weight dequantized for them)
            self.gate_up.linear_swiglu(kc, s, b.normed, b.act, t, self.gelu,
                                       w_scratch=b.w_scratch)
            self.down.linear(kc, s, b.act, out, t, w_scratch=b.w_scratch)
            return
        self.gate_up.linear(kc, s, b.normed, b.gate_up, t, w_scratch=b.w_scratch)
        self.down_proj(kc, s, b, t, out)

    def down_proj(self, kc: KernelCache, s: Stream, b: "StepBuffers", t: int,
                  out: DevicePtr | None = None) -> None:
        """out (default delta) = down(act(gate_up)): the half after gate_up (which the
        model may have run with the RMSNorm fused in)."""
        if self.gelu:
            activation.gelu_tanh_mul(kc, s, b.gate_up, b.act, t, self.down.k)
            self.down.linear(kc, s, b.act, b.delta if out is None else out, t,
                             w_scratch=b.w_scratch)
            return
        # SwiGLU fused into the down projection's input where that measured faster
        self.down.linear_silu(kc, s, b.gate_up, b.delta if out is None else out, t,
                              act_scratch=b.act, w_scratch=b.w_scratch)


@dataclass(frozen=True, slots=True)
class LayerWeights:
    qkv: LinearWeight | None  # attention weights (None) and caches (0) are absent on a
    o: LinearWeight | None    # linear-attention layer
    mlp: MlpBlock
    in_norm: DevicePtr
    post_norm: DevicePtr
    q_norm: DevicePtr  # 0 when the family has no q/k norm
    k_norm: DevicePtr
    k_cache: DevicePtr
    v_cache: DevicePtr
    #: a hybrid model's linear-attention (Gated-DeltaNet) layer: its weights and state pools
    linear: GatedDeltaNetWeights | None = None
    #: f32 [2, hkv] K/V scales of a layer whose KV pools are quantized (0: bf16 pools)
    kv_scales: DevicePtr = 0
    #: the format of a quantized layer's pools (DType.FP8E4M3 or DType.E2M1 for NVFP4)
    kv_dtype: DType = DType.BF16
    #: bf16 [qkv_width] q/k/v biases added to the qkv projection (Qwen2 family); 0: none
    qkv_bias: DevicePtr = 0
    #: this layer's cos/sin table when not the model's: a NoPE layer's identity table
    #: (cos 1, sin 0: every rotary kernel then leaves q and k exactly as they are)
    cos_sin: DevicePtr = 0
    #: bf16 [heads * head_dim] and [kv_heads * head_dim] RMSNorm weights applied to the q
    #: and k parts of the qkv projection over all heads at once (MiniMax-M2), right after it;
    #: q_norm / k_norm (per head, inside the rotary kernels) are then 0
    whole_qk_norm: tuple[DevicePtr, DevicePtr] | None = None
    #: Gemma 3's RMSNorm weights of the attention's and the MLP's outputs, applied before
    #: each is added to the residual stream (0: added as they are)
    attn_out_norm: DevicePtr = 0
    mlp_out_norm: DevicePtr = 0
    #: the layer's sliding attention window where it binds (shorter than the engine's
    #: max_seq_len: model/windows.py); 0: every earlier key
    window: int = 0
    #: bf16 [hidden] o_proj bias, joining its float32 sums (gpt-oss, Dims.bias_f32); 0: none
    o_bias: DevicePtr = 0
    #: bf16 [heads] attention sinks (gpt-oss: one more logit a q head in each softmax
    #: denominator, ops.attention); 0: none
    sinks: DevicePtr = 0


@dataclass(frozen=True, slots=True)
class KvStage:
    """Where quantized-KV layers stage a step's rotated bf16 K/V before quantizing
    (ops.kv_quant): bf16 [2, hkv, rows, head_dim] and the identity slots i32 [rows]
    (0..rows-1) that address it as a one-block cache of `rows` rows."""

    stage: DevicePtr
    slots: DevicePtr
    rows: int
    #: tokens of a prefill that calibrate a layer's unset scales (--fp8-kv-calibration-tokens)
    calib_tokens: int


@dataclass(frozen=True, slots=True)
class StepBuffers:
    """Device addresses of one step's inputs and scratch (carved from the BufferArena)."""

    ids: DevicePtr
    positions: DevicePtr
    slots: DevicePtr
    cu_q: DevicePtr
    kv_lens: DevicePtr
    sample_rows: DevicePtr
    block_tables: DevicePtr
    resid: DevicePtr
    delta: DevicePtr
    normed: DevicePtr
    qkv: DevicePtr
    q: DevicePtr
    attn: DevicePtr
    gate_up: DevicePtr
    act: DevicePtr
    sample_hidden: DevicePtr   # normed hidden rows of the tokens that sample
    logits: DevicePtr
    part_o: DevicePtr
    part_ml: DevicePtr
    #: u32 [max_seqs, kv_heads] split tickets of decode attention: zero at allocation, and
    #: every launch leaves them zero
    attn_counters: DevicePtr
    #: bf16 [n, k] scratch a quantized weight dequantizes into for GEMM-sized steps (0: none)
    w_scratch: DevicePtr = 0
    #: hybrid models: i32 [max_seqs] recurrent-state slot per sequence, and the
    #: linear-attention scratch (see gated_deltanet.LinearScratch); 0 for dense models
    state_slots: DevicePtr = 0
    #: i32 [max_seqs] the slot each decode row leaves its recurrent state in (gdn_decode)
    state_out: DevicePtr = 0
    lin_proj: DevicePtr = 0
    lin_conv: DevicePtr = 0
    lin_core: DevicePtr = 0
    lin_gated: DevicePtr = 0
    #: f32 [tokens, Dims.proj_f32_width]: a biased projection's float32 sums (bias_f32)
    proj_f32: DevicePtr = 0


@dataclass(slots=True)
class Residual:
    """The residual stream's state during one forward (it lives in b.resid): `pending`
    says `delta` holds a sublayer's update not yet added (False before the first layer).
    Python bookkeeping at capture time: the graph replays the same sequence every step."""

    pending: bool = False
    #: the RMSNorm weight the pending delta takes before it is added (0: none; Gemma 3)
    out_norm: DevicePtr = 0
    #: b.resid is not written yet: the first norm looks the step's token embeddings up in
    #: its own launch (ops/norm.embed_norm_fuses)
    embed: bool = False


@dataclass(frozen=True, slots=True)
class AttentionPlan:
    """How this step attends: prefill (packed variable-length queries) or decode (split-K)."""

    decode: bool
    num_seqs: int
    max_q_len: int = 1
    num_splits: int = 1
    #: keys one sequence appends in this step: 1, or K + 1 in a verification step (its rows
    #: consecutive, in position order, attending to the keys the earlier ones append). The
    #: rope-fused kernel computes those keys itself up to DECODE_ROPE_MAX_STEP_KEYS of them;
    #: past that K/V are appended by their own launch before attention reads them
    step_keys: int = 1
    #: a prefill-shaped step's leading one-token rows (sequences decoding beside prompt
    #: chunks, which the scheduler puts first): attended by the split-K decode kernel with
    #: `num_splits`, the rest by the prefill kernel
    decode_rows: int = 0
    #: the partial buffers' splits a row (b.part_o): the tensor-core kernel's launch may take
    #: up to this many (ops/attention_long.long_launch_splits); 0: num_splits
    split_capacity: int = 0
    #: decode rows attend on batch 1's CUDA-core kernels whatever their count (never the
    #: tensor-core kernel's batch routing): a row-invariant runner's steps (runner.py), whose
    #: rows must compute what a batch-1 step computes
    row_invariant: bool = False
    #: an eager prefill step's longest history after it (keys, its chunk's own included):
    #: lets prefill attention split a short chunk's keys across the device
    #: (ops/attention_sm90.split_plan); 0: unknown, no split
    max_kv_len: int = 0
    #: (token, split) pairs of every head the partial buffers (b.part_o, b.part_ml) hold
    partial_slots: int = 0


def persistent_pointers(dims: Dims, layers: list[LayerWeights], tensor_parallel: bool
                        ) -> list[dict[str, DevicePtr]] | None:
    """The per-layer pointers of the persistent batch-1 decode kernel (ops/decode_persistent
    LAYER_POINTERS), or None where the model is not one it covers: a single-device dense
    model with bf16 projections of the classic layout (q heads head_dim apart, the whole
    head rotating in every layer, plain norm weights, no biases) and bf16 KV caches."""
    d = dims
    if (tensor_parallel or d.gated_attn or d.norm_offset or d.norm_one_round
            or d.linear is not None or d.padded
            or (d.rotary_dim or d.head_dim) != d.head_dim
            or decode_persistent.check_shapes(d.hidden, d.heads, d.kv_heads, d.head_dim,
                                              d.inter)):
        return None
    shapes = ((d.qkv_width, d.hidden), (d.hidden, d.q_width), (2 * d.inter, d.hidden),
              (d.hidden, d.inter))
    rows = []
    for lw in layers:
        mlp = lw.mlp
        if (not isinstance(mlp, DenseMlp) or lw.linear is not None or lw.kv_scales
                or lw.qkv_bias or lw.cos_sin or lw.whole_qk_norm or lw.window or lw.o_bias
                or lw.sinks):
            return None
        projs = (lw.qkv, lw.o, mlp.gate_up, mlp.down)
        if not all(isinstance(w, Bf16Linear) and (w.n, w.k) == shape
                   for w, shape in zip(projs, shapes)):
            return None
        qkv, o, gate_up, down = (w.ptr for w in projs if isinstance(w, Bf16Linear))
        rows.append(dict(in_norm=lw.in_norm, qkv_w=qkv, q_norm=lw.q_norm, k_norm=lw.k_norm,
                         k_cache=lw.k_cache, v_cache=lw.v_cache, o_w=o,
                         post_norm=lw.post_norm, gate_up_w=gate_up, down_w=down))
    return rows


class DenseDecoderModel:
    """Embedding -> layers -> final norm -> LM head over pre-uploaded weights.

    With `tp` set this is one rank of a tensor-parallel group: `dims` are the rank's
    (its heads and MLP shard), the projections after attention and the MLP are followed by
    an all-reduce, and `lm_head` is the rank's vocabulary slice (see parallel.py).
    With `persistent` set (ATLAS_PERSISTENT_DECODE=1 on a model `persistent_pointers`
    covers), a one-sequence decode step runs its layers as one persistent kernel.
    """

    def __init__(self, dims: Dims, kc: KernelCache, embed: DevicePtr, final_norm: DevicePtr,
                 lm_head: LinearWeight, layers: list[LayerWeights], cos_sin: DevicePtr,
                 block_size: int, max_blocks: int, tp: "TensorParallel | None" = None,
                 kv_stage: KvStage | None = None,
                 persistent: PersistentTables | None = None) -> None:
        self.dims = dims
        self.kc = kc
        self.embed = embed
        self.final_norm = final_norm
        self.lm_head = lm_head
        self.layers = layers
        self.cos_sin = cos_sin
        self.block_size = block_size
        self.max_blocks = max_blocks
        self.scale = dims.attn_scale or dims.head_dim ** -0.5
        self.tp = tp
        self.kv_stage = kv_stage
        self.persistent = persistent
        #: the longest sliding window of a layer (0: none slides); a model with one decodes
        #: on the long attention kernel, the one that slides
        self.windowed = max((lw.window for lw in layers), default=0)
        #: a layer attends with sinks (gpt-oss): prefill, the long kernel and the combine take
        #: them
        self.sinks = any(lw.sinks for lw in layers)
        #: every decode launch takes the long kernel: a binding window, padded heads
        #: (dims.padded: the one decode kernel that writes their compact rows) or sinks
        self.long_only = bool(self.windowed) or dims.padded or self.sinks

    def _rope_fused(self, plan: AttentionPlan) -> bool:
        """Whether a decode step's bf16-cache attention takes decode_attention_rope (q/k
        norm, RoPE, KV append and attention in one launch)."""
        d, kc = self.dims, self.kc
        return (plan.decode and plan.step_keys <= attention.rope_step_keys(kc.routes)
                and attention.rope_fusable(kc, d.heads, d.kv_heads, d.attn_dim, d.q_pitch,
                                           d.rotary_dim or d.head_dim, d.norm_offset,
                                           self.max_blocks * self.block_size, plan.num_seqs,
                                           plan.step_keys, self.windowed, d.head_dim,
                                           self.sinks))

    def _gated_fused(self, plan: AttentionPlan, window: int) -> bool:
        """Whether a decode step's gated full attention (hybrid families: each q head followed
        by its output gate) runs as one launch, decode_attention_long_rope_gated (rope, K/V
        append, attention, merge and the gate), instead of four: one sequence, bf16 caches,
        not a row-invariant runner's step (batch 1's CUDA-core kernels there)."""
        d = self.dims
        return (d.gated_attn and plan.decode and not plan.row_invariant
                and attention_long.gated_fusable(
                    self.kc, d.heads, d.kv_heads, d.attn_dim, d.q_pitch,
                    d.rotary_dim or d.head_dim, self.max_blocks * self.block_size,
                    plan.num_seqs, plan.step_keys, window, d.head_dim, self.sinks))

    def verifies_on_kernel(self, step_keys: int, rows: int) -> bool:
        """Whether a verification step of `rows` rows (up to `step_keys` > 1 per sequence)
        attends on the verification kernel (ops/attention_verify: each sequence's K/V read
        once for all its rows) after qk_norm_rope_kv: bf16 caches, not the rope-fused route,
        and `attention_verify.uses_verify` for the fewest sequences the rows can be. Its
        rows are then not bit for bit the plain decode kernel's (the runner's invariant_rows
        is 0). Never for a model whose windows bind, whose heads are padded or which has
        attention sinks (`long_only`): its rows attend one a sequence on the long kernel."""
        d = self.dims
        plan = AttentionPlan(decode=True, num_seqs=rows, step_keys=step_keys)
        return (not any(lw.kv_scales for lw in self.layers) and not self._rope_fused(plan)
                and not self.long_only
                and attention_verify.uses_verify(self.kc, d.heads, d.kv_heads, d.head_dim,
                                                 step_keys, -(-rows // step_keys)))

    def _verify_layout_fits(self) -> bool:
        """Whether the model's qkv layout is the classic one the verification kernel's
        fused entry points take (attention_verify.rope_fits)."""
        d = self.dims
        return attention_verify.rope_fits(d.heads, d.kv_heads, d.head_dim, d.q_pitch,
                                          d.rotary_dim or d.head_dim, bool(d.norm_offset))

    def _verify_rope_fused(self) -> bool:
        """Whether a verification step on the verification kernel takes its rope entry point
        (ATLAS_DECODE_ATTN_VERIFY_ROPE=1 and the classic qkv layout: attention_verify.
        rope_fits): qk_norm_rope_kv's work done by its blocks, one launch instead of two."""
        return self.kc.routes.decode_attn_verify_rope and self._verify_layout_fits()

    def _verify_clustered(self, step_keys: int) -> bool:
        """Whether a verification step on the verification kernel takes its clustered entry
        point (attention_verify.uses_cluster: the default, ATLAS_DECODE_ATTN_VERIFY_CLUSTER=0
        turns it off; and the classic qkv layout): the rope entry's work, a cluster per kv
        head merging on chip."""
        return attention_verify.uses_cluster(self.kc, step_keys) and self._verify_layout_fits()

    def forward(self, s: Stream, b: StepBuffers, n_tokens: int, plan: AttentionPlan,
                n_sample: int) -> None:
        """Compute f32 logits [n_sample, vocab] into b.logits for the rows in sample_rows."""
        d, kc, t = self.dims, self.kc, n_tokens
        persistent = self._persistent_step(t, plan, n_sample)
        res = Residual(embed=persistent is None and norm.embed_norm_fuses(kc, t))
        if not res.embed:
            embedding.embedding(kc, s, b.ids, self.embed, b.resid, t, d.hidden, d.vocab,
                                d.embed_scale)
        if persistent is not None:
            decode_persistent.decode_persistent(
                kc, s, persistent, b.resid, b.qkv, b.attn, b.act, b.part_o, b.part_ml,
                self.cos_sin, b.positions, b.slots, b.block_tables, b.kv_lens, d.hidden,
                d.heads, d.kv_heads, d.head_dim, d.inter, self.block_size, plan.num_splits,
                self.scale, d.eps)
        for lw in self.layers if persistent is None else ():
            if lw.linear is not None:
                assert d.linear is not None
                self._norm(s, b, res, lw.in_norm, t)
                gated_deltanet(kc, s, b, lw.linear, d.linear, t, d.hidden, d.eps, plan.decode,
                               plan.num_seqs, plan.max_q_len)
                res.pending = True
            else:
                self._qkv_projection(s, b, lw, t, res)
                self._attention_after_qkv(s, b, lw, t, plan, res)
            if isinstance(lw.mlp, DenseMlp):
                # gate_up ends with its SwiGLU into act where the weight's route allows
                # (LinearWeight.fuses_swiglu)
                swiglu = lw.mlp.fuses_act(kc, t)
                self._norm_linear(s, b, res, lw.post_norm, lw.mlp.gate_up,
                                  b.act if swiglu else b.gate_up, t, swiglu, lw.mlp.gelu)
                self._down_proj(s, b, res, lw.mlp, t, swiglu)
                res.out_norm = lw.mlp_out_norm
            else:
                # the block's router launch may do the pending add + norm before it
                router_norm = None
                if (res.pending and not res.out_norm and not d.norm_one_round
                        and lw.mlp.router_takes_norm(kc, t)):
                    router_norm = moe_ops.RouterNorm(b.resid, b.delta, lw.post_norm, d.eps,
                                                     d.norm_offset)
                    res.pending = False
                else:
                    self._norm(s, b, res, lw.post_norm, t)
                lw.mlp.forward(kc, s, b, t, norm=router_norm)
                res.pending = True
            if self.tp is not None:  # row-parallel down: sum the ranks' partials
                self.tp.reduce_delta(s, b.delta, t, d.hidden)
        if n_sample == 0:  # a prefill chunk that is not a sequence's last: KV only
            return
        self._norm(s, b, res, self.final_norm, t)
        hidden = self.sampled_hidden(b, plan.decode)
        if hidden != b.normed:
            # Gather the rows that sample (last token of each sequence) with the embedding
            # kernel: a row gather is an embedding lookup into the normed activations.
            embedding.embedding(kc, s, b.sample_rows, b.normed, hidden, n_sample, d.hidden, t)
        else:
            assert n_sample == t, "a decode-shaped step samples every row"
        if self.tp is None:
            self.lm_head.linear(kc, s, hidden, b.logits, n_sample, out_f32=True)
            return
        self.lm_head.linear(kc, s, hidden, self.tp.logits_local, n_sample, out_f32=True)
        self.tp.gather_logits(s, b.logits, n_sample)

    @staticmethod
    def sampled_hidden(b: StepBuffers, decode: bool) -> DevicePtr:
        """Where `forward` leaves the final-norm rows of the tokens that sample. A
        decode-shaped step samples every row in order (`pack_step`'s per-row form, graph
        padding included), so the LM head reads `normed` in place and the row gather (a
        launch on the step's critical path) is skipped; other steps gather into
        `sample_hidden`."""
        return b.normed if decode else b.sample_hidden

    def _persistent_step(self, t: int, plan: AttentionPlan, n_sample: int
                         ) -> PersistentTables | None:
        """The persistent kernel's tables when this step is one it runs: one sequence
        decoding one token that samples (the residual stream then ends in b.resid)."""
        if (self.persistent is None or not plan.decode or t != 1 or plan.num_seqs != 1
                or plan.step_keys != 1 or n_sample != 1):
            return None
        return self.persistent

    def _norm(self, s: Stream, b: StepBuffers, res: Residual, w: DevicePtr, t: int) -> None:
        """normed = RMSNorm(resid (+= delta when one is pending)) * w; a pending delta with
        an output norm (Gemma 3) is normalized first, in the same launch; the step's first
        norm under `res.embed` writes resid from the token embeddings first."""
        d = self.dims
        if res.embed:  # the step's first norm: the embedding lookup in its launch
            assert not res.pending
            norm.embed_rmsnorm(self.kc, s, b.ids, self.embed, b.resid, w, b.normed, t,
                               d.hidden, d.vocab, d.eps, d.embed_scale, d.norm_offset,
                               d.norm_one_round)
            res.embed = False
        elif res.pending and res.out_norm:
            assert d.norm_offset  # Gemma 3's zero-centred weights: the fused entry's
            norm.norm_add_rmsnorm(self.kc, s, b.resid, b.delta, res.out_norm, w, b.normed, t,
                                  d.hidden, d.eps)
            res.out_norm = 0
        elif res.pending:
            norm.add_rmsnorm(self.kc, s, b.resid, b.delta, w, b.normed, t, d.hidden, d.eps,
                             d.norm_offset, d.norm_one_round)
        else:
            norm.rmsnorm(self.kc, s, b.resid, w, b.normed, t, d.hidden, d.eps, d.norm_offset,
                         d.norm_one_round)
        res.pending = False

    def _norm_linear(self, s: Stream, b: StepBuffers, res: Residual, w: DevicePtr,
                     proj: LinearWeight, out: DevicePtr, t: int, swiglu: bool = False,
                     gelu: bool = False) -> None:
        """out = proj(RMSNorm(resid (+= pending delta)) * w): the norm into `normed`, then the
        projection. With `swiglu` (proj.fuses_swiglu), proj is a [gate | up] weight and out
        its activation: every route's launch ends with the SwiGLU (`gelu`: the GELU GLU)."""
        self._norm(s, b, res, w, t)
        if swiglu:
            proj.linear_swiglu(self.kc, s, b.normed, out, t, gelu, w_scratch=b.w_scratch)
        else:
            proj.linear(self.kc, s, b.normed, out, t, w_scratch=b.w_scratch)

    def _down_proj(self, s: Stream, b: StepBuffers, res: Residual, mlp: DenseMlp,
                   t: int, swiglu: bool = False) -> None:
        """The dense MLP's down projection after gate_up, into delta; its input is act where
        gate_up ended with the SwiGLU (`swiglu`), else the SwiGLU of gate_up."""
        if swiglu:
            mlp.down.linear(self.kc, s, b.act, b.delta, t, w_scratch=b.w_scratch)
        else:
            mlp.down_proj(self.kc, s, b, t)
        res.pending = True

    def _attention(self, s: Stream, b: StepBuffers, lw: LayerWeights, t: int,
                   plan: AttentionPlan) -> None:
        """A layer's attention over b.normed: the qkv projection, then the rest, into
        b.delta."""
        self._qkv_projection(s, b, lw, t)
        self._attention_after_qkv(s, b, lw, t, plan)

    def _qkv_projection(self, s: Stream, b: StepBuffers, lw: LayerWeights, t: int,
                        res: Residual | None = None) -> None:
        """b.qkv = the layer's q/k/v projection of b.normed (`res`: of the input norm of the
        residual stream, made first), plus the family's q/k/v biases and whole-projection
        q/k norms: every attention route after it reads those rows."""
        assert lw.qkv is not None
        d = self.dims
        if lw.qkv_bias and d.bias_f32:  # the bias joins the float32 sums (gpt-oss)
            if res is not None:
                self._norm(s, b, res, lw.in_norm, t)
            self._biased_linear(s, b, lw.qkv, lw.qkv_bias, b.normed, b.qkv, t)
        elif lw.qkv_bias and isinstance(lw.qkv, Bf16Linear) and matmul.fuses_bias(
                self.kc, t, lw.qkv.n):  # batch 1: the GEMV adds the bias (the same bits)
            if res is not None:
                self._norm(s, b, res, lw.in_norm, t)
            matmul.gemv_bias(self.kc, s, b.normed, lw.qkv.ptr, lw.qkv_bias, b.qkv, lw.qkv.n,
                             lw.qkv.k)
        else:
            if res is None:
                lw.qkv.linear(self.kc, s, b.normed, b.qkv, t, w_scratch=b.w_scratch)
            else:
                self._norm_linear(s, b, res, lw.in_norm, lw.qkv, b.qkv, t)
            if lw.qkv_bias and not d.bias_f32:
                bias.bias_add(self.kc, s, b.qkv, lw.qkv_bias, t, d.qkv_width)
        if lw.whole_qk_norm is not None:  # in place, q's part of each row then k's
            assert not d.gated_attn  # q heads back to back: q is the row's first q_width
            k_part = b.qkv + DType.BF16.nbytes(d.q_width)
            for part, w, width in ((b.qkv, lw.whole_qk_norm[0], d.q_width),
                                   (k_part, lw.whole_qk_norm[1], d.kv_heads * d.head_dim)):
                norm.rmsnorm_pitched(self.kc, s, part, w, part, t, width, d.qkv_width, d.eps)

    def _attention_after_qkv(self, s: Stream, b: StepBuffers, lw: LayerWeights, t: int,
                             plan: AttentionPlan, res: Residual | None = None) -> None:
        """Attention after the qkv projection (b.qkv): q/k norm, RoPE, KV append, attention,
        the output gate of hybrid families, o_proj into delta (`res`: marked pending)."""
        d, kc = self.dims, self.kc
        cos_sin = lw.cos_sin or self.cos_sin
        if lw.kv_scales:
            self._attention_quantized(s, b, lw, t, plan)
            self._output_projection(s, b, lw, t, res)
            return
        assert lw.o is not None
        rotary_dim = d.rotary_dim or d.head_dim
        if self._gated_fused(plan, lw.window):
            attention_long.decode_attention_long_rope_gated(
                kc, s, b.qkv, lw.k_cache, lw.v_cache, lw.q_norm, lw.k_norm, cos_sin,
                b.positions, b.slots, b.block_tables, b.kv_lens, b.part_o, b.part_ml,
                b.attn_counters, b.attn, d.heads, d.kv_heads, d.attn_dim, self.block_size,
                self.max_blocks, plan.num_splits, self.scale, d.eps, d.q_pitch, rotary_dim,
                bool(d.norm_offset), max_splits=plan.split_capacity)
            self._output_projection(s, b, lw, t, res, gated=True)
            return
        if self._rope_fused(plan):
            assert t == plan.num_seqs  # one token per row
            # q/k norm, RoPE, KV append and split-K attention in one launch (each row's
            # blocks compute the keys earlier rows of its sequence append: verification)
            attention.decode_attention_rope(
                kc, s, b.qkv, lw.k_cache, lw.v_cache, lw.q_norm, lw.k_norm, cos_sin,
                b.positions, b.slots, b.block_tables, b.kv_lens, b.part_o, b.part_ml,
                b.attn_counters, b.attn, plan.num_seqs, d.heads, d.kv_heads, d.attn_dim,
                self.block_size, self.max_blocks, plan.num_splits, self.scale, d.eps,
                max_splits=plan.split_capacity, long=False if plan.row_invariant else None,
                window=lw.window, proj_dim=d.head_dim, sinks=lw.sinks)
            self._output_projection(s, b, lw, t, res)
            return
        # decode rows: split-K, the last split of each row merges (one launch); a prefill-
        # shaped step's leading one-token rows too, the prompt chunks after them on the
        # prefill kernel (whose 128-query tiles would run each decode row's keys through
        # 128 mostly empty query rows, once per query head)
        rows = plan.num_seqs if plan.decode else plan.decode_rows
        verify = plan.decode and self.verifies_on_kernel(plan.step_keys, rows)
        # a verification step: each sequence's rows share one read of its K/V
        verify_launch = dict(rows_per_block=plan.step_keys,
                             min_chunk=kc.routes.decode_attn_verify_min_keys)
        if verify and self._verify_clustered(plan.step_keys):  # fused, a cluster a kv head
            attention_verify.decode_attention_verify_cluster(
                kc, s, b.qkv, lw.k_cache, lw.v_cache, lw.q_norm, lw.k_norm, cos_sin,
                b.positions, b.slots, b.block_tables, b.kv_lens, b.attn, rows, d.heads,
                d.kv_heads, d.head_dim, self.block_size, self.max_blocks, self.scale, d.eps,
                rows_per_block=plan.step_keys)
        elif verify and self._verify_rope_fused():  # with q/k norm, RoPE and K/V append
            attention_verify.decode_attention_verify_rope(
                kc, s, b.qkv, b.q, lw.k_cache, lw.v_cache, lw.q_norm, lw.k_norm, cos_sin,
                b.positions, b.slots, b.block_tables, b.kv_lens, b.part_o, b.part_ml,
                b.attn_counters, b.attn, rows, d.heads, d.kv_heads, d.head_dim,
                self.block_size, self.max_blocks, plan.num_splits, self.scale, d.eps,
                **verify_launch)
        else:
            rope.qk_norm_rope_kv(kc, s, b.qkv, b.q, lw.k_cache, lw.v_cache, lw.q_norm,
                                 lw.k_norm, cos_sin, b.positions, b.slots, t, d.heads,
                                 d.kv_heads, d.attn_dim, self.block_size, d.eps,
                                 q_pitch=d.q_pitch, rotary_dim=rotary_dim,
                                 norm_offset=d.norm_offset, proj_dim=d.head_dim)
            if verify:
                attention_verify.decode_attention_verify(
                    kc, s, b.q, lw.k_cache, lw.v_cache, b.block_tables, b.kv_lens, b.part_o,
                    b.part_ml, b.attn_counters, b.attn, rows, d.heads, d.kv_heads, d.head_dim,
                    self.block_size, self.max_blocks, plan.num_splits, self.scale,
                    **verify_launch)
            elif rows:
                attention.decode_attention(kc, s, b.q, lw.k_cache, lw.v_cache, b.block_tables,
                                           b.kv_lens, b.part_o, b.part_ml, b.attn_counters,
                                           b.attn, rows, d.heads, d.kv_heads, d.attn_dim,
                                           self.block_size, self.max_blocks, plan.num_splits,
                                           self.scale, max_splits=plan.split_capacity,
                                           long=False if plan.row_invariant else None,
                                           window=lw.window, proj_dim=d.head_dim,
                                           sinks=lw.sinks)
        if rows < plan.num_seqs:  # per-sequence inputs of the chunks after the decode rows
            attention.prefill_attention(kc, s, b.q, lw.k_cache, lw.v_cache,
                                        b.block_tables + 4 * rows * self.max_blocks,
                                        b.cu_q + 4 * rows, b.kv_lens + 4 * rows, b.attn,
                                        plan.num_seqs - rows, d.heads, d.kv_heads, d.attn_dim,
                                        self.block_size, self.max_blocks, self.scale,
                                        plan.max_q_len, window=lw.window, proj_dim=d.head_dim,
                                        sinks=lw.sinks, max_kv_len=plan.max_kv_len,
                                        partials=PrefillPartials(b.part_o, b.part_ml,
                                                                 plan.partial_slots)
                                        if plan.max_kv_len and plan.partial_slots else None)
        self._output_projection(s, b, lw, t, res)

    def _biased_linear(self, s: Stream, b: StepBuffers, w: LinearWeight, w_bias: DevicePtr,
                       x: DevicePtr, out: DevicePtr, t: int) -> None:
        """out = bf16(x @ w.T + bias), the bias added to the float32 sums and rounded once
        (Dims.bias_f32): the unrounded product into the step's proj_f32, then the bias."""
        if not isinstance(w, Bf16Linear):
            raise ValueError("a projection whose bias joins its float32 sums must be bf16")
        matmul.linear_f32_unrounded(self.kc, s, x, w.ptr, b.proj_f32, t, w.n, w.k)
        bias.bias_add_f32(self.kc, s, b.proj_f32, w_bias, out, t, w.n)

    def _attention_quantized(self, s: Stream, b: StepBuffers, lw: LayerWeights, t: int,
                             plan: AttentionPlan) -> None:
        """Rotary into the bf16 stage, quantize into the FP8 or NVFP4 pools (calibrating
        unset scales on prefill steps), then attention that dequantizes in registers, into
        b.attn."""
        d, kc, st, dt = self.dims, self.kc, self.kv_stage, lw.kv_dtype
        assert st is not None
        cos_sin = lw.cos_sin or self.cos_sin
        half = 2 * d.kv_heads * st.rows * d.head_dim        # bytes of the K half
        rope.qk_norm_rope_kv(kc, s, b.qkv, b.q, st.stage, st.stage + half, lw.q_norm,
                             lw.k_norm, cos_sin, b.positions, st.slots, t, d.heads,
                             d.kv_heads, d.head_dim, st.rows, d.eps, q_pitch=d.q_pitch,
                             rotary_dim=d.rotary_dim or d.head_dim, norm_offset=d.norm_offset)
        kv_quant.kv_append(kc, s, dt, st.stage, st.rows, b.slots, lw.kv_scales, lw.k_cache,
                           lw.v_cache, t, d.kv_heads, d.head_dim, self.block_size,
                           0 if plan.decode else st.calib_tokens)
        if plan.decode:
            kv_quant.decode_attention_kvq(kc, s, dt, b.q, lw.k_cache, lw.v_cache, lw.kv_scales,
                                          b.block_tables, b.kv_lens, b.part_o, b.part_ml,
                                          b.attn, plan.num_seqs, d.heads, d.kv_heads,
                                          d.head_dim, self.block_size, self.max_blocks,
                                          plan.num_splits, self.scale)
        else:
            kv_quant.prefill_attention_kvq(kc, s, dt, b.q, lw.k_cache, lw.v_cache,
                                           lw.kv_scales, b.block_tables, b.cu_q, b.kv_lens,
                                           b.attn, plan.num_seqs, d.heads, d.kv_heads,
                                           d.head_dim, self.block_size, self.max_blocks,
                                           self.scale, plan.max_q_len)

    def _output_projection(self, s: Stream, b: StepBuffers, lw: LayerWeights, t: int,
                           res: Residual | None = None, gated: bool = False) -> None:
        """delta = o_proj(attn) (plus its bias where the layer has one; summed over the ranks
        when tensor-parallel; `res` marks it pending). Gated full
        attention (hybrid families) first multiplies attn by its sigmoid output gate, whose
        head h follows its query in the qkv row: inside the bf16 o_proj GEMV's x load where
        `matmul.fuses_attn_gate` allows, else a sigmoid_gate_mul launch in place; `gated`:
        the attention launch applied it already (decode_attention_long_rope_gated)."""
        o, d, kc = lw.o, self.dims, self.kc
        assert o is not None
        gate = None
        if d.gated_attn and not gated:
            if isinstance(o, Bf16Linear) and matmul.fuses_attn_gate(kc, t, o.n, o.k):
                gate = matmul.AttnGate(b.qkv + 2 * d.head_dim, d.head_dim, d.q_pitch)
            else:
                gating.sigmoid_gate_mul(kc, s, b.attn, b.qkv + 2 * d.head_dim, b.attn, t,
                                        d.heads, d.head_dim, d.qkv_width, d.q_pitch)
        if gate is not None:
            assert isinstance(o, Bf16Linear)
            matmul.gemv_attn_gate(kc, s, b.attn, gate, o.ptr, b.delta, o.n, o.k)
        elif lw.o_bias:  # the bias joins the float32 sums (gpt-oss: Dims.bias_f32)
            self._biased_linear(s, b, o, lw.o_bias, b.attn, b.delta, t)
        else:
            o.linear(kc, s, b.attn, b.delta, t, w_scratch=b.w_scratch)
        if self.tp is not None:  # row-parallel o_proj: sum the ranks' partials
            self.tp.reduce_delta(s, b.delta, t, self.dims.hidden)
        if res is not None:
            res.pending, res.out_norm = True, lw.attn_out_norm
