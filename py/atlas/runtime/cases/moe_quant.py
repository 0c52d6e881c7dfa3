"""Check cases for the quantized-expert decode kernels (moe_decode_quant.cu) and the NVFP4
expert dequantize of the prefill path.

The oracle is cases/moe.py's float64 per-token loops (`oracle_experts`, written
independently of reference/moe.py) over the exact dequantized weights
(`core.quant.dequantize_fp8` / `dequantize_nvfp4`): random codes over every E4M3 / E2M1
value (subnormal scales included), FP8 block, per-channel and per-tensor scale maps over
the stacked [experts * rows, k] matrix, a distinct NVFP4 global scale per expert, batches
1..8, ids outside [0, experts) (nothing in the sum), k = 16 (one group), k not a multiple
of 32, a shared expert folded in as one more expert (its slot after the routed ones,
transformers' rounding of its gated sum), a few cases also in a CUDA graph, and
Qwen3-30B-A3B / Qwen3.5-35B-A3B's expert widths; the same for the early down entries
(moe_down_sum_early_*, ATLAS_MOE_QUANT_DOWN_EARLY), names ending "(down early)".
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...core.dtype import DType
from ...core.quant import Fp8ScaleMap, dequantize_fp8, dequantize_nvfp4
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, moe
from ..ops.moe_quant import QuantExperts, decode_experts
from ..ops.routes import KernelRoutes
from .gemv import random_bf16
from .gemv_fp8 import random_fp8
from .gemv_nvfp4 import random_nvfp4
from .moe import ACT_REFERENCE_TOL, _bf16, _f64, _routing_weights, oracle_experts, oracle_shared


def _random_experts(rng: np.random.Generator, fmt: str, n: int, k: int, experts: int,
                    layout: str, tag: str) -> tuple[dict[str, np.ndarray], np.ndarray,
                                                    Fp8ScaleMap | None]:
    """(inputs named `tag`_*, float64 dequantized [n, k], FP8 map) of a stacked matrix."""
    if fmt == "fp8":
        codes, scales, smap = random_fp8(rng, n, k, layout)
        return ({f"{tag}_w": codes, f"{tag}_s": scales.reshape(-1)},
                dequantize_fp8(codes, scales, smap), smap)
    packed, s_codes, row = random_nvfp4(rng, n, k, parts=experts)
    return ({f"{tag}_w": packed, f"{tag}_s": s_codes, f"{tag}_g": row},
            dequantize_nvfp4(packed, s_codes, row), None)


def _experts(fmt: str, p: dict[str, DevicePtr], tag: str, experts: int, rows: int, k: int,
             smap: Fp8ScaleMap | None) -> QuantExperts:
    return QuantExperts(fmt, p[f"{tag}_w"], p[f"{tag}_s"], experts, rows, k, smap,
                        p.get(f"{tag}_g", 0))


def decode_quant_case(rng: np.random.Generator, fmt: str, shape: moe.MoeShape,
                      ids: np.ndarray, layout: str = "block", early: bool | None = None,
                      graph: bool = False) -> KernelCase:
    """moe_gate_up_silu_<fmt> then moe_down_sum_<fmt>; act checked on its own too. With
    shape.shared_inter, a shared expert folded in as expert shape.experts of the stacked
    matrices, its slot last (ids / weights as the decode router writes them). `early` True /
    False: the down launch on moe_down_sum_early_<fmt> (ATLAS_MOE_QUANT_DOWN_EARLY=1) / on the
    plain entry, whatever the environment says (None: as it says). `graph`: also captured
    into the GPU check's CUDA graph."""
    tokens, k, h, i = len(ids), shape.top_k, shape.hidden, shape.inter
    e = shape.experts + (1 if shape.shared_inter else 0)
    gu_in, gu_f, gu_map = _random_experts(rng, fmt, e * 2 * i, h, e, layout, "gu")
    d_in, d_f, d_map = _random_experts(rng, fmt, e * h, i, e, layout, "d")
    inputs = {"x": random_bf16(rng, (tokens, h)), "topk_ids": ids.astype(np.int32),
              "topk_weights": _routing_weights(rng, tokens, k)} | gu_in | d_in
    if shape.shared_inter:
        gate = _bf16(1.0 / (1.0 + np.exp(-2.0 * rng.standard_normal(tokens))))
        inputs["topk_ids"] = np.concatenate([ids, np.full((tokens, 1), shape.experts)],
                                            axis=1).astype(np.int32)
        inputs["topk_weights"] = np.concatenate([inputs["topk_weights"], gate[:, None]],
                                                axis=1).astype(np.float32)
    outputs = {"act": OutputSpec(DType.BF16, (tokens, shape.slots, i)),
               "out": OutputSpec(DType.BF16, (tokens, h))}
    w_gu, w_d = gu_f.reshape(e, 2 * i, h), d_f.reshape(e, h, i)
    routes = (None if early is None
              else replace(KernelRoutes.from_env(), moe_quant_down_early=early))

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        decode_experts(KernelCache(backend, routes), stream, p["x"],
                       _experts(fmt, p, "gu", e, 2 * i, h, gu_map),
                       _experts(fmt, p, "d", e, h, i, d_map), p["topk_ids"], p["topk_weights"],
                       p["act"], p["out"], tokens, shape)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        xs = _f64(x["x"])
        r = oracle_experts(xs, w_gu, w_d, x["topk_ids"][:, :k], x["topk_weights"][:, :k])
        if shape.shared_inter:
            sh = oracle_shared(xs, w_gu[-1], w_d[-1], x["topk_weights"][:, k], r["out"], i)
            r = {"act": np.concatenate([r["act"], sh["act"]], axis=1), "out": sh["out"]}
        return {"act": r["act"], "out": r["out"]}

    name = (f"moe_decode_quant {fmt}{' ' + layout if fmt == 'fp8' else ''} t{tokens} "
            f"e{shape.experts}{'+shared' if shape.shared_inter else ''} k{k} h{h} i{i}"
            f"{' (down early)' if early else ''}")
    return KernelCase(name, "moe_decode_quant", inputs, outputs, run, oracle,
                      reference_abs_tol=ACT_REFERENCE_TOL, graph=graph)


