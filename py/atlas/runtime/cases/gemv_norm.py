"""Check cases for the residual add + RMSNorm fused into the single-row GEMV
(gemv_add_rmsnorm_bf16_single), each with its unfused twin (add_rmsnorm, then the GEMV), and
for the residual stream carried by the GEMVs (gemv_residual -> gemv_rmsnorm)."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul, norm
from .gemv import random_bf16, swiglu_oracle
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


# ---- the residual stream carried by the GEMVs (gemv_residual -> gemv_rmsnorm) ------------
def carried_norm_case(rng: np.random.Generator, name: str, hidden: int, k_in: int, n_out: int,
                      silu: bool, offset: bool, graph: bool = False) -> KernelCase:
    """A sublayer's end and the next norm's projection, as batch-1 decode runs them:
    resid += (swiglu(gate_up) if `silu` else x) @ w_in.T in place with its partial sums of
    squares (`gemv_residual`), then y = RMSNorm(resid) * norm_w @ w_out.T from those partials
    (`gemv_rmsnorm`). ssq is the kernels' private handoff: checked through y, not compared
    (its f32 partials move by a bf16 ulp of resid wherever a rounding of the sum flips).
    Such a flip moves y by ~1e-4 wherever it happens, which the bf16-ulp comparison with the
    reference would count against a y near 0: the residual row (2..6) and w_out (>= 0) are
    positive, so every y is ~sqrt(hidden) and the comparison tests the handoff, not the
    reference's accumulation order (gemv_rmsnorm alone, below, has y of both signs)."""
    w_norm = rng.normal(0.0, 0.1, hidden) if offset else rng.uniform(0.5, 1.5, hidden)
    x_name = "gate_up" if silu else "x"
    inputs = {x_name: random_bf16(rng, (1, 2 * k_in if silu else k_in), 4.0 if silu else 1.0),
              "w_in": random_bf16(rng, (hidden, k_in), k_in ** -0.5),
              "resid": f32_to_bf16_bits(rng.uniform(2.0, 6.0, (1, hidden)).astype(np.float32)),
              "ssq": np.zeros(matmul.ssq_partials(hidden), np.float32),
              "norm_w": f32_to_bf16_bits(w_norm.astype(np.float32)),
              "w_out": f32_to_bf16_bits(rng.uniform(0.0, 2 * hidden ** -0.5, (n_out, hidden))
                                        .astype(np.float32))}
    outputs = {"resid": OutputSpec(DType.BF16, (1, hidden)),
               "y": OutputSpec(DType.BF16, (1, n_out))}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        matmul.gemv_residual(kc, stream, p[x_name], p["w_in"], p["resid"], p["ssq"], hidden,
                             k_in, silu=silu)
        matmul.gemv_rmsnorm(kc, stream, p["resid"], p["ssq"], p["norm_w"], p["w_out"], p["y"],
                            n_out, hidden, NORM_EPS, offset)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        act = (swiglu_oracle(x["gate_up"]) if silu
               else bf16_bits_to_f32(x["x"]).astype(np.float64))
        out = round_bf16((act @ bf16_bits_to_f32(x["w_in"]).astype(np.float64).T)
                         .astype(np.float32))
        h = round_bf16(bf16_bits_to_f32(x["resid"]) + out).astype(np.float64)
        g = bf16_bits_to_f32(x["norm_w"]).astype(np.float64)
        normed = (offset_normed_f64 if offset else normed_f64)(h, g, NORM_EPS)
        return {"resid": h, "y": normed @ bf16_bits_to_f32(x["w_out"]).astype(np.float64).T}

    return KernelCase(name, "gemv", inputs, outputs, run, oracle, graph=graph)


#: (hidden, k_in, n_out, silu, offset): Qwen3-0.6B o_proj -> gate_up and down -> qkv,
#: Qwen3-8B o_proj -> gate_up (2 chunks a thread), ragged hidden (a partial last block of
#: rows and of partials) with a partial warp, the (1 + w) norm, a tiny row (one warp)
CARRIED_SHAPES = [(1024, 2048, 6144, False, False), (1024, 3072, 4096, True, False),
                  (4096, 4096, 2048, False, False), (1000, 576, 515, True, False),
                  (2048, 512, 130, False, True), (8, 64, 33, True, False)]


@kernel_cases("gemv")
def carried_residual_cases(rng: np.random.Generator) -> list[KernelCase]:
    # the first (Qwen3-0.6B) also replays in the device check's graph capture
    return [carried_norm_case(rng, f"gemv_residual{' silu' if silu else ''} h{h} k{k} -> "
                              f"gemv_rmsnorm n{n}{' offset' if off else ''}", h, k, n, silu,
                              off, graph=i == 0)
            for i, (h, k, n, silu, off) in enumerate(CARRIED_SHAPES)]


def ssq_norm_case(rng: np.random.Generator, n: int, k: int) -> KernelCase:
    """gemv_rmsnorm alone, its partial sums of squares given (float64 sums rounded to f32)."""
    resid = random_bf16(rng, (1, k), 4.0)
    sq = np.zeros(matmul.ssq_partials(k) * matmul.GEMV_ROWS_PER_BLOCK)
    sq[:k] = bf16_bits_to_f32(resid).astype(np.float64).reshape(-1) ** 2
    inputs = {"resid": resid,
              "ssq": sq.reshape(-1, matmul.GEMV_ROWS_PER_BLOCK).sum(axis=1).astype(np.float32),
              "norm_w": f32_to_bf16_bits(rng.uniform(0.5, 1.5, k).astype(np.float32)),
              "w": random_bf16(rng, (n, k), k ** -0.5)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        matmul.gemv_rmsnorm(KernelCache(backend), stream, p["resid"], p["ssq"], p["norm_w"],
                            p["w"], p["y"], n, k, NORM_EPS)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        h = bf16_bits_to_f32(x["resid"]).astype(np.float64)
        normed = normed_f64(h, bf16_bits_to_f32(x["norm_w"]).astype(np.float64), NORM_EPS)
        return {"y": normed @ bf16_bits_to_f32(x["w"]).astype(np.float64).T}

    return KernelCase(f"gemv_rmsnorm n{n} k{k}", "gemv", inputs,
                      {"y": OutputSpec(DType.BF16, (1, n))}, run, oracle)


@kernel_cases("gemv")
def gemv_rmsnorm_cases(rng: np.random.Generator) -> list[KernelCase]:
    # a 12288-wide row: 6 chunks a thread, past the add+norm GEMV's shared-memory limit
    return [ssq_norm_case(rng, n, k) for n, k in [(4096, 1024), (65, 12288), (9, 4104)]]
