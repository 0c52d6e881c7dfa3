"""Shapes of the kernel table and the bytes/FLOP model of each kernel family.

The kernel table (tools/gpu/bench_kernels.py) times each Atlas kernel against its PyTorch
equivalent on the shapes listed here and reports the achieved rate against the measured
ceilings. The rate needs a model of the *least* work a kernel must do: the bytes it must
move through device memory (every input read once, every output written once) and the
floating-point operations it must perform. Those models live here as plain arithmetic so
they can be checked by hand on a CPU; a wrong byte count would silently make every
percentage in the table a lie.

Conventions: bf16 activations and weights (2 bytes), f32 logits and cos/sin tables, i32 ids,
positions and slots. Metadata smaller than a few KB (block tables, lengths, cu_q, sampling
row records) is not counted. A multiply-add is 2 FLOPs. Only tensor-core work (matrix
products and attention) counts FLOPs; everything else is memory-bound by construction.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Iterable, Protocol

BF16 = 2
F32 = 4
I32 = 4

#: the paged KV cache's tokens per block (runtime.kv_cache.DEFAULT_BLOCK_SIZE)
KV_BLOCK_SIZE = 16
#: the history from which decode attention routes to the long-context kernel
#: (runtime/ops/attention_long.LONG_CONTEXT_KEYS; restated: this module imports no runtime)
LONG_CONTEXT_KEYS = 16384
#: head dims of the wgmma prefill attention (runtime/ops/attention_sm90.PREFILL_SM90_HEAD_DIMS;
#: restated, held equal by tests/unit/test_attention_sm90.py)
SM90_PREFILL_HEAD_DIMS = (128, 256)
#: the head dim of its A/B entry points (ops/attention_sm90.PREFILL_SM90_VARIANT_HEAD_DIM,
#: restated likewise) and their names (its PREFILL_SM90_ENTRIES' keys)
SM90_VARIANT_HEAD_DIM = 128
SM90_VARIANTS = ("qreg", "wide")


class Family(enum.Enum):
    """One row group of the kernel table: an Atlas entry point and what it computes."""

    RMSNORM = "rmsnorm"
    ADD_RMSNORM = "add_rmsnorm"
    QK_NORM_ROPE_KV = "qk_norm_rope_kv"
    KV_APPEND = "rope_kv_append"
    SILU_MUL = "silu_mul"
    EMBEDDING = "embedding"
    DECODE_GEMV = "decode_gemv"
    DECODE_BATCHED_GEMV = "decode_batched_gemv"
    DECODE_GEMM_SM90 = "decode_gemm_sm90"
    DECODE_GEMV_FP8 = "decode_gemv_fp8"
    DECODE_GEMV_NVFP4 = "decode_gemv_nvfp4"
    PREFILL_GEMM = "prefill_gemm"
    PREFILL_ATTENTION = "prefill_attention"
    DECODE_ATTENTION = "decode_attention"
    DECODE_ATTENTION_ROPE = "decode_attention_rope"
    SAMPLING = "sampling"
    GREEDY = "greedy"
    MOE_ROUTER = "moe_router"
    MOE_DECODE = "moe_decode_experts"
    MOE_GROUPED = "moe_grouped_experts"
    CONV1D = "conv1d"
    DELTA_CHUNK = "gated_delta_chunk"
    DELTA_STEP = "gated_delta_step"
    GATED_RMSNORM = "gated_rmsnorm"
    GDN_DECODE = "gdn_decode"


#: the kernel families named by the issue (`issues show 5`, point 4) -> the table's families.
#: Atlas has no stand-alone KV append: it is fused into the RoPE kernel, so "KV append" is
#: measured as RoPE + append without the q/k norm (the Llama path) and inside the Qwen3 one.
ISSUE_FAMILIES: dict[str, tuple[Family, ...]] = {
    "RMSNorm": (Family.RMSNORM, Family.ADD_RMSNORM),
    "RoPE/QK-norm": (Family.QK_NORM_ROPE_KV,),
    "SiLU-mul": (Family.SILU_MUL,),
    "embedding": (Family.EMBEDDING,),
    "decode GEMV": (Family.DECODE_GEMV, Family.DECODE_BATCHED_GEMV, Family.DECODE_GEMM_SM90),
    # issue 12: GEMVs reading FP8 (128x128 block scales) and NVFP4 weights
    "quantized decode GEMV": (Family.DECODE_GEMV_FP8, Family.DECODE_GEMV_NVFP4),
    "prefill GEMM": (Family.PREFILL_GEMM,),
    "prefill attention": (Family.PREFILL_ATTENTION,),
    "paged decode attention": (Family.DECODE_ATTENTION, Family.DECODE_ATTENTION_ROPE),
    "KV append": (Family.KV_APPEND, Family.QK_NORM_ROPE_KV),
    "sampling": (Family.SAMPLING, Family.GREEDY),
    # issue 10: the router, the decode expert kernel and the grouped GEMM
    "MoE router": (Family.MOE_ROUTER,),
    "MoE decode experts": (Family.MOE_DECODE,),
    "MoE grouped GEMM": (Family.MOE_GROUPED,),
    # issue 11: the hybrid models' kernels (head_dim-256 attention is in the attention rows)
    "conv1d": (Family.CONV1D,),
    "chunked delta rule": (Family.DELTA_CHUNK,),
    # the decode step as the model runs it: conv + delta rule + gated norm fused (gdn_decode)
    "recurrent delta rule": (Family.DELTA_STEP, Family.GDN_DECODE),
    "gated RMSNorm": (Family.GATED_RMSNORM,),
}


@dataclass(frozen=True, slots=True)
class ModelDims:
    """The few sizes of a dense decoder that the kernel shapes derive from."""

    name: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int

    @property
    def qkv_out(self) -> int:
        """Output features of the fused q/k/v projection."""
        return (self.heads + 2 * self.kv_heads) * self.head_dim

    @property
    def attn_out(self) -> int:
        """Input features of o_proj (all q heads side by side)."""
        return self.heads * self.head_dim


QWEN3_8B = ModelDims("qwen3-8b", hidden=4096, heads=32, kv_heads=8, head_dim=128,
                     intermediate=12288, vocab=151936)
#: other published dense widths for the quantized GEMV rows (hidden 2,048 .. 8,192)
QUANT_WIDTHS = (
    ModelDims("qwen3-1.7b", hidden=2048, heads=16, kv_heads=8, head_dim=128,
              intermediate=6144, vocab=151936),
    ModelDims("qwen3-14b", hidden=5120, heads=40, kv_heads=8, head_dim=128,
              intermediate=17408, vocab=151936),
    ModelDims("llama-3.1-70b", hidden=8192, heads=64, kv_heads=8, head_dim=128,
              intermediate=28672, vocab=128256),
)
QWEN3_0_6B = ModelDims("qwen3-0.6b", hidden=1024, heads=16, kv_heads=8, head_dim=128,
                       intermediate=3072, vocab=151936)
SMOLLM2_135M = ModelDims("smollm2-135m", hidden=576, heads=9, kv_heads=3, head_dim=64,
                         intermediate=1536, vocab=49152)
#: the published widths of the decode GEMM rows at 16 and 64 rows ("... dgemm", one filter
#: for all), with the projections each runs there (issue 15: every dense Qwen3 width, and
#: Qwen3-30B-A3B's attention, whose experts take the MoE kernels): the narrow ones are where
#: the split rule's choice weighs
DECODE_GEMM_WIDTHS: tuple[tuple[ModelDims, tuple[str, ...]], ...] = (
    (QWEN3_8B, ("qkv", "o_proj", "gate_up", "down")),
    (QWEN3_0_6B, ("qkv", "o_proj", "gate_up", "down")),
    (QUANT_WIDTHS[0], ("qkv", "o_proj", "gate_up", "down")),  # qwen3-1.7b
    (ModelDims("qwen3-4b", hidden=2560, heads=32, kv_heads=8, head_dim=128,
               intermediate=9728, vocab=151936), ("qkv", "o_proj", "gate_up", "down")),
    (QUANT_WIDTHS[1], ("qkv", "o_proj", "gate_up", "down")),  # qwen3-14b
    (ModelDims("qwen3-32b", hidden=5120, heads=64, kv_heads=8, head_dim=128,
               intermediate=25600, vocab=151936), ("qkv", "o_proj", "gate_up", "down")),
    (ModelDims("qwen3-30b-a3b", hidden=2048, heads=32, kv_heads=4, head_dim=128,
               intermediate=768, vocab=151936), ("qkv", "o_proj")),
)


@dataclass(frozen=True, slots=True)
class AttentionHeads:
    """A model's attention head geometry, and whether its decode step takes the rope-fused
    kernel (decode_attn_rope_bf16) or qk_norm_rope_kv + decode_attn_bf16."""

    name: str
    heads: int
    kv_heads: int
    head_dim: int
    rope: bool


#: the decode attention latency rows' head geometries: Qwen3-0.6B, -8B, -30B-A3B and Qwen2.5-1.5B
#: (group 6 over 2 KV heads, its batch-1 attention 11.3 us a layer at gpu119) launch the
#: rope-fused kernel; Qwen3.5-35B-A3B's gated attention (D 256) the unfused one
DECODE_LATENCY_HEADS = (
    AttentionHeads("qwen3-0.6b", 16, 8, 128, True),
    AttentionHeads("qwen3-8b", 32, 8, 128, True),
    AttentionHeads("qwen3-30b-a3b", 32, 4, 128, True),
    AttentionHeads("qwen2.5-1.5b", 12, 2, 128, True),
    AttentionHeads("qwen3.5-35b-a3b", 16, 2, 256, False),
)

#: the batched decode attention rows' head geometries: Qwen3-8B (D 128, group 4) and
#: Qwen3.5-35B-A3B's gated attention (D 256, group 8)
BATCHED_DECODE_HEADS = tuple(a for a in DECODE_LATENCY_HEADS
                             if a.name in ("qwen3-8b", "qwen3.5-35b-a3b"))


@dataclass(frozen=True, slots=True)
class MoeDims:
    """The sizes of a mixture-of-experts block (per-expert SwiGLU FFN of width `inter`)."""

    name: str
    hidden: int
    experts: int
    top_k: int
    inter: int
    scoring: str = "softmax"


#: Qwen3-30B-A3B and Qwen3.5-35B-A3B (published configs), and MiniMax-M2's sigmoid router
#: (256 experts, top-8, e_score_correction_bias)
QWEN3_30B_A3B = MoeDims("qwen3-30b-a3b", hidden=2048, experts=128, top_k=8, inter=768)
QWEN3_5_35B_A3B = MoeDims("qwen3.5-35b-a3b", hidden=2048, experts=256, top_k=8, inter=512)
MINIMAX_M2_ROUTER = MoeDims("minimax-m2", hidden=3072, experts=256, top_k=8, inter=1536,
                            scoring="sigmoid")
#: tokens up to this take the decode expert kernels (atlas.runtime.ops.moe.DECODE_MAX_TOKENS)
MOE_DECODE_MAX_TOKENS = 8


@dataclass(frozen=True, slots=True)
class HybridDims:
    """The Gated-DeltaNet and gated-attention sizes of a hybrid model (Qwen3.5)."""

    name: str
    heads: int
    kv_heads: int
    head_dim: int
    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    conv_kernel: int
    hidden: int

    @property
    def conv_channels(self) -> int:
        """q, k and v side by side: the conv's channels and the delta rule's input row."""
        return 2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim

    @property
    def in_proj_width(self) -> int:
        """Outputs of the fused linear-attention input projection [q | k | v | z | b | a]."""
        return self.conv_channels + self.value_heads * self.value_dim + 2 * self.value_heads


#: Qwen3.5-35B-A3B's (transformers' Qwen3_5MoeTextConfig defaults) attention and linear layers
QWEN3_5_35B = HybridDims("qwen3.5-35b-a3b", heads=16, kv_heads=2, head_dim=256, key_heads=16,
                         value_heads=32, key_dim=128, value_dim=128, conv_kernel=4,
                         hidden=2048)


class KernelShape(Protocol):
    """What the table needs of every shape: who it is, and the least work it implies."""

    label: str
    quick: bool

    @property
    def family(self) -> Family: ...

    def bytes_moved(self) -> int: ...

    def flops(self) -> int: ...

    def describe(self) -> str: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Norm:
    """RMSNorm of rows x dim; with `residual`, first residual += delta in place."""

    label: str
    rows: int
    dim: int
    residual: bool = False
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.ADD_RMSNORM if self.residual else Family.RMSNORM

    def bytes_moved(self) -> int:
        # plain: read x, write out; residual: read residual + delta, write residual + out
        activations = (4 if self.residual else 2) * self.rows * self.dim
        return BF16 * (activations + self.dim)

    def flops(self) -> int:
        return 0

    def describe(self) -> str:
        return f"rows={self.rows} dim={self.dim}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SiluMul:
    """out[rows, inter] = silu(gate) * up from gate_up [rows, 2 * inter]."""

    label: str
    rows: int
    inter: int
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.SILU_MUL

    def bytes_moved(self) -> int:
        return BF16 * 3 * self.rows * self.inter

    def flops(self) -> int:
        return 0

    def describe(self) -> str:
        return f"rows={self.rows} inter={self.inter}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Embedding:
    """out[i] = table[ids[i]]: only the gathered rows are read, not the whole table."""

    label: str
    tokens: int
    dim: int
    vocab: int
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.EMBEDDING

    def bytes_moved(self) -> int:
        return I32 * self.tokens + BF16 * 2 * self.tokens * self.dim

    def flops(self) -> int:
        return 0

    def describe(self) -> str:
        return f"tokens={self.tokens} dim={self.dim} vocab={self.vocab}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Linear:
    """y[m, n] = x[m, k] @ w[n, k].T; `prefill` puts it in the GEMM family, `batched` in
    the family of the tensor-core decode GEMV (ops.matmul_batched), `decode_sm90` in that of
    the skinny wgmma GEMM (ops.matmul_decode; `wide` forces its two-warpgroup blocks or
    (False) one, which also fixes the split to the rule's; None leaves both to the routes:
    the start-up tuner's pick, what a served step launches), each forced; the others run
    whatever `linear` would choose for m. `swiglu`: the MLP down
    projection with its activation, x = swiglu of a gate_up [m, 2k] input, through
    `linear_silu`; `ends_swiglu`: the gate_up projection [n = 2 I, k] ending with it (y =
    swiglu, [m, I]), as decode steps run them (one row on the GEMV, decode batches on the
    decode GEMM's SwiGLU entries; `linear_swiglu`, filed under `decode_sm90` for those).
    `gemv` "ring" / "tiled": forced onto the CUDA-core GEMV's cp.async-ring kernel (one row
    too) / its register-tiled one (ATLAS_GEMV_RING's A/B; the single-row kernel at m = 1).
    `cpasync`: a decode_sm90 row on the decode GEMM's cp.async kernel (gemm_decode_sm90,
    ATLAS_DECODE_GEMM_TMA=0's A/B); the other decode_sm90 rows run the routes' kernel (the
    TMA one, gemm_decode_tma, where the set has it)."""

    label: str
    m: int
    n: int
    k: int
    gemv: str = ""
    out_f32: bool = False
    prefill: bool = False
    batched: bool = False
    decode_sm90: bool = False
    swiglu: bool = False
    ends_swiglu: bool = False
    wide: bool | None = False
    cpasync: bool = False
    quick: bool = False

    @property
    def family(self) -> Family:
        if self.prefill:
            return Family.PREFILL_GEMM
        if self.decode_sm90:
            return Family.DECODE_GEMM_SM90
        return Family.DECODE_BATCHED_GEMV if self.batched else Family.DECODE_GEMV

    def bytes_moved(self) -> int:
        out = (F32 if self.out_f32 else BF16) * self.m * (self.n // 2 if self.ends_swiglu
                                                          else self.n)
        x_width = 2 * self.k if self.swiglu else self.k
        return BF16 * (self.n * self.k + self.m * x_width) + out

    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def describe(self) -> str:
        return (f"m={self.m} n={self.n} k={self.k}" + (" f32-out" if self.out_f32 else "")
                + (" swiglu" if self.swiglu else "")
                + (" ends-swiglu" if self.ends_swiglu else ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantLinear:
    """y[m, n] = x[m, k] @ dequant(w)[n, k].T over quantized weights: `fmt` 'fp8-block'
    (E4M3 codes + float32 per 128x128 block) or 'nvfp4' (packed E2M1 + E4M3 per 16 values +
    float32 per row). The bytes are the format's: that is the point of quantizing. `ring`:
    forced onto the tensor-core GEMV's shared-memory ring kernel (gemv_mma_quant), the A/B
    of its register-fed twin (gemv_quant_direct) that batches of 1..8 rows take. `lut`: the
    twin's NVFP4 entry points on the byte-table decode (ATLAS_QUANT_E2M1_LUT=1), the A/B of
    its bit-move decode. `narrow` 1 / 2: the twin's narrow pipelined loops
    (ATLAS_QUANT_NARROW: one / two steps a load batch, four / three blocks an SM). `tc`: an
    FP8 row of one batch row kept on the tensor-core route (ATLAS_QUANT_FP8_CORE=0), the A/B
    of the CUDA-core convert GEMV the plain b1 rows take by default. `h2`: a row of one batch
    row on the CUDA-core half-precision-FMA GEMV (NVFP4: ATLAS_QUANT_NVFP4_H2=1,
    gemv_nvfp4_h2_*; FP8: ATLAS_QUANT_FP8_H2=1, gemv_fp8_h2_*), the A/B of the routes the
    plain b1 rows take (the h2 GEMV forced off there). `wg`: FP8 rows of 1..8 batch rows on
    the FP8 tensor-core decode GEMM (ATLAS_QUANT_FP8_WGMMA=1, gemm_decode_fp8), the A/B of
    the GEMV routes the other rows take. `swiglu`:
    w is a fused [gate | up] weight and the output the SwiGLU activation [m, n / 2] (the
    gate_up GEMV that ends with it). `logits`: f32 outputs (a quantized LM head, `atlas
    models quantize --lm-head`: the vocabulary-sized product)."""

    label: str
    m: int
    n: int
    k: int
    fmt: str
    ring: bool = False
    lut: bool = False
    narrow: int = 0
    tc: bool = False
    h2: bool = False
    wg: bool = False
    swiglu: bool = False
    logits: bool = False
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.DECODE_GEMV_FP8 if self.fmt == "fp8-block" else Family.DECODE_GEMV_NVFP4

    def weight_bytes(self) -> int:
        n, k = self.n, self.k
        if self.fmt == "fp8-block":
            return n * k + F32 * -(-n // 128) * -(-k // 128)
        return n * k // 2 + n * k // 16 + F32 * n

    def bytes_moved(self) -> int:
        out = self.n // 2 if self.swiglu else self.n
        return (self.weight_bytes() + BF16 * self.m * self.k
                + (F32 if self.logits else BF16) * self.m * out)

    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def describe(self) -> str:
        extra = ((" ring" if self.ring else "") + (" lut" if self.lut else "")
                 + (f" n{self.narrow}" if self.narrow else "") + (" tc" if self.tc else "")
                 + (" wg" if self.wg else "")
                 + (" +swiglu" if self.swiglu else "") + (" f32" if self.logits else ""))
        return f"m={self.m} n={self.n} k={self.k} {self.fmt}{extra}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RopeKv:
    """Split qkv rows into q (rotated, written out) and k/v (k rotated) appended to the
    paged cache; `qk_norm` adds the per-head RMSNorm of q and k first (Qwen3)."""

    label: str
    tokens: int
    heads: int
    kv_heads: int
    head_dim: int
    qk_norm: bool = True
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.QK_NORM_ROPE_KV if self.qk_norm else Family.KV_APPEND

    def bytes_moved(self) -> int:
        t, d = self.tokens, self.head_dim
        qkv = BF16 * t * (self.heads + 2 * self.kv_heads) * d          # read once
        written = BF16 * t * (self.heads + 2 * self.kv_heads) * d      # q out, k and v cache
        cos_sin = F32 * t * d                                          # one table row a token
        indices = 2 * I32 * t                                          # positions, slots
        weights = 2 * BF16 * d if self.qk_norm else 0
        return qkv + written + cos_sin + indices + weights

    def flops(self) -> int:
        return 0

    def describe(self) -> str:
        return (f"tokens={self.tokens} hq={self.heads} hkv={self.kv_heads} D={self.head_dim}"
                + (" qk-norm" if self.qk_norm else ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefillAttention:
    """Causal attention of one sequence of `seq` new tokens over its own keys (GQA); `sm90`
    runs the Hopper wgmma kernel (ops.attention_sm90, head_dim 128 or 256), else
    prefill_attn_bf16; `variant` one of its head_dim-128 A/B entry points (SM90_VARIANTS:
    Q in registers, 128-key tiles)."""

    label: str
    seq: int
    heads: int
    kv_heads: int
    head_dim: int
    sm90: bool = False
    variant: str = ""
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.PREFILL_ATTENTION

    def bytes_moved(self) -> int:
        q_and_out = 2 * self.seq * self.heads * self.head_dim
        k_and_v = 2 * self.seq * self.kv_heads * self.head_dim
        return BF16 * (q_and_out + k_and_v)

    def flops(self) -> int:
        # QK^T and PV (2 FLOPs per multiply-add each) over the seq*(seq+1)/2 causal pairs
        pairs = self.seq * (self.seq + 1) // 2
        return 4 * self.head_dim * self.heads * pairs

    def describe(self) -> str:
        return f"T={self.seq} hq={self.heads} hkv={self.kv_heads} D={self.head_dim}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeAttention:
    """One query per sequence against `history` cached tokens, `batch` sequences;
    `long_kernel` forces the long-context kernel (ops.attention_long) below its route's
    threshold; `rope`: with the q/k norm, RoPE and KV append of the step's token fused in
    (the qkv row in, the new k and v written to the cache; decode_attn_rope_bf16).
    `drafts` > 0: a verification step, each sequence `drafts` + 1 rows (row j seeing
    history + j keys) on the verification kernel (ops.attention_verify), or with
    `rows_apart` on decode attention with every row a sequence of its own (the
    ATLAS_DECODE_ATTN_VERIFY=0 path)."""

    label: str
    batch: int
    history: int
    heads: int
    kv_heads: int
    head_dim: int
    long_kernel: bool = False
    rope: bool = False
    drafts: int = 0
    rows_apart: bool = False
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.DECODE_ATTENTION_ROPE if self.rope else Family.DECODE_ATTENTION

    def bytes_moved(self) -> int:
        # a verification's keys read once (its drafts' too), its rows' q and out
        k_and_v = 2 * self.batch * (self.history + self.drafts) * self.kv_heads * self.head_dim
        q_and_out = 2 * self.batch * (1 + self.drafts) * self.heads * self.head_dim
        # rope: the k and v of the qkv row read, and written to the cache
        appended = 4 * self.batch * self.kv_heads * self.head_dim if self.rope else 0
        return BF16 * (k_and_v + q_and_out + appended)

    def flops(self) -> int:
        keys = sum(self.history + j for j in range(1 + self.drafts))  # row j: history + j
        return 4 * self.batch * self.heads * keys * self.head_dim

    def describe(self) -> str:
        drafts = f" K={self.drafts}" if self.drafts else ""
        return (f"batch={self.batch} history={self.history}{drafts} hq={self.heads} "
                f"hkv={self.kv_heads} D={self.head_dim}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Sampling:
    """One token per row of f32 logits [rows, vocab]; temperature <= 0 is greedy (argmax)."""

    label: str
    rows: int
    vocab: int
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.GREEDY if self.temperature <= 0 else Family.SAMPLING

    def bytes_moved(self) -> int:
        return F32 * self.rows * self.vocab + I32 * self.rows

    def flops(self) -> int:
        return 0

    def describe(self) -> str:
        if self.temperature <= 0:
            return f"rows={self.rows} vocab={self.vocab} greedy"
        return (f"rows={self.rows} vocab={self.vocab} T={self.temperature:g} "
                f"top_k={self.top_k} top_p={self.top_p:g}")


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeRouter:
    """Top-k routing of `tokens` rows into ids and weights: a decode batch (up to
    MOE_DECODE_MAX_TOKENS) from x bf16 [tokens, hidden], the gate's product included (the
    one-launch decode router); more tokens from f32 logits [tokens, experts] (the gate's
    product itself is a Linear row)."""

    label: str
    tokens: int
    dims: MoeDims
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.MOE_ROUTER

    @property
    def fused_gate(self) -> bool:
        return self.tokens <= MOE_DECODE_MAX_TOKENS

    def bytes_moved(self) -> int:
        d = self.dims
        bias = F32 * d.experts if d.scoring == "sigmoid" else 0
        moved = F32 * self.tokens * d.experts + (I32 + F32) * self.tokens * d.top_k + bias
        if self.fused_gate:  # the gate weight and x in (the logits are written, not read)
            moved += BF16 * d.experts * d.hidden + BF16 * self.tokens * d.hidden
        return moved

    def flops(self) -> int:
        return 2 * self.tokens * self.dims.experts * self.dims.hidden if self.fused_gate else 0

    def describe(self) -> str:
        d = self.dims
        gate = f" H={d.hidden} (gate GEMV + top-k)" if self.fused_gate else ""
        return f"tokens={self.tokens} E={d.experts} k={d.top_k} {d.scoring}{gate}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeExperts:
    """The routed expert FFN of `tokens` tokens: out = sum_j w_j * down_e(swiglu(gate_up_e x)).

    The table routes slot (t, j) to expert (t * top_k + j + offset) % experts (offset random
    per input set): each token's experts are distinct, loads are balanced, and exactly
    min(experts, tokens * top_k) experts are hit, whose weights are the bytes that must move
    (plus x in and out once); real routing is less balanced, which only helps the grouped
    GEMM's tiles less. FLOPs: 6 * hidden * inter per routed slot.
    """

    label: str
    tokens: int
    dims: MoeDims
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.MOE_DECODE if self.tokens <= MOE_DECODE_MAX_TOKENS else Family.MOE_GROUPED

    @property
    def experts_hit(self) -> int:
        return min(self.dims.experts, self.tokens * self.dims.top_k)

    def bytes_moved(self) -> int:
        d = self.dims
        weights = BF16 * self.experts_hit * 3 * d.inter * d.hidden
        return weights + BF16 * 2 * self.tokens * d.hidden + (I32 + F32) * self.tokens * d.top_k

    def flops(self) -> int:
        return 6 * self.tokens * self.dims.top_k * self.dims.inter * self.dims.hidden

    def describe(self) -> str:
        d = self.dims
        return (f"tokens={self.tokens} E={d.experts} k={d.top_k} H={d.hidden} I={d.inter} "
                f"hit={self.experts_hit}")


def moe_shapes(models: tuple[MoeDims, ...], routers: tuple[MoeDims, ...],
               batches: tuple[int, ...], prefill_tokens: int) -> list[KernelShape]:
    """Router and expert rows: every model at every decode batch and the prefill chunk; the
    first model's expert rows and its first-batch router row are the quick ones."""
    shapes: list[KernelShape] = []
    tokens = [(f"b{b}", b) for b in batches] + [(f"prefill {prefill_tokens}", prefill_tokens)]
    for i, d in enumerate(models + routers):
        shapes += [MoeRouter(label=f"{d.name} {phase}", tokens=t, dims=d,
                             quick=i == 0 and t == batches[0]) for phase, t in tokens]
    for i, d in enumerate(models):
        shapes += [MoeExperts(label=f"{d.name} experts {phase}", tokens=t, dims=d,
                              quick=i == 0) for phase, t in tokens]
    return shapes


@dataclass(frozen=True, slots=True, kw_only=True)
class Conv1d:
    """Causal depthwise conv1d + SiLU of `seqs` sequences of `tokens` each, with a rolling
    state (a ring of the last inputs): kernel - 1 history rows read, the last
    min(tokens, kernel - 1) inputs written."""

    label: str
    seqs: int
    tokens: int
    channels: int
    kernel: int
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.CONV1D

    def bytes_moved(self) -> int:
        rows = 2 * self.seqs * self.tokens * self.channels             # x read, out written
        state = self.seqs * (self.kernel - 1 + min(self.tokens, self.kernel - 1)) * self.channels
        return BF16 * (rows + state + self.channels * self.kernel)

    def flops(self) -> int:
        return 0

    def describe(self) -> str:
        return f"seqs={self.seqs} T={self.tokens} C={self.channels} K={self.kernel}"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeltaRule:
    """The gated delta rule over `seqs` sequences of `tokens`: chunked (prefill) or
    recurrent (decode, tokens == 1), fp32 state [hv, dk, dv] per sequence read and written.
    Counted as memory-bound (no FLOPs): the chunked form's products are small per chunk."""

    label: str
    seqs: int
    tokens: int
    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    chunked: bool
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.DELTA_CHUNK if self.chunked else Family.DELTA_STEP

    def bytes_moved(self) -> int:
        t = self.seqs * self.tokens
        qkv = 2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim
        acts = BF16 * t * (qkv + 2 * self.value_heads + self.value_heads * self.value_dim)
        state = 2 * F32 * self.seqs * self.value_heads * self.key_dim * self.value_dim
        return acts + state

    def flops(self) -> int:
        return 0

    def describe(self) -> str:
        return (f"seqs={self.seqs} T={self.tokens} hk={self.key_heads} hv={self.value_heads} "
                f"dk={self.key_dim} dv={self.value_dim}")


@dataclass(frozen=True, slots=True, kw_only=True)
class GdnDecode:
    """A Gated-DeltaNet layer's decode step between its projections in one launch (conv1d,
    q/k norms, the recurrent delta rule, the gated RMSNorm) for `seqs` sequences: the
    projection row [q|k|v|z|b|a] read and the gated output written, kernel - 1 conv-ring
    rows read and one written, the f32 state read and written once, the conv taps. With
    `tokens` > 1 a verification's run per sequence: a row per token, the state read once and
    written after every token into an out slot with its whole ring."""

    label: str
    seqs: int
    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    kernel: int
    tokens: int = 1
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.GDN_DECODE

    def bytes_moved(self) -> int:
        conv = 2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim
        values = self.value_heads * self.value_dim
        t = self.tokens
        rows = self.seqs * t * (conv + values + 2 * self.value_heads + values)
        written = 1 if t == 1 else t * self.kernel   # ring rows written
        ring = self.seqs * (self.kernel - 1 + written) * conv
        state = (1 + t) * F32 * self.seqs * self.value_heads * self.key_dim * self.value_dim
        return BF16 * (rows + ring + conv * self.kernel + self.value_dim) + state

    def flops(self) -> int:
        return 0

    def describe(self) -> str:
        return (f"seqs={self.seqs} hk={self.key_heads} hv={self.value_heads} "
                f"dk={self.key_dim} dv={self.value_dim} K={self.kernel}"
                + (f" T={self.tokens}" if self.tokens > 1 else ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class GatedNorm:
    """RMSNorm(x) * w * silu(z) per (token, head) row: x and z read, out written."""

    label: str
    tokens: int
    heads: int
    dim: int
    quick: bool = False

    @property
    def family(self) -> Family:
        return Family.GATED_RMSNORM

    def bytes_moved(self) -> int:
        return BF16 * (3 * self.tokens * self.heads * self.dim + self.dim)

    def flops(self) -> int:
        return 0

    def describe(self) -> str:
        return f"tokens={self.tokens} heads={self.heads} dim={self.dim}"


# ---- the table ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TableScale:
    """The sizes the table sweeps: decode batches, the prefill chunk, the prefill
    attention lengths and the decode attention histories."""

    decode_batches: tuple[int, ...] = (1, 32)
    #: decode batches of the tensor-core batched GEMV rows (9..64 rows: 16 concurrent
    #: streams, 32, and its largest batch)
    batched_batches: tuple[int, ...] = (16, 32, 64)
    #: decode batches of the skinny wgmma GEMM rows (linear routes 9..256 rows to it; 8 is
    #: the A/B against gemv_mma's best case; 256 the serving default's largest batch)
    decode_gemm_batches: tuple[int, ...] = (8, 16, 32, 64, 128, 256)
    #: the skinny GEMM's two-warpgroup rows: where x's L2 re-reads weigh (17 rows and up;
    #: the TMA kernel takes two warpgroups at 16 rows too, and by default from 33)
    decode_gemm_wide_batches: tuple[int, ...] = (16, 32, 64, 128, 256)
    prefill_tokens: int = 2048
    attention_seqs: tuple[int, ...] = (256, 1024, 4096)
    histories: tuple[int, ...] = (512, 4096, 16384)
    #: decode batches of the quantized GEMV rows (the tensor-core GEMV takes 1..64 rows)
    quant_batches: tuple[int, ...] = (1, 8, 32)
    #: long-context decode attention (issue 15: batch-8 decode at 16k and 32k histories, the
    #: engines that take the long-context kernel): (batch, history) pairs
    long_decode: tuple[tuple[int, int], ...] = ((8, 16384), (8, 32768))
    #: long prompts on the wgmma prefill attention (issue 15: the 32k-token prefill)
    long_prefill: tuple[int, ...] = (16384, 32768)
    #: MoE expert batches: 1 and 8 on the decode kernels, 64 and 256 on the grouped path
    moe_batches: tuple[int, ...] = (1, 8, 64, 256)
    #: decode batches of the linear-attention layer's rows (its fused step and its two
    #: projections): 1, 8 (the flagship's batch-8 bench) and 32
    hybrid_batches: tuple[int, ...] = (1, 8, 32)
    #: decode attention's latency rows (the short contexts where a step's attention is a
    #: chain of round trips, not bytes): (batch, history) pairs for DECODE_LATENCY_HEADS
    latency_decode: tuple[tuple[int, int], ...] = ((1, 512), (1, 2048), (8, 512), (8, 2048))
    #: decode attention's bandwidth rows (issue 15: the 64-stream throughput step, ~1.5k keys
    #: each): (batch, history) pairs, plain and rope-fused, as the engine launches them
    throughput_decode: tuple[tuple[int, int], ...] = ((64, 1536),)
    #: verification attention (issue 13: Qwen3-8B batch 1 at K = 3, against 4 x the plain
    #: batch-1 row and the rows-apart path): (batch, history, drafts)
    verify_decode: tuple[tuple[int, int, int], ...] = ((1, 512, 3), (8, 512, 3), (1, 4096, 3))
    #: batched decode attention (issue 15: the tensor-core kernel at batch 8 and 64 and any
    #: context, routes.decode_attn_long_min_batch; batch 32 at 2,048: D 256's two-split
    #: grid): (batch, history) pairs for BATCHED_DECODE_HEADS, labelled "batched", as
    #: decode_attention routes them
    batched_decode: tuple[tuple[int, int], ...] = (
        (8, 512), (8, 1536), (8, 2048), (8, 16384), (32, 2048), (64, 512), (64, 1536),
        (64, 2048), (64, 16384))


def _linears(dims: ModelDims) -> list[tuple[str, int, int]]:
    """(name, n, k) of the projections of one layer."""
    return [("qkv", dims.qkv_out, dims.hidden), ("o_proj", dims.hidden, dims.attn_out),
            ("gate_up", 2 * dims.intermediate, dims.hidden),
            ("down", dims.hidden, dims.intermediate)]


def hybrid_shapes(h: HybridDims, scale: TableScale) -> list[KernelShape]:
    """The hybrid layers' kernels: conv1d, both delta-rule forms, the gated norm, the fused
    decode step and the linear-attention layer's two projections around it (at the hybrid
    batches), and attention at the family's head dim (256 for Qwen3.5), at the table's decode
    batches and prefill length (one sequence)."""
    first_batch = scale.decode_batches[0]
    mid_seq = scale.attention_seqs[len(scale.attention_seqs) // 2]
    mid_hist = scale.histories[len(scale.histories) // 2]
    lin = dict(key_heads=h.key_heads, value_heads=h.value_heads, key_dim=h.key_dim,
               value_dim=h.value_dim)
    t = scale.prefill_tokens
    shapes: list[KernelShape] = []
    for b in scale.decode_batches:
        shapes += [Conv1d(label=f"{h.name} decode b{b}", seqs=b, tokens=1,
                          channels=h.conv_channels, kernel=h.conv_kernel, quick=b == first_batch),
                   DeltaRule(label=f"{h.name} decode b{b}", seqs=b, tokens=1, chunked=False,
                             quick=b == first_batch, **lin),
                   GatedNorm(label=f"{h.name} decode b{b}", tokens=b, heads=h.value_heads,
                             dim=h.value_dim)]
    # a speculative verification of 3 drafts at batch 1: the decode kernel's run of 4 tokens
    shapes += [GdnDecode(label=f"{h.name} decode b{first_batch} verify K3", seqs=first_batch,
                         kernel=h.conv_kernel, tokens=4, quick=True, **lin)]
    for b in scale.hybrid_batches:
        shapes += [GdnDecode(label=f"{h.name} decode b{b}", seqs=b, kernel=h.conv_kernel,
                             quick=b == first_batch, **lin),
                   Linear(label=f"{h.name} decode b{b} in_proj", m=b, n=h.in_proj_width,
                          k=h.hidden, quick=b == first_batch),
                   Linear(label=f"{h.name} decode b{b} out_proj", m=b, n=h.hidden,
                          k=h.value_heads * h.value_dim, quick=b == first_batch)]
    shapes += [Conv1d(label=f"{h.name} prefill {t}", seqs=1, tokens=t, channels=h.conv_channels,
                      kernel=h.conv_kernel, quick=True),
               DeltaRule(label=f"{h.name} prefill {t}", seqs=1, tokens=t, chunked=True,
                         quick=True, **lin),
               GatedNorm(label=f"{h.name} prefill {t}", tokens=t, heads=h.value_heads,
                         dim=h.value_dim, quick=True)]
    shapes += [PrefillAttention(label=f"{h.name} T{s}", seq=s, heads=h.heads,
                                kv_heads=h.kv_heads, head_dim=h.head_dim, quick=s == mid_seq)
               for s in scale.attention_seqs]
    if h.head_dim in SM90_PREFILL_HEAD_DIMS:
        shapes += [PrefillAttention(label=f"{h.name} T{s} sm90", seq=s, heads=h.heads,
                                    kv_heads=h.kv_heads, head_dim=h.head_dim, sm90=True,
                                    quick=s == mid_seq)
                   for s in scale.attention_seqs]
    shapes += [DecodeAttention(label=f"{h.name} b{b} hist{hist}", batch=b, history=hist,
                               heads=h.heads, kv_heads=h.kv_heads, head_dim=h.head_dim,
                               quick=hist == mid_hist and b == first_batch)
               for b in scale.decode_batches for hist in scale.histories]
    return shapes


def table_shapes(m: ModelDims = QWEN3_8B,
                 small_models: tuple[ModelDims, ...] = (QWEN3_0_6B, SMOLLM2_135M),
                 scale: TableScale = TableScale(),
                 moe_models: tuple[MoeDims, ...] = (QWEN3_30B_A3B, QWEN3_5_35B_A3B),
                 moe_routers: tuple[MoeDims, ...] = (MINIMAX_M2_ROUTER,),
                 hybrid: HybridDims | None = QWEN3_5_35B,
                 quant_widths: tuple[ModelDims, ...] = QUANT_WIDTHS,
                 decode_gemm_widths: tuple[tuple[ModelDims, tuple[str, ...]], ...] = (
                     DECODE_GEMM_WIDTHS),
                 latency_heads: tuple[AttentionHeads, ...] = DECODE_LATENCY_HEADS,
                 batched_heads: tuple[AttentionHeads, ...] = BATCHED_DECODE_HEADS
                 ) -> list[KernelShape]:
    """Every shape of the kernel table, in table order; `quick` marks the short run's.

    `m` gives every family's shapes; `small_models` add batch-1 GEMVs of small models (the
    embedded default among them), where launch and fill costs weigh most; `quant_widths`
    batch-1 quantized GEMVs of other dense widths; `decode_gemm_widths` the decode GEMM at
    other widths (16 and 64 rows, the default block shape); `latency_heads` the short-context decode
    attention rows (scale.latency_decode) of each head geometry, `batched_heads` the
    batched ones (scale.batched_decode, attention alone). The middle entry
    of each sweep is the quick one.
    """
    first_batch, last_batch = scale.decode_batches[0], scale.decode_batches[-1]
    mid_seq = scale.attention_seqs[len(scale.attention_seqs) // 2]
    mid_hist = scale.histories[len(scale.histories) // 2]
    tokens = [(f"decode b{b}", b) for b in scale.decode_batches] + [
        (f"prefill {scale.prefill_tokens}", scale.prefill_tokens)]
    shapes: list[KernelShape] = []
    for residual in (False, True):
        shapes += [Norm(label=f"{m.name} {phase}", rows=t, dim=m.hidden, residual=residual,
                        quick=t != first_batch) for phase, t in tokens]
    for qk_norm in (True, False):
        shapes += [RopeKv(label=f"{m.name} {phase}", tokens=t, heads=m.heads,
                          kv_heads=m.kv_heads, head_dim=m.head_dim, qk_norm=qk_norm,
                          quick=t != first_batch) for phase, t in tokens]
    shapes += [SiluMul(label=f"{m.name} {phase}", rows=t, inter=m.intermediate,
                       quick=t != first_batch) for phase, t in tokens]
    shapes += [Embedding(label=f"{m.name} {phase}", tokens=t, dim=m.hidden, vocab=m.vocab,
                         quick=t != first_batch) for phase, t in tokens]
    for b in scale.decode_batches:
        shapes += [Linear(label=f"{m.name} {name} b{b}", m=b, n=n, k=k,
                          quick=name in ("qkv", "gate_up")) for name, n, k in _linears(m)]
        shapes.append(Linear(label=f"{m.name} down+swiglu b{b}", m=b, n=m.hidden,
                             k=m.intermediate, swiglu=True, quick=b == first_batch))
        shapes.append(Linear(label=f"{m.name} gate_up+swiglu b{b}", m=b, n=2 * m.intermediate,
                             k=m.hidden, ends_swiglu=True))
        shapes.append(Linear(label=f"{m.name} lm_head b{b}", m=b, n=m.vocab, k=m.hidden,
                             out_f32=True, quick=b == first_batch))
    # the m-row CUDA-core GEMV on each of its kernels: a speculative verification of K = 1
    # and 3 drafts at batch 1 (2 and 4 rows), and one row on the ring kernel beside the
    # single-row kernel ("b1 tiled": the b1 rows above, labelled for the A/B's selection)
    for b, path in ((b, p) for b in (1, 2, 4) for p in ("ring", "tiled")):
        shapes += [Linear(label=f"{m.name} {name} b{b} {path}", m=b, n=n, k=k, gemv=path)
                   for name, n, k in _linears(m)]
        shapes.append(Linear(label=f"{m.name} lm_head b{b} {path}", m=b, n=m.vocab, k=m.hidden,
                             out_f32=True, gemv=path))
    for b in scale.batched_batches:
        shapes += [Linear(label=f"{m.name} {name} b{b}", m=b, n=n, k=k, batched=True,
                          quick=b == 32 and name in ("qkv", "gate_up"))
                   for name, n, k in _linears(m)]
        shapes.append(Linear(label=f"{m.name} lm_head b{b}", m=b, n=m.vocab, k=m.hidden,
                             out_f32=True, batched=True))
    for b in scale.decode_gemm_batches:
        shapes += [Linear(label=f"{m.name} {name} b{b}", m=b, n=n, k=k, decode_sm90=True,
                          quick=b == 32 and name in ("qkv", "gate_up"))
                   for name, n, k in _linears(m)]
        shapes.append(Linear(label=f"{m.name} lm_head b{b}", m=b, n=m.vocab, k=m.hidden,
                             out_f32=True, decode_sm90=True))
        if b not in scale.decode_batches and b > 8:  # the decode GEMM's SwiGLU epilogue
            shapes.append(Linear(label=f"{m.name} gate_up+swiglu b{b}", m=b,
                                 n=2 * m.intermediate, k=m.hidden, ends_swiglu=True,
                                 decode_sm90=True, quick=b == 64))
    # the same products on two-warpgroup blocks (ATLAS_DECODE_GEMM_WIDE's A/B, issue 15's
    # 64-stream decode step)
    for b in scale.decode_gemm_wide_batches:
        shapes += [Linear(label=f"{m.name} {name} b{b} wide", m=b, n=n, k=k, decode_sm90=True,
                          wide=True) for name, n, k in _linears(m)]
        shapes.append(Linear(label=f"{m.name} lm_head b{b} wide", m=b, n=m.vocab, k=m.hidden,
                             out_f32=True, decode_sm90=True, wide=True))
    # the layer's products again on the decode GEMM's cp.async kernel, both block shapes
    # (ATLAS_DECODE_GEMM_TMA=0's A/B against the rows above)
    for b in scale.decode_gemm_batches:
        for wide in (False, True) if b in scale.decode_gemm_wide_batches else (False,):
            tag = " wide" if wide else ""
            shapes += [Linear(label=f"{m.name} {name} b{b}{tag} cp.async", m=b, n=n, k=k,
                              decode_sm90=True, wide=wide, cpasync=True)
                       for name, n, k in _linears(m)]
            if b not in scale.decode_batches and b > 8:
                shapes.append(Linear(label=f"{m.name} gate_up+swiglu b{b}{tag} cp.async", m=b,
                                     n=2 * m.intermediate, k=m.hidden, ends_swiglu=True,
                                     decode_sm90=True, wide=wide, cpasync=True))
        if b in scale.decode_gemm_wide_batches and b not in scale.decode_batches:
            shapes.append(Linear(label=f"{m.name} gate_up+swiglu b{b} wide", m=b,
                                 n=2 * m.intermediate, k=m.hidden, ends_swiglu=True,
                                 decode_sm90=True, wide=True))
    # the decode GEMM at other widths as a served step launches it: block shape and split the
    # start-up tuner's (ops/decode_gemm_tune.py; ATLAS_DECODE_GEMM_TUNE=0: the kernel's default
    # shape, two warpgroups from 33 rows, and the split rule, ATLAS_DECODE_GEMM_ANY_SPLIT's A/B)
    shapes += [Linear(label=f"{dims.name} {name} b{b} dgemm", m=b, n=n, k=k, decode_sm90=True,
                      wide=None)
               for dims, names in decode_gemm_widths for b in (16, 64)
               for name, n, k in _linears(dims) if name in names]
    for fmt in ("fp8-block", "nvfp4"):
        shapes += [QuantLinear(label=f"{m.name} {name} b{b} {fmt}", m=b, n=n, k=k, fmt=fmt,
                               quick=b == scale.quant_batches[0] and name in ("qkv", "gate_up"))
                   for b in scale.quant_batches for name, n, k in _linears(m)]
        # the ring kernel at batch 1 and 8 (A/B of the register-fed one), and batch 1 of
        # other published widths (hidden 2,048 .. 8,192)
        shapes += [QuantLinear(label=f"{m.name} {name} b{b} {fmt} ring", m=b, n=n, k=k,
                               fmt=fmt, ring=True)
                   for b in (1, 8) for name, n, k in _linears(m)]
        # the dense MLP's gate_up ending with the SwiGLU (what a decode step runs; the
        # register-fed kernel's NVFP4 steps need hidden % 128 == 0)
        shapes += [QuantLinear(label=f"{m.name} gate_up+swiglu b{b} {fmt}", m=b,
                               n=2 * m.intermediate, k=m.hidden, fmt=fmt, swiglu=True)
                   for b in (1, 8) if fmt == "fp8-block" or m.hidden % 128 == 0]
        shapes += [QuantLinear(label=f"{dims.name} {name} b1 {fmt}", m=1, n=n, k=k, fmt=fmt)
                   for dims in quant_widths for name, n, k in _linears(dims)]
        # the quantized LM head (f32 logits), batch 1 and 8
        if fmt == "fp8-block" or m.hidden % 128 == 0:
            shapes += [QuantLinear(label=f"{m.name} lm_head b{b} {fmt}", m=b, n=m.vocab,
                                   k=m.hidden, fmt=fmt, logits=True) for b in (1, 8)]
        # the narrow pipelined loops at batch 1 (ATLAS_QUANT_NARROW=1 / 2, the A/B of the
        # format's default loop): the four projections, gate_up + SwiGLU and the LM head
        if fmt == "fp8-block" or m.hidden % 128 == 0:
            for nw in (1, 2):
                shapes += [QuantLinear(label=f"{m.name} {name} b1 {fmt} n{nw}", m=1, n=n, k=k,
                                       fmt=fmt, narrow=nw) for name, n, k in _linears(m)]
                shapes += [QuantLinear(label=f"{m.name} gate_up+swiglu b1 {fmt} n{nw}", m=1,
                                       n=2 * m.intermediate, k=m.hidden, fmt=fmt, narrow=nw,
                                       swiglu=True),
                           QuantLinear(label=f"{m.name} lm_head b1 {fmt} n{nw}", m=1,
                                       n=m.vocab, k=m.hidden, fmt=fmt, narrow=nw, logits=True)]
    # FP8 at batch 1 on the tensor-core route (ATLAS_QUANT_FP8_CORE=0: the A/B of the
    # convert GEMV that the plain b1 rows above take)
    shapes += [QuantLinear(label=f"{m.name} {name} b1 fp8-block tc", m=1, n=n, k=k,
                           fmt="fp8-block", tc=True) for name, n, k in _linears(m)]
    # the NVFP4 byte-table decode at batch 1 (A/B of the bit moves): the four projections
    # and gate_up ending with the SwiGLU
    shapes += [QuantLinear(label=f"{m.name} {name} b1 nvfp4 lut", m=1, n=n, k=k, fmt="nvfp4",
                           lut=True) for name, n, k in _linears(m)]
    if m.hidden % 128 == 0:
        shapes.append(QuantLinear(label=f"{m.name} gate_up+swiglu b1 nvfp4 lut", m=1,
                                  n=2 * m.intermediate, k=m.hidden, fmt="nvfp4", lut=True,
                                  swiglu=True))
    # NVFP4 at batch 1 on the half-precision-FMA GEMV (ATLAS_QUANT_NVFP4_H2=1, the A/B of the
    # tensor-core rows above): the four projections, gate_up ending with the SwiGLU, the LM head
    shapes += [QuantLinear(label=f"{m.name} {name} b1 nvfp4 h2", m=1, n=n, k=k, fmt="nvfp4",
                           h2=True) for name, n, k in _linears(m)]
    shapes += [QuantLinear(label=f"{m.name} gate_up+swiglu b1 nvfp4 h2", m=1,
                           n=2 * m.intermediate, k=m.hidden, fmt="nvfp4", h2=True, swiglu=True),
               QuantLinear(label=f"{m.name} lm_head b1 nvfp4 h2", m=1, n=m.vocab, k=m.hidden,
                           fmt="nvfp4", h2=True, logits=True)]
    # FP8 at batch 1 on the half-precision-FMA GEMV (ATLAS_QUANT_FP8_H2=1, the A/B of the
    # convert / tensor-core rows above): the four projections, gate_up ending with the SwiGLU,
    # the LM head
    shapes += [QuantLinear(label=f"{m.name} {name} b1 fp8-block h2", m=1, n=n, k=k,
                           fmt="fp8-block", h2=True) for name, n, k in _linears(m)]
    shapes += [QuantLinear(label=f"{m.name} gate_up+swiglu b1 fp8-block h2", m=1,
                           n=2 * m.intermediate, k=m.hidden, fmt="fp8-block", h2=True,
                           swiglu=True),
               QuantLinear(label=f"{m.name} lm_head b1 fp8-block h2", m=1, n=m.vocab,
                           k=m.hidden, fmt="fp8-block", h2=True, logits=True)]
    # FP8 at batch 1 and 8 on the FP8 tensor-core decode GEMM (ATLAS_QUANT_FP8_WGMMA=1, the
    # A/B of the GEMV rows above): the four projections, gate_up ending with the SwiGLU, the
    # LM head
    for b in (1, 8):
        shapes += [QuantLinear(label=f"{m.name} {name} b{b} fp8-block wg", m=b, n=n, k=k,
                               fmt="fp8-block", wg=True) for name, n, k in _linears(m)]
        shapes += [QuantLinear(label=f"{m.name} gate_up+swiglu b{b} fp8-block wg", m=b,
                               n=2 * m.intermediate, k=m.hidden, fmt="fp8-block", wg=True,
                               swiglu=True),
                   QuantLinear(label=f"{m.name} lm_head b{b} fp8-block wg", m=b, n=m.vocab,
                               k=m.hidden, fmt="fp8-block", wg=True, logits=True)]
    for small in small_models:
        shapes += [Linear(label=f"{small.name} {name} b1", m=1, n=n, k=k)
                   for name, n, k in _linears(small)]
        shapes.append(Linear(label=f"{small.name} down+swiglu b1", m=1, n=small.hidden,
                             k=small.intermediate, swiglu=True))
        shapes.append(Linear(label=f"{small.name} gate_up+swiglu b1", m=1,
                             n=2 * small.intermediate, k=small.hidden, ends_swiglu=True))
        # small N (o_proj, down) gives the batched GEMV few 32-row blocks: measured, not assumed
        shapes += [Linear(label=f"{small.name} {name} b32", m=32, n=n, k=k, batched=True)
                   for name, n, k in _linears(small)]
        shapes += [Linear(label=f"{small.name} {name} b32", m=32, n=n, k=k, decode_sm90=True)
                   for name, n, k in _linears(small)]
        shapes.append(Linear(label=f"{small.name} lm_head b1", m=1, n=small.vocab,
                             k=small.hidden, out_f32=True))
    shapes += [Linear(label=f"{m.name} {name} prefill {scale.prefill_tokens}",
                      m=scale.prefill_tokens, n=n, k=k, prefill=True, quick=name == "gate_up")
               for name, n, k in _linears(m)]
    shapes += [PrefillAttention(label=f"{m.name} T{t}", seq=t, heads=m.heads,
                                kv_heads=m.kv_heads, head_dim=m.head_dim, quick=t == mid_seq)
               for t in scale.attention_seqs]
    if m.head_dim in SM90_PREFILL_HEAD_DIMS:
        shapes += [PrefillAttention(label=f"{m.name} T{t} sm90", seq=t, heads=m.heads,
                                    kv_heads=m.kv_heads, head_dim=m.head_dim, sm90=True,
                                    quick=t == mid_seq)
                   for t in (*scale.attention_seqs, *scale.long_prefill)]
    if m.head_dim == SM90_VARIANT_HEAD_DIM:  # the A/Bs of its other entry points
        shapes += [PrefillAttention(label=f"{m.name} T{t} sm90 {v}", seq=t, heads=m.heads,
                                    kv_heads=m.kv_heads, head_dim=m.head_dim, sm90=True,
                                    variant=v)
                   for v in SM90_VARIANTS for t in (scale.attention_seqs[-1], *scale.long_prefill)]
    shapes += [DecodeAttention(label=f"{m.name} b{b} hist{h}", batch=b, history=h,
                               heads=m.heads, kv_heads=m.kv_heads, head_dim=m.head_dim,
                               quick=h == mid_hist)
               for b in scale.decode_batches for h in scale.histories]
    shapes += [DecodeAttention(label=f"{m.name} b{b} hist{h}", batch=b, history=h,
                               heads=m.heads, kv_heads=m.kv_heads, head_dim=m.head_dim)
               for b, h in scale.long_decode]
    shapes += [DecodeAttention(label=f"{m.name} b{b} hist{h}{tag}", batch=b, history=h,
                               heads=m.heads, kv_heads=m.kv_heads, head_dim=m.head_dim,
                               rope=rope)
               for b, h in scale.throughput_decode for rope, tag in ((False, ""),
                                                                      (True, " +rope"))]
    # verification steps: the verification kernel and every row a sequence of its own
    shapes += [DecodeAttention(label=f"{m.name} b{b} hist{h} K{k} verify{tag}", batch=b,
                               history=h, heads=m.heads, kv_heads=m.kv_heads,
                               head_dim=m.head_dim, drafts=k, rows_apart=apart,
                               quick=(b, h) == scale.verify_decode[0][:2])
               for b, h, k in scale.verify_decode
               for apart, tag in ((False, ""), (True, " rows-apart"))]
    # the long-context kernel below its route's threshold: the A/B for lowering it
    shapes += [DecodeAttention(label=f"{m.name} b{b} hist{h} long", batch=b, history=h,
                               heads=m.heads, kv_heads=m.kv_heads, head_dim=m.head_dim,
                               long_kernel=True)
               for b in scale.decode_batches for h in scale.histories
               if h < LONG_CONTEXT_KEYS]
    # what batch-1 decode launches: the rope fused in (the small model is latency-bound)
    shapes += [DecodeAttention(label=f"{dims.name} b{first_batch} hist{h} +rope",
                               batch=first_batch, history=h, heads=dims.heads,
                               kv_heads=dims.kv_heads, head_dim=dims.head_dim, rope=True,
                               quick=h == scale.histories[0])
               for dims in (m, *small_models[:1]) for h in scale.histories]
    # the latency-bound short contexts of every head geometry, as each model launches them
    shapes += [DecodeAttention(label=f"{a.name} b{b} hist{h} latency", batch=b, history=h,
                               heads=a.heads, kv_heads=a.kv_heads, head_dim=a.head_dim,
                               rope=a.rope, quick=(b, h) == scale.latency_decode[0])
               for a in latency_heads for b, h in scale.latency_decode]
    shapes += [DecodeAttention(label=f"{a.name} b{b} hist{h} batched", batch=b, history=h,
                               heads=a.heads, kv_heads=a.kv_heads, head_dim=a.head_dim)
               for a in batched_heads for b, h in scale.batched_decode]
    for b in scale.decode_batches:
        shapes += [
            Sampling(label=f"{m.name} b{b}", rows=b, vocab=m.vocab, temperature=0.0,
                     quick=True),
            Sampling(label=f"{m.name} b{b}", rows=b, vocab=m.vocab, temperature=0.7,
                     top_k=50, top_p=0.9, quick=True),
            Sampling(label=f"{m.name} b{b}", rows=b, vocab=m.vocab, temperature=0.7,
                     top_p=0.9, quick=b == last_batch),
        ]
    shapes += moe_shapes(moe_models, moe_routers, scale.moe_batches, scale.prefill_tokens)
    if hybrid is not None:
        shapes += hybrid_shapes(hybrid, scale)
    return shapes


# ---- roofline -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Ceilings:
    """The measured limits: device copy bandwidth (bytes read + written per second) and the
    bf16 tensor-core rate of a large matrix product."""

    copy_bytes_per_s: float
    bf16_flops_per_s: float


@dataclass(frozen=True, slots=True)
class Achieved:
    """A time against the roofline: the rate in the unit of the binding limit."""

    rate: float           # GB/s or TFLOP/s
    unit: str             # "GB/s" or "TFLOP/s"
    fraction: float       # rate / ceiling
    floor_us: float       # the roofline time: no version runs much faster


def compute_bound(shape: KernelShape, ceilings: Ceilings) -> bool:
    """True when the arithmetic, not the bytes, sets the floor."""
    return (shape.flops() / ceilings.bf16_flops_per_s
            > shape.bytes_moved() / ceilings.copy_bytes_per_s)


def floor_us(shape: KernelShape, ceilings: Ceilings) -> float:
    return 1e6 * max(shape.flops() / ceilings.bf16_flops_per_s,
                     shape.bytes_moved() / ceilings.copy_bytes_per_s)


def achieved(shape: KernelShape, us: float, ceilings: Ceilings) -> Achieved:
    """The rate of a run taking `us` microseconds, in the unit of its binding limit."""
    if us <= 0:
        raise ValueError(f"time must be positive, got {us} us")
    if compute_bound(shape, ceilings):
        rate = shape.flops() / us / 1e6
        return Achieved(rate, "TFLOP/s", rate * 1e12 / ceilings.bf16_flops_per_s,
                        floor_us(shape, ceilings))
    rate = shape.bytes_moved() / us / 1e3
    return Achieved(rate, "GB/s", rate * 1e9 / ceilings.copy_bytes_per_s,
                    floor_us(shape, ceilings))


def speedup_summary(speedups: Iterable[float]) -> dict[str, float]:
    """The gate's metrics over the timed rows: the worst speedup and the geometric mean."""
    values = list(speedups)
    if not values or any(not v > 0 for v in values):
        raise ValueError(f"speedups must be a non-empty list of positive numbers: {values}")
    return {"speedup_min": min(values),
            "speedup_geomean": math.exp(sum(math.log(v) for v in values) / len(values))}