def dequant_nvfp4_case(rng: np.random.Generator, n: int, k: int) -> KernelCase:
    packed, s_codes, row = random_nvfp4(rng, n, k, parts=4)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        QuantExperts("nvfp4", p["w"], p["s"], 4, n // 4, k, row_scales=p["g"]).dequant(
            KernelCache(backend), stream, p["out"])

    def oracle(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"out": dequantize_nvfp4(v["w"], v["s"], v["g"])}

    return KernelCase(f"moe_dequant_nvfp4 n{n} k{k}", "moe_decode_quant",
                      {"w": packed, "s": s_codes, "g": row},
                      {"out": OutputSpec(DType.BF16, (n, k))}, run, oracle)


def _ids(rng: np.random.Generator, tokens: int, experts: int, top_k: int) -> np.ndarray:
    return np.stack([rng.permutation(experts)[:top_k] for _ in range(tokens)]).astype(np.int32)


@kernel_cases("moe_decode_quant")
def moe_decode_quant_cases(rng: np.random.Generator) -> list[KernelCase]:
    small = moe.MoeShape(16, 4, 256, 96)
    odd = moe.MoeShape(6, 2, 144, 48)  # k = 144 / 48: 16-value groups, not 32-value chunks
    invalid = _ids(rng, 3, 16, 4)
    invalid[0, 1], invalid[2, 3] = -1, 16  # expert parallelism's "not mine": no contribution
    cases = []
    for fmt in ("fp8", "nvfp4"):
        cases += [decode_quant_case(rng, fmt, small, _ids(rng, 1, 16, 4)),
                  decode_quant_case(rng, fmt, small, _ids(rng, 8, 16, 4)),
                  decode_quant_case(rng, fmt, small, invalid),
                  decode_quant_case(rng, fmt, odd, _ids(rng, 5, 6, 2)),
                  decode_quant_case(rng, fmt, moe.MoeShape(4, 4, 16, 16), _ids(rng, 2, 4, 4)),
                  # Qwen3-30B-A3B's (top-8, 2048 -> 768) and Qwen3.5-35B-A3B's (top-8,
                  # 2048 -> 512) expert shapes at batch 1 and 3, with fewer experts (the
                  # kernels index experts by pointer arithmetic alone)
                  decode_quant_case(rng, fmt, moe.MoeShape(8, 8, 2048, 768),
                                    _ids(rng, 1, 8, 8)),
                  decode_quant_case(rng, fmt, moe.MoeShape(12, 8, 2048, 512, 512),
                                    _ids(rng, 3, 12, 8)),
                  # a shared expert folded in as one more expert (Qwen3.5-MoE, Qwen3-Next)
                  decode_quant_case(rng, fmt, moe.MoeShape(16, 4, 256, 96, 96),
                                    _ids(rng, 6, 16, 4))]
        # also captured into the GPU check's CUDA graph: a folded shared expert, and
        # Qwen3.5-35B-A3B's shape at batch 1
        cases += [decode_quant_case(rng, fmt, moe.MoeShape(16, 4, 256, 96, 96),
                                    _ids(rng, 2, 16, 4), graph=True),
                  decode_quant_case(rng, fmt, moe.MoeShape(12, 8, 2048, 512, 512),
                                    _ids(rng, 1, 12, 8), graph=True)]
    cases += [decode_quant_case(rng, "fp8", small, _ids(rng, 2, 16, 4), "channel"),
              decode_quant_case(rng, "fp8", odd, _ids(rng, 4, 6, 2), "tensor"),
              dequant_nvfp4_case(rng, 384, 48), dequant_nvfp4_case(rng, 64, 2048)]
    # the early down entries (ATLAS_MOE_QUANT_DOWN_EARLY=1: routing read and first weights
    # requested before the PDL wait; `-k "down early"`): a folded shared expert, invalid ids,
    # more slots than a pass takes (9: a second pass after the early one), Qwen3.5-35B-A3B's
    # shape at batch 1 (the route's target; also in the graph) and batch 3
    for fmt in ("fp8", "nvfp4"):
        cases += [decode_quant_case(rng, fmt, small, _ids(rng, 1, 16, 4), early=True),
                  decode_quant_case(rng, fmt, small, invalid, early=True),
                  decode_quant_case(rng, fmt, odd, _ids(rng, 5, 6, 2), early=True),
                  decode_quant_case(rng, fmt, moe.MoeShape(16, 4, 256, 96, 96),
                                    _ids(rng, 6, 16, 4), early=True),
                  decode_quant_case(rng, fmt, moe.MoeShape(12, 8, 2048, 512, 512),
                                    _ids(rng, 3, 12, 8), early=True),
                  decode_quant_case(rng, fmt, moe.MoeShape(16, 4, 256, 96, 96),
                                    _ids(rng, 2, 16, 4), early=True, graph=True),
                  decode_quant_case(rng, fmt, moe.MoeShape(12, 8, 2048, 512, 512),
                                    _ids(rng, 1, 12, 8), early=True, graph=True)]
    cases += [decode_quant_case(rng, "fp8", odd, _ids(rng, 4, 6, 2), "tensor", early=True)]
    return cases
