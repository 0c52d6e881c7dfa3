"""The Gated-DeltaNet mixer of a hybrid model's linear-attention layers (Qwen3.5).

    proj  = normed @ [W_qkv | W_z | W_b | W_a]^T          one GEMV/GEMM, row [qkv | z | b | a]
    conv  = SiLU(causal depthwise conv1d(qkv))            rolling state per sequence slot
    core  = gated delta rule(conv q, k, v; b, a)          fp32 state per sequence slot
    out   = (RMSNorm(core) * w * silu(z)) @ W_out^T        into `delta` (the residual update)

A step's sequences each own one recurrent-state slot (the step buffer `state_slots`); the
kernels start a sequence from zero state when its step begins at position 0 and otherwise
continue from the slot, so chunked prefill and decode at mixed positions compose. A
decode-shaped verification step (a sequence's K + 1 tokens as consecutive rows) runs the
decode kernel over them token by token, leaving the state after each token in the slot
`state_out` names for its row, so the runner keeps the accepted prefix's state by choosing
a slot (model/runner.py); plain decode rows name their own slot there (in place). Prefill
steps run the conv, the chunked form of the delta rule and the gated norm as three kernels;
decode steps run all three in one (gdn_decode: the layer is three launches, the two
projections around it) where the head shapes fit it, else (and under ATLAS_GDN_FUSED=0) as
three with the recurrent form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.config import LinearAttentionConfig
from ..runtime.gpu import DevicePtr, Stream
from ..runtime.ops import KernelCache, gating, linear_attention
from ..runtime.ops.matmul_quant import LinearWeight

if TYPE_CHECKING:
    from .model import StepBuffers


@dataclass(frozen=True, slots=True)
class GatedDeltaNetWeights:
    """One linear-attention layer: weights, and its conv / delta-rule state pools (every
    slot of the layer: [slots, kernel, conv_dim] bf16 and [slots, hv, dk, dv] f32)."""

    in_proj: LinearWeight  # bf16, or quantized where the checkpoint stores it so
    conv: DevicePtr
    a_log: DevicePtr
    dt_bias: DevicePtr
    norm: DevicePtr
    out_proj: LinearWeight
    conv_state: DevicePtr
    delta_state: DevicePtr


def proj_width(la: LinearAttentionConfig) -> int:
    """Columns of the fused input projection [qkv | z | b | a]."""
    return la.conv_dim + la.value_dim + 2 * la.num_value_heads


def conv_state_bytes(la: LinearAttentionConfig) -> int:
    """One slot's conv state of one layer: a ring of the inputs at the last `conv_kernel`
    positions (bf16; conv1d.cu says why it keeps one row more than a step reads)."""
    return 2 * la.conv_kernel * la.conv_dim


def delta_state_bytes(la: LinearAttentionConfig) -> int:
    """One slot's delta-rule state of one layer (f32)."""
    return 4 * la.num_value_heads * la.key_head_dim * la.value_head_dim


def decodes_fused(kc: KernelCache, la: LinearAttentionConfig) -> bool:
    """Whether decode steps run the fused kernel (gdn_decode: the head shapes fit it and
    ATLAS_GDN_FUSED is not 0); a speculating runner needs it (its per-token state slots)."""
    return kc.routes.gdn_fused and linear_attention.gdn_decode_fits(
        la.key_head_dim, la.value_head_dim, la.conv_kernel, proj_width(la))


def gated_deltanet(kc: KernelCache, s: Stream, b: "StepBuffers", w: GatedDeltaNetWeights,
                   la: LinearAttentionConfig, t: int, hidden: int, eps: float, decode: bool,
                   num_seqs: int, max_q_len: int) -> None:
    """The mixer over the step's t tokens: reads b.normed, writes b.delta."""
    width = proj_width(la)
    w.in_proj.linear(kc, s, b.normed, b.lin_proj, t, w_scratch=b.w_scratch)
    if decode and decodes_fused(kc, la):
        linear_attention.gdn_decode(
            kc, s, b.lin_proj, width, w.conv, w.conv_state, w.a_log, w.dt_bias, w.norm,
            w.delta_state, b.state_slots, b.state_out, b.cu_q, b.kv_lens, b.lin_gated, num_seqs,
            la.num_key_heads, la.num_value_heads, la.key_head_dim, la.value_head_dim,
            la.conv_kernel, eps)
    else:
        _mixer_unfused(kc, s, b, w, la, t, eps, decode, num_seqs, max_q_len)
    w.out_proj.linear(kc, s, b.lin_gated, b.delta, t, w_scratch=b.w_scratch)


def _mixer_unfused(kc: KernelCache, s: Stream, b: "StepBuffers", w: GatedDeltaNetWeights,
                   la: LinearAttentionConfig, t: int, eps: float, decode: bool, num_seqs: int,
                   max_q_len: int) -> None:
    """conv, delta rule and gated norm as three kernels: lin_proj -> lin_gated (through
    lin_conv and lin_core), the chunked form of the rule unless `decode`."""
    width = proj_width(la)
    linear_attention.conv1d_silu(kc, s, b.lin_proj, width, w.conv, w.conv_state, b.state_slots,
                                 b.cu_q, b.kv_lens, b.lin_conv, num_seqs, la.conv_dim,
                                 la.conv_kernel, 1 if decode else max_q_len)
    ba = b.lin_proj + 2 * (la.conv_dim + la.value_dim)  # b at +h, a at +hv in each row
    linear_attention.gated_delta_rule(
        kc, s, b.lin_conv, la.conv_dim, ba, width, w.a_log, w.dt_bias, w.delta_state,
        b.state_slots, b.cu_q, b.kv_lens, b.lin_core, num_seqs, la.num_key_heads,
        la.num_value_heads, la.key_head_dim, la.value_head_dim, recurrent=decode)
    gating.gated_rmsnorm(kc, s, b.lin_core, b.lin_proj + 2 * la.conv_dim, width, w.norm,
                         b.lin_gated, t, la.num_value_heads, la.value_head_dim, eps)
