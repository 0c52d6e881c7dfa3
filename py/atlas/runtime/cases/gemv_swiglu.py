"""Check cases for batch 1's gate_up GEMV that ends with its SwiGLU (gemv_swiglu_bf16_single):
act = swiglu(x @ [gate | up].T). Each runs its unfused twin, the plain GEMV into gate_up and
then silu_mul, into `act_unfused`: the fused kernel is specified as that pair
(reference/gemv.py), so the two must hold the same bits on every backend (where silu_mul
takes I: I % 8 == 0). Selected by `check_kernels.py -k "gemv swiglu"`."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, activation, matmul
from .gemv import UNFUSED, geglu_oracle, swiglu_oracle


def _grid_bf16(rng: np.random.Generator, shape: tuple[int, ...], lo: int, hi: int,
               step: float) -> np.ndarray:
    """bf16 bits of random integers lo..hi times `step` (a power of two): exact in bf16."""
    return f32_to_bf16_bits((rng.integers(lo, hi + 1, shape) * step).astype(np.float32))


def gemv_swiglu_case(rng: np.random.Generator, inter: int, k: int, rows: int = 4,
                     gelu: bool = False) -> KernelCase:
    """act [1, inter] = swiglu(x @ w.T) for the [gate | up] weight w [2 inter, k] in blocks of
    `rows` weight rows (routes.gemv_swiglu_rows: 8 runs gemv_swiglu_bf16_x8_single, or its
    register-capped `_x8n_` twin where a block has under 256 threads, k <= 3,584: every x8
    shape below but k 4,104); its unfused twin (the 4-row GEMV, then silu_mul) into
    `act_unfused` where silu_mul takes inter.

    Every gate and up value is exact in f32 whatever the order of its sums (the products
    x w of multiples of powers of two fit 24 bits with their sum), so the kernels round
    the very values the reference does: the SiLU turns a one-ulp difference of a gate into
    several ulps of act, which an f32-order difference would bring to ~1e-4 of the outputs.
    The gates spread over the SiLU's curved range (standard deviation ~1.5 to 2.5). `gelu`:
    gemv_geglu_bf16_single, its twin ending with gelu_tanh_mul."""
    n = 2 * inter
    w_step = 2.0 ** -round(np.log2(2.0 * np.sqrt(k)))
    inputs = {"w": _grid_bf16(rng, (n, k), -8, 8, w_step),
              "x": _grid_bf16(rng, (1, k), -8, 8, 2.0 ** -3)}
    outputs = {"act": OutputSpec(DType.BF16, (1, inter))}
    twin = inter % 8 == 0
    same_bits = []
    if twin:
        inputs["gate_up"] = np.zeros((1, n), np.uint16)
        outputs["act" + UNFUSED] = OutputSpec(DType.BF16, (1, inter))
        same_bits.append(("act", "act" + UNFUSED))

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        fused = KernelCache(backend, routes=replace(kc.routes, gemv_swiglu_rows=rows))
        matmul.gemv_swiglu(fused, stream, p["x"], p["w"], p["act"], 1, n, k, gelu)
        if twin:
            matmul.gemv(kc, stream, p["x"], p["w"], p["gate_up"], 1, n, k, single=True)
            act = activation.gelu_tanh_mul if gelu else activation.silu_mul
            act(kc, stream, p["gate_up"], p["act" + UNFUSED], 1, inter)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        xs = bf16_bits_to_f32(x["x"]).astype(np.float64)
        gate_up = f32_to_bf16_bits((xs @ bf16_bits_to_f32(x["w"]).astype(np.float64).T)
                                   .astype(np.float32))
        act = geglu_oracle(gate_up) if gelu else swiglu_oracle(gate_up)
        return {"act": act, "act" + UNFUSED: act}

    name = "geglu" if gelu else "swiglu"
    return KernelCase(f"gemv {name}{' x8' if rows == 8 else ''} i{inter} k{k}", "gemv", inputs,
                      outputs, run, oracle,
                      same_bits=tuple(same_bits))


#: (inter, k): Qwen3-0.6B's gate_up (k = 1,024: 128 threads, one chunk each), a Qwen3-1.7B
#: slice (k = 2,048), a Qwen3-8B slice (k = 4,096: 2 chunks a thread, the block's whole
#: 4,096-value stride), k = 4,104 (513 chunks: past the stride by one chunk, which only
#: thread 0 loads), SmolLM2's k = 576 (72 chunks, a partial warp) with an odd I (the last
#: block's second feature past the end), the smallest row (k = 8) with I = 3
GEMV_SWIGLU_SHAPES = [(3072, 1024), (1536, 2048), (1536, 4096), (40, 4104), (1001, 576),
                      (3, 8)]
#: ... in 8-row blocks (4 features a block): Qwen3-1.7B's k, the stride plus one chunk, an I
#: that leaves the last block three features past it, the smallest row
GEMV_SWIGLU_X8_SHAPES = [(1536, 2048), (40, 4104), (1001, 576), (3, 8)]


@kernel_cases("gemv")
def gemv_swiglu_cases(rng: np.random.Generator) -> list[KernelCase]:
    return ([gemv_swiglu_case(rng, inter, k) for inter, k in GEMV_SWIGLU_SHAPES]
            + [gemv_swiglu_case(rng, inter, k, rows=8) for inter, k in GEMV_SWIGLU_X8_SHAPES]
            # Gemma 3's GELU GLU: its 1B's k (1,152: 144 chunks), and the odd-I and k-8 rows
            + [gemv_swiglu_case(rng, inter, k, gelu=True)
               for inter, k in ((6912, 1152), (1001, 576), (3, 8))])
