"""Launch builders for mixture-of-experts layers whose experts are FP8 or NVFP4
(kernels/<hw>/common/moe_decode_quant.cu; reference/moe_quant.py is the specification).

A layer's experts of one projection are one `QuantExperts`: every expert's rows stacked
into one quantized matrix, as the bf16 layout packs them (`experts_gate_up` [E * 2I, H],
expert e's gate rows then its up rows; `experts_down` [E * H, I]), in one of the dense
linears' formats: FP8 codes + f32 scales through an `Fp8ScaleMap` (block scales of the
parts concatenated or re-laid by `core.quant.fused_fp8_scales`, exactly as a fused q|k|v),
or NVFP4 codes + E4M3 group scales stacked by rows + an f32 scale per row (each expert
tensor's global scale).

A shared expert as wide as a routed one and stored alike (Qwen3.5-MoE, Qwen3-Next) is folded
in by the loader as one more expert (index E, after the routed ones), so its decode slot is
one more slot of the same launches, as on the bf16 path (`folds_shared`). Decode steps (up
to ops.moe.DECODE_MAX_TOKENS tokens) run two launches that read only the selected experts'
quantized bytes (`decode_experts`); a prefill chunk dequantizes both
projections into a bf16 scratch (`dequant`) and runs the bf16 grouped path on it
(`ops.moe.experts`), correct first: the experts are streamed once per chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.quant import Fp8ScaleMap
from ..gpu import DevicePtr, Stream
from ..kernel_abi import (MOE_DEQUANT_NVFP4, MOE_DOWN_SUM_EARLY_FP8, MOE_DOWN_SUM_EARLY_NVFP4,
                          MOE_DOWN_SUM_FP8, MOE_DOWN_SUM_NVFP4, MOE_GATE_UP_SILU_FP8,
                          MOE_GATE_UP_SILU_NVFP4)
from . import KernelCache
from ._preconditions import require_aligned, require_multiple
from .matmul_quant import Fp8Weight, dequant_fp8
from .moe import DECODE_MAX_TOKENS, MoeShape

#: the kernels' work unit (one NVFP4 scale group): k must be a multiple
GROUP = 16
THREADS = 256
#: output columns (gate/up) or rows (down) per block: one warp each
WARPS = THREADS // 32
FORMATS = ("fp8", "nvfp4")


@dataclass(frozen=True, slots=True)
class QuantExperts:
    """One projection of a layer's experts, quantized: `experts` x [rows, k] stacked into
    [experts * rows, k]. FP8: `scales` f32 through `smap` (row indices of the stacked
    matrix); NVFP4: `scales` E4M3 [experts * rows, k / 16], `row_scales` f32 per row."""

    format: str
    codes: DevicePtr
    scales: DevicePtr
    experts: int
    rows: int
    k: int
    smap: Fp8ScaleMap | None = None
    row_scales: DevicePtr = 0

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"quantized experts: format {self.format!r} (want {FORMATS})")
        require_multiple("moe_quant", "k", self.k, GROUP)
        require_aligned("moe_quant", "codes", self.codes, 16)
        if self.format == "fp8":
            if self.smap is None:
                raise ValueError("FP8 experts need their scale map")
            if self.smap.col_stride and self.smap.col_shift < 4:
                raise ValueError("FP8 expert scale blocks must span at least 16 columns")
        elif not self.row_scales:
            raise ValueError("NVFP4 experts need their per-row global scales")

    @property
    def n(self) -> int:
        """Rows of the stacked matrix."""
        return self.experts * self.rows

    @property
    def bf16_bytes(self) -> int:
        """Bytes of the dequantized bf16 matrix (the prefill path's scratch)."""
        return 2 * self.n * self.k

    def scratch_bytes(self, m: int) -> int:
        """The weight-scratch protocol of the dense linears: experts are sized per layer
        pair by `prefill_scratch_bytes`, so each projection asks for nothing alone."""
        return 0

    def _fp8(self) -> Fp8Weight:
        assert self.smap is not None
        return Fp8Weight(self.codes, self.scales, self.n, self.k, self.smap)

    def map_args(self) -> tuple[int, ...]:
        return self._fp8().map_args if self.format == "fp8" else ()

    def weight_args(self) -> tuple[int, ...]:
        """Kernel arguments after the input pointer: codes, scales(, row scales)."""
        if self.format == "fp8":
            return (self.codes, self.scales)
        return (self.codes, self.scales, self.row_scales)

    def dequant(self, kc: KernelCache, stream: Stream, out: DevicePtr) -> None:
        """out bf16 [experts * rows, k] = the dequantized weights (the dense linears'
        dequantize values: bf16(code * f32 scale))."""
        if self.format == "fp8":
            dequant_fp8(kc, stream, self._fp8(), out)
            return
        groups = self.n * (self.k // GROUP)
        kc.get(MOE_DEQUANT_NVFP4)(stream, -(-groups // THREADS), THREADS, 0, self.codes,
                                  self.scales, self.row_scales, out, self.n, self.k)


def folds_shared(shape: MoeShape) -> bool:
    """Whether the layer's shared expert is one more expert of the stacked matrices (the
    loader folds it in when it is as wide as a routed expert and stored alike): its one
    decode slot then runs in the same two launches."""
    return shape.shared_inter > 0


def check_pair(gate_up: QuantExperts, down: QuantExperts, shape: MoeShape) -> None:
    """The two projections agree with the layer's shape and with each other."""
    if gate_up.format != down.format:
        raise ValueError(f"quantized experts: gate_up is {gate_up.format}, down "
                         f"{down.format}")
    if folds_shared(shape) and shape.shared_inter != shape.inter:
        raise ValueError(f"quantized experts: a folded shared expert must be {shape.inter} "
                         f"wide, not {shape.shared_inter}")
    e = shape.experts + (1 if folds_shared(shape) else 0)
    want = ((e, 2 * shape.inter, shape.hidden), (e, shape.hidden, shape.inter))
    got = ((gate_up.experts, gate_up.rows, gate_up.k), (down.experts, down.rows, down.k))
    if got != want:
        raise ValueError(f"quantized experts {got} do not match the layer's {want}")


def prefill_scratch_bytes(gate_up: QuantExperts, down: QuantExperts) -> int:
    """The bf16 scratch a prefill chunk dequantizes both projections into (256-aligned)."""
    return -(-gate_up.bf16_bytes // 256) * 256 + down.bf16_bytes


def down_early(kc: KernelCache, fp8: bool) -> bool:
    """Whether a decode down launch takes its early twin (moe_down_sum_early_*): as
    ATLAS_MOE_QUANT_DOWN_EARLY forces it, else for NVFP4 experts only (ops/routes.py gives the
    measurements: NVFP4 5% faster a step, FP8 1.5% slower)."""
    forced = kc.routes.moe_quant_down_early
    return (not fp8) if forced is None else forced


def decode_experts(kc: KernelCache, stream: Stream, x: DevicePtr, gate_up: QuantExperts,
                   down: QuantExperts, topk_ids: DevicePtr, topk_weights: DevicePtr,
                   act: DevicePtr, out: DevicePtr, tokens: int, shape: MoeShape) -> None:
    """out bf16 [tokens, hidden] = the experts' weighted sum for a decode batch, through act
    bf16 [tokens, slots, inter]; topk rows of shape.slots (the routed top_k, then with
    shape.shared_inter the folded shared expert's slot, as `ops.moe.gate_topk` writes it).
    The down launch runs its early twin where `down_early` says (NVFP4 experts by default),
    which reads topk_ids / topk_weights before its PDL wait, so the gate/up launch here must
    stay the one right before it and their writer at least one launch earlier."""
    shape.validate()
    check_pair(gate_up, down, shape)
    if not 1 <= tokens <= DECODE_MAX_TOKENS:
        raise ValueError(f"moe_quant: {tokens} tokens (decode kernels take 1.."
                         f"{DECODE_MAX_TOKENS})")
    for name, ptr in (("x", x), ("act", act)):
        require_aligned("moe_quant", name, ptr, 16)
    fp8, slots = gate_up.format == "fp8", shape.slots
    sig = MOE_GATE_UP_SILU_FP8 if fp8 else MOE_GATE_UP_SILU_NVFP4
    kc.get(sig)(stream, (-(-shape.inter // WARPS), tokens * slots, 1), THREADS, 0, x,
                *gate_up.weight_args(), topk_ids, act, tokens, slots, shape.hidden,
                shape.inter, gate_up.experts, *gate_up.map_args())
    # the early twins read the routing before their PDL wait: sound because the router
    # launch is two back and gate/up (just above) waits before it lets this launch start
    if down_early(kc, fp8):
        sig = MOE_DOWN_SUM_EARLY_FP8 if fp8 else MOE_DOWN_SUM_EARLY_NVFP4
    else:
        sig = MOE_DOWN_SUM_FP8 if fp8 else MOE_DOWN_SUM_NVFP4
    kc.get(sig)(stream, (-(-shape.hidden // WARPS), tokens, 1), THREADS, 0, act,
                *down.weight_args(), topk_ids, topk_weights, out, tokens, slots, shape.top_k,
                shape.hidden, shape.inter, down.experts, *down.map_args())
