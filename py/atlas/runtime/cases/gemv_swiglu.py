"""Check cases for batch 1's gate_up GEMV that ends with its SwiGLU (gemv_swiglu_bf16_single
and its fused-norm forms gemv_rmsnorm_swiglu / gemv_add_rmsnorm_swiglu): act = swiglu(x @
[gate | up].T) with the plain, the partial-sums (SsqNormX) and the add + norm (NormX) x
loads. Each runs its unfused twin, the same x load's plain GEMV into gate_up and then
silu_mul, into `act_unfused`: the fused kernel is specified as that pair (reference/gemv.py),
so the two must hold the same bits on every backend (where silu_mul takes I: I % 8 == 0).
Selected by `check_kernels.py -k "gemv swiglu"`."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, activation, matmul
from .gemv import UNFUSED, swiglu_oracle
from .gemv_norm import NORM_EPS
from .rmsnorm import normed_f64, offset_normed_f64

#: the x load of a case: "plain" (gemv_swiglu), "ssq" (gemv_rmsnorm: the norm from the
#: residual epilogue's partial sums of squares), "add" / "norm" (gemv_add_rmsnorm with /
#: without the residual add)
X_LOADS = ("plain", "ssq", "add", "norm")
#: magnitude of every residual value: mean(h^2) is exact in any order and h * 1/rms rounds
#: to exactly +-1 in bf16 whatever the 1/rms's last bits (rsqrtf on the GPU, 1/sqrt here)
RESID = 2.0


def _grid_bf16(rng: np.random.Generator, shape: tuple[int, ...], lo: int, hi: int,
               step: float) -> np.ndarray:
    """bf16 bits of random integers lo..hi times `step` (a power of two): exact in bf16."""
    return f32_to_bf16_bits((rng.integers(lo, hi + 1, shape) * step).astype(np.float32))


def _norm_inputs(rng: np.random.Generator, k: int, add: bool,
                 offset: bool) -> dict[str, np.ndarray]:
    """A residual row h of +-RESID (as resid + delta with `add`: both multiples of RESID / 8),
    the norm's weight (multiples of 1/8 in 0.5..1.5, or with `offset` zero-centred multiples
    of 1/128 so that 1 + w is a bf16 value) and h's partial sums of squares as gemv_residual
    leaves them. The normed row is then exactly +-w (+-(1 + w)) in every implementation."""
    h = RESID * rng.choice([-1.0, 1.0], (1, k))
    inputs = {"norm_w": (_grid_bf16(rng, (1, k), -32, 32, 2.0 ** -7) if offset
                         else _grid_bf16(rng, (1, k), 4, 12, 2.0 ** -3)),
              "ssq": np.full(matmul.ssq_partials(k), matmul.GEMV_ROWS_PER_BLOCK * RESID ** 2,
                             np.float32)}
    if add:
        part = h * rng.integers(0, 9, (1, k)) / 8
        inputs["resid"] = f32_to_bf16_bits(part.astype(np.float32))
        inputs["delta"] = f32_to_bf16_bits((h - part).astype(np.float32))
    else:
        inputs["resid"] = f32_to_bf16_bits(h.astype(np.float32))
    return inputs


def _x_oracle(x: dict[str, np.ndarray], x_load: str, offset: bool) -> np.ndarray:
    """float64 [1, k] the product reads: x, or the norm of (resid + delta) rounded to bf16
    as the kernels store it."""
    if x_load == "plain":
        return bf16_bits_to_f32(x["x"]).astype(np.float64)
    h = bf16_bits_to_f32(x["resid"]).astype(np.float64)
    if x_load == "add":
        h = round_bf16((h + bf16_bits_to_f32(x["delta"])).astype(np.float32)).astype(np.float64)
    g = bf16_bits_to_f32(x["norm_w"]).astype(np.float64)
    normed = (offset_normed_f64 if offset else normed_f64)(h, g, NORM_EPS)
    return round_bf16(normed.astype(np.float32)).astype(np.float64)


def gemv_swiglu_case(rng: np.random.Generator, inter: int, k: int, x_load: str = "plain",
                     offset: bool = False) -> KernelCase:
    """act [1, inter] = swiglu(x @ w.T) for the [gate | up] weight w [2 inter, k], through the
    entry `x_load` names; its unfused twin into `act_unfused` where silu_mul takes inter.
    The "add" form also stores bf16(resid + delta) into resid_out (the twin's: resid_twin).

    Every gate and up value is exact in f32 whatever the order of its sums (the products
    x w of multiples of powers of two fit 24 bits with their sum), so the kernels round
    the very values the reference does: the SiLU turns a one-ulp difference of a gate into
    several ulps of act, which an f32-order difference would bring to ~1e-4 of the outputs.
    The gates spread over the SiLU's curved range (standard deviation ~1.5 to 2.5)."""
    n = 2 * inter
    w_step = 2.0 ** -round(np.log2(2.0 * np.sqrt(k)))
    inputs = {"w": _grid_bf16(rng, (n, k), -8, 8, w_step)}
    outputs = {"act": OutputSpec(DType.BF16, (1, inter))}
    add, twin = x_load == "add", inter % 8 == 0
    if x_load == "plain":
        inputs["x"] = _grid_bf16(rng, (1, k), -8, 8, 2.0 ** -3)
    else:
        inputs.update(_norm_inputs(rng, k, add, offset))
    resids = ["resid_out", "resid_twin"][:1 + twin] if add else []
    for out in resids:  # bf16(r + d) is fully determined
        outputs[out] = OutputSpec(DType.BF16, (1, k), tol=(0.0, 0.0))
    same_bits = [tuple(resids)] if len(resids) == 2 else []
    if twin:
        inputs["gate_up"] = np.zeros((1, n), np.uint16)
        outputs["act" + UNFUSED] = OutputSpec(DType.BF16, (1, inter))
        same_bits.append(("act", "act" + UNFUSED))

    def product(kc: KernelCache, stream: Stream, p: dict[str, DevicePtr], out: DevicePtr,
                resid_out: DevicePtr, swiglu: bool) -> None:
        """The case's x load into `out`: act (`swiglu`) or the twin's gate_up."""
        if x_load == "plain":
            if swiglu:
                matmul.gemv_swiglu(kc, stream, p["x"], p["w"], out, 1, n, k)
            else:
                matmul.gemv(kc, stream, p["x"], p["w"], out, 1, n, k, single=True)
        elif x_load == "ssq":
            matmul.gemv_rmsnorm(kc, stream, p["resid"], p["ssq"], p["norm_w"], p["w"], out, n,
                                k, NORM_EPS, offset, swiglu=swiglu)
        else:
            matmul.gemv_add_rmsnorm(kc, stream, p["resid"], p["delta"] if x_load == "add" else 0,
                                    p["norm_w"], resid_out, p["w"], out, n, k, NORM_EPS, offset,
                                    swiglu=swiglu)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        product(kc, stream, p, p["act"], p["resid_out"] if add else 0, True)
        if twin:
            product(kc, stream, p, p["gate_up"], p["resid_twin"] if add else 0, False)
            activation.silu_mul(kc, stream, p["gate_up"], p["act" + UNFUSED], 1, inter)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        xs = _x_oracle(x, x_load, offset)
        gate_up = f32_to_bf16_bits((xs @ bf16_bits_to_f32(x["w"]).astype(np.float64).T)
                                   .astype(np.float32))
        act = swiglu_oracle(gate_up)
        out = {"act": act, "act" + UNFUSED: act}
        if add:
            h = round_bf16(bf16_bits_to_f32(x["resid"]) + bf16_bits_to_f32(x["delta"]))
            out.update(resid_out=h, resid_twin=h)
        return out

    form = {"plain": "", "ssq": " rmsnorm", "add": " add_rmsnorm",
            "norm": " add_rmsnorm no-add"}[x_load]
    return KernelCase(f"gemv swiglu{form} i{inter} k{k}{' offset' if offset else ''}", "gemv",
                      inputs, outputs, run, oracle, same_bits=tuple(same_bits))


#: (inter, k, x_load, offset): Qwen3-0.6B's gate_up (k = 1,024: 128 threads, one chunk
#: each), a Qwen3-1.7B slice (k = 2,048), a Qwen3-8B slice (k = 4,096: 2 chunks a thread, the
#: block's whole 4,096-value stride), k = 4,104 (513 chunks: past the stride by one chunk,
#: which only thread 0 loads), SmolLM2's k = 576 (72 chunks, a partial warp) with an odd I
#: (the last block's second feature past the end), the smallest row (k = 8) with I = 3,
#: then each fused-norm form with an odd I and the (1 + w) norm of hybrid families
GEMV_SWIGLU_SHAPES = [
    (3072, 1024, "plain", False), (1536, 2048, "plain", False),
    (1536, 4096, "plain", False), (40, 4104, "plain", False),
    (1001, 576, "plain", False), (3, 8, "plain", False),
    (3072, 1024, "ssq", False), (1536, 4096, "ssq", False),
    (77, 4104, "ssq", True), (65, 2048, "ssq", False),
    (3072, 1024, "add", False), (1536, 4096, "add", False),
    (257, 2048, "add", True), (64, 2048, "norm", False), (33, 576, "norm", True),
]


@kernel_cases("gemv")
def gemv_swiglu_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [gemv_swiglu_case(rng, inter, k, x_load, offset)
            for inter, k, x_load, offset in GEMV_SWIGLU_SHAPES]
