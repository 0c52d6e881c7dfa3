"""Check cases for the residual add + RMSNorm fused into the single-row GEMV
(gemv_add_rmsnorm_bf16_single), each with its unfused twin (add_rmsnorm, then the GEMV)."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul, norm
from .gemv import random_bf16
from .rmsnorm import normed_f64, offset_normed_f64

NORM_EPS = 1e-6


def norm_linear_case(rng: np.random.Generator, name: str, n: int, k: int, add: bool,
                     offset: bool, graph: bool = False) -> KernelCase:
    """y = RMSNorm(bf16(resid + delta)) @ w.T and resid_out = bf16(resid + delta) through
    `gemv_add_rmsnorm` (without `add`: no delta and no resid_out, the first layer's form).
    Runs the unfused twin (add_rmsnorm, then the GEMV) into `y_twin` / `resid_twin`; the
    two sum squares in different orders, so the twin is held to the oracle, not to bits."""
    w_norm = rng.normal(0.0, 0.1, k) if offset else rng.uniform(0.5, 1.5, k)
    inputs = {"resid": random_bf16(rng, (1, k), 4.0),
              "norm_w": f32_to_bf16_bits(w_norm.astype(np.float32)),
              "w": random_bf16(rng, (n, k), k ** -0.5)}
    outputs = {"y": OutputSpec(DType.BF16, (1, n)), "y_twin": OutputSpec(DType.BF16, (1, n))}
    if add:
        inputs["delta"] = random_bf16(rng, (1, k), 1.0)
        inputs["resid_twin"] = inputs["resid"].copy()  # add_rmsnorm adds in place
        for out in ("resid_out", "resid_twin"):  # bf16(r + d) is fully determined
            outputs[out] = OutputSpec(DType.BF16, (1, k), tol=(0.0, 0.0))
    inputs["normed"] = np.zeros((1, k), np.uint16)  # the twin's norm output

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        matmul.gemv_add_rmsnorm(kc, stream, p["resid"], p["delta"] if add else 0, p["norm_w"],
                                p["resid_out"] if add else 0, p["w"], p["y"], n, k, NORM_EPS,
                                offset)
        if add:
            norm.add_rmsnorm(kc, stream, p["resid_twin"], p["delta"], p["norm_w"], p["normed"],
                             1, k, NORM_EPS, offset)
        else:
            norm.rmsnorm(kc, stream, p["resid"], p["norm_w"], p["normed"], 1, k, NORM_EPS,
                         offset)
        matmul.gemv(kc, stream, p["normed"], p["w"], p["y_twin"], 1, n, k)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        h = bf16_bits_to_f32(x["resid"]).astype(np.float64)
        if add:
            h = round_bf16((h + bf16_bits_to_f32(x["delta"])).astype(np.float32))
            h = h.astype(np.float64)
        g = bf16_bits_to_f32(x["norm_w"]).astype(np.float64)
        normed = (offset_normed_f64 if offset else normed_f64)(h, g, NORM_EPS)
        y = normed @ bf16_bits_to_f32(x["w"]).astype(np.float64).T
        return {"y": y, "y_twin": y, "resid_out": h, "resid_twin": h}

    return KernelCase(name, "gemv", inputs, outputs, run, oracle, graph=graph)


#: (n, k, add, offset): Qwen3-0.6B qkv and gate_up, Qwen3-8B qkv (2 chunks a thread), a
#: 20480-wide row (the shared-memory limit: 10 chunks a thread), SmolLM2's 576 (72 chunks,
#: a partial warp), ragged n, the first layer's form, the (1 + w) norm of hybrid families
NORM_GEMV_SHAPES = [(4096, 1024, True, False), (6144, 1024, True, False),
                    (6144, 4096, True, False), (33, 20480, True, False),
                    (961, 576, True, False), (130, 2048, False, False),
                    (515, 2048, True, True), (64, 8, True, False)]


@kernel_cases("gemv")
def gemv_add_rmsnorm_cases(rng: np.random.Generator) -> list[KernelCase]:
    # the first (Qwen3-0.6B qkv) also replays in the device check's graph capture
    return [norm_linear_case(rng, f"gemv_add_rmsnorm n{n} k{k}{'' if add else ' no-add'}"
                             f"{' offset' if off else ''}", n, k, add, off, graph=i == 0)
            for i, (n, k, add, off) in enumerate(NORM_GEMV_SHAPES)]
