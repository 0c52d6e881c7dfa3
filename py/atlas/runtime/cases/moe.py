"""Check cases for the mixture-of-experts kernels (router, decode experts, grouped path).

Every oracle here is written independently of reference/moe.py: per-token Python loops in
float64 (top-k by sorting (-key, index) pairs, sigmoid as 1 / (1 + exp(-x))), so the host
tests compare two formulations and the GPU check compares the kernels with both. Edge cases:
exact ties in router scores (every expert tied, ties at the k-th place), experts with zero
tokens, every token routed to one expert, top_k == experts, ids outside [0, experts) (expert
parallelism's "not mine"), and the Qwen3-30B-A3B / Qwen3.5-35B-A3B shapes that a size leaf
compiles in as constants (cases named "... leaf ..."). gpt-oss's router bias (moe_topk_softmax_
bias_f32: float32 logits plus a bf16 bias, rounded once) and expert epilogue (the epilogue
twins of the decode and grouped entries: gate/up and down biases, the clamped GLU with both
clamps binding on a share of the values) run the same oracles with those steps added
(`Epilogue`, cases named "... gpt-oss ...").
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, bf16_ulp, kernel_cases
from ..ops import KernelCache, moe
from ..ops.routes import KernelRoutes
from .gemv import bf16_values as _f64, glu_flip_slack, random_bf16

#: act comes from two bf16-rounded products: a float32 sum that lands on the other side of a
#: rounding boundary than the exact one moves g or u by an ulp, and act by up to ~1% of its
#: scale; rare, and allowed against the host reference as against the oracle's own tolerance
ACT_REFERENCE_TOL = 2e-2
#: the same flip seen through a down projection (weights ~ inter ** -0.5)
OUT_REFERENCE_TOL = 2e-3


# ---- float64 oracles ----------------------------------------------------------------------
def _bf16(v: np.ndarray | float) -> np.ndarray:
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(v, np.float32))).astype(np.float64)


def oracle_topk(keys: np.ndarray, top_k: int) -> np.ndarray:
    """Per row, the indices of the top_k keys ordered by (-key, index)."""
    return np.array([[i for _, i in sorted((-float(v), i) for i, v in enumerate(row))[:top_k]]
                     for row in keys], dtype=np.int32).reshape(len(keys), top_k)


def oracle_router(logits: np.ndarray, top_k: int, sigmoid: bool, bias: np.ndarray | None,
                  renormalize: bool, scale: float) -> dict[str, np.ndarray]:
    ids = np.zeros((len(logits), top_k), np.int32)
    weights = np.zeros((len(logits), top_k))
    for t, row in enumerate(logits.astype(np.float64)):
        if sigmoid:
            score = 1.0 / (1.0 + np.exp(-row))
            key = score.astype(np.float32) + (0 if bias is None else bias.astype(np.float32))
        else:
            score = np.exp(row - row.max())
            score /= score.sum()
            key = row
        ids[t] = oracle_topk(key[None, :], top_k)[0]
        w = score[ids[t]]
        if renormalize:
            w = w / (w.sum() + 1e-20)
        weights[t] = w * float(np.float32(scale))
    return {"topk_ids": ids, "topk_weights": weights}


@dataclasses.dataclass(frozen=True)
class Epilogue:
    """gpt-oss's expert epilogue of a case (ops.moe.ExpertEpilogue): biases present or not,
    the clamped GLU's alpha and limit (limit 0: the plain SwiGLU)."""

    biases: bool = True
    alpha: float = 1.702
    limit: float = 7.0


def oracle_glu(g: np.ndarray, u: np.ndarray, alpha: float, limit: float) -> np.ndarray:
    """gpt-oss's clamped GLU of bf16-valued g, u in float64 with transformers' bf16 steps:
    min / clamp, then bf16(bf16(u + 1) * bf16(g * bf16(sigmoid(bf16(alpha g)))))."""
    g = _bf16(np.minimum(g, limit))
    u = _bf16(np.clip(u, -limit, limit))
    t = _bf16(g * float(np.float32(alpha)))
    sig = _bf16(1.0 / (1.0 + np.exp(-t)))
    return _bf16(_bf16(u + 1.0) * _bf16(g * sig))


def oracle_slot(x: np.ndarray, w_gate_up: np.ndarray, w_down: np.ndarray,
                epi: Epilogue | None = None, b_gate_up: np.ndarray | None = None,
                b_down: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(act [inter], y [hidden]) of one slot: x [hidden] through one expert, in float64;
    with `epi`, its biases (b_gate_up [2 inter], b_down [hidden]) and GLU."""
    act = oracle_act(_bf16(w_gate_up @ x), epi, b_gate_up)
    y = _bf16(w_down @ act)
    return act, y if b_down is None else _bf16(y + b_down)


def oracle_act(gate_up: np.ndarray, epi: Epilogue | None = None,
               b_gate_up: np.ndarray | None = None) -> np.ndarray:
    """act [..., inter] of bf16-rounded [gate | up] products [..., 2 inter]: the biases (rounded
    once more) and the GLU of `epi`, else SwiGLU."""
    inter = gate_up.shape[-1] // 2
    g = gate_up[..., :inter].astype(np.float32)
    u = gate_up[..., inter:]
    if b_gate_up is not None:
        g = _bf16(g + b_gate_up[:inter]).astype(np.float32)
        u = _bf16(u + b_gate_up[inter:])
    if epi is not None and epi.limit > 0:
        return oracle_glu(g.astype(np.float64), u, epi.alpha, epi.limit)
    with np.errstate(over="ignore"):
        silu = _bf16(g / (np.float32(1) + np.exp(-g)))
    return _bf16(silu * u)


def act_flip_slack(x: np.ndarray, w_gate_up: np.ndarray, ids: np.ndarray,
                   epi: Epilogue | None, b_gate_up: np.ndarray | None) -> np.ndarray:
    """act's per-slot slack [slots, inter] against the host reference (gemv.glu_flip_slack):
    each expert's slots' gate/up sums near a bf16 tie, through the biases and GLU."""
    tokens, top_k = ids.shape
    inter = w_gate_up.shape[1] // 2
    slack = np.zeros((tokens * top_k, inter))
    flat = ids.reshape(-1)
    for e in np.unique(flat[(flat >= 0) & (flat < len(w_gate_up))]):
        slots = np.flatnonzero(flat == e)
        bias = None if b_gate_up is None else b_gate_up[e]
        slack[slots] = glu_flip_slack(x[slots // top_k], w_gate_up[e],
                                      lambda bits: oracle_act(_f64(bits), epi, bias))
    return slack


def oracle_experts(x: np.ndarray, w_gate_up: np.ndarray, w_down: np.ndarray, ids: np.ndarray,
                   weights: np.ndarray, epi: Epilogue | None = None,
                   b_gate_up: np.ndarray | None = None, b_down: np.ndarray | None = None
                   ) -> dict[str, np.ndarray]:
    """act [tokens, top_k, inter], y [tokens, top_k, hidden] and out [tokens, hidden]; with
    `epi`, the expert epilogue (biases b_gate_up [E, 2 inter], b_down [E, hidden])."""
    experts, hidden, inter = w_down.shape
    tokens, top_k = ids.shape
    act = np.zeros((tokens, top_k, inter))
    y = np.zeros((tokens, top_k, hidden))
    out = np.zeros((tokens, hidden))
    for t in range(tokens):
        for j in range(top_k):
            e = int(ids[t, j])
            if 0 <= e < experts:
                act[t, j], y[t, j] = oracle_slot(
                    x[t], w_gate_up[e], w_down[e], epi,
                    None if b_gate_up is None else b_gate_up[e],
                    None if b_down is None else b_down[e])
                out[t] += float(weights[t, j]) * y[t, j]
    return {"act": act, "y": y, "out": out}


def oracle_shared(x: np.ndarray, w_gate_up: np.ndarray, w_down: np.ndarray,
                  gate_weight: np.ndarray, routed: np.ndarray, inter: int
                  ) -> dict[str, np.ndarray]:
    """A shared expert folded in as slots after the routed ones: act [tokens, slots, inter]
    (its columns in chunks of inter, zeros past its width) and out = bf16(routed) +
    bf16(gate_weight * y_shared), transformers' bf16 op boundaries."""
    hidden, width = w_down.shape
    slots = -(-width // inter)
    act = np.zeros((len(x), slots * inter))
    out = np.zeros((len(x), hidden))
    for t in range(len(x)):
        a, y = oracle_slot(x[t], w_gate_up, w_down)
        act[t, :width] = a
        out[t] = _bf16(routed[t]) + _bf16(float(gate_weight[t]) * y)
    return {"act": act.reshape(len(x), slots, inter), "out": out}


def oracle_align(flat_ids: np.ndarray, experts: int, tiles: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    sorted_slots, tile_expert = [], []
    for e in range(experts):
        mine = [s for s, v in enumerate(flat_ids) if v == e]
        pad = -len(mine) % moe.MOE_TILE_M
        sorted_slots += mine + [-1] * pad
        tile_expert += [e] * ((len(mine) + pad) // moe.MOE_TILE_M)
    sorted_slots += [-1] * (tiles * moe.MOE_TILE_M - len(sorted_slots))
    tile_expert += [-1] * (tiles - len(tile_expert))
    return np.array(sorted_slots, np.int32), np.array(tile_expert, np.int32)


# ---- inputs -------------------------------------------------------------------------------
def random_ids(rng: np.random.Generator, tokens: int, experts: int, top_k: int) -> np.ndarray:
    """Distinct experts per token, as a router picks them."""
    return np.stack([rng.permutation(experts)[:top_k] for _ in range(tokens)]).astype(np.int32)


def expert_weights(rng: np.random.Generator, shape: moe.MoeShape
                   ) -> tuple[np.ndarray, np.ndarray]:
    """bf16 bits of w_gate_up [E, 2I, H] and w_down [E, H, I], outputs O(1)."""
    e, h, i = shape.experts, shape.hidden, shape.inter
    return random_bf16(rng, (e, 2 * i, h), h ** -0.5), random_bf16(rng, (e, h, i), i ** -0.5)


def shared_inputs(rng: np.random.Generator, shape: moe.MoeShape, ids: np.ndarray,
                  weights: np.ndarray) -> dict[str, np.ndarray]:
    """A shared expert's weights (bf16 bits) and the routing rows the fused router writes
    for it: ids extended by experts + c, weights by its gate weight bf16(sigmoid(logit))."""
    h, w = shape.hidden, shape.shared_inter
    tokens, m = len(ids), shape.shared_slots
    gate = _bf16(1.0 / (1.0 + np.exp(-rng.standard_normal(tokens) * 2)))
    return {"sh_gate_up": random_bf16(rng, (2 * w, h), h ** -0.5),
            "sh_down": random_bf16(rng, (h, w), w ** -0.5),
            "topk_ids": np.concatenate([ids, np.tile(shape.experts + np.arange(m), (tokens, 1))],
                                       axis=1).astype(np.int32),
            "topk_weights": np.concatenate([weights, np.repeat(gate[:, None], m, axis=1)],
                                           axis=1).astype(np.float32)}


def _shared_ptrs(p: dict[str, DevicePtr]) -> moe.SharedExpertWeights | None:
    return moe.SharedExpertWeights(p["sh_gate_up"], p["sh_down"], 0) if "sh_down" in p else None


def _routing_weights(rng: np.random.Generator, tokens: int, top_k: int) -> np.ndarray:
    w = rng.uniform(0.05, 1.0, (tokens, top_k)).astype(np.float32)
    return (w / w.sum(axis=1, keepdims=True)).astype(np.float32)


# ---- router -------------------------------------------------------------------------------
def router_case(name: str, logits: np.ndarray, top_k: int, sigmoid: bool = False,
                bias: np.ndarray | None = None, renormalize: bool = True,
                scale: float = 1.0) -> KernelCase:
    tokens, experts = logits.shape
    inputs = {"logits": logits.astype(np.float32)}
    if bias is not None:
        inputs["bias"] = bias.astype(np.float32)
    outputs = {"topk_ids": OutputSpec(DType.I32, (tokens, top_k)),
               "topk_weights": OutputSpec(DType.FP32, (tokens, top_k))}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        routing = moe.Routing("sigmoid" if sigmoid else "softmax", renormalize, scale,
                              p.get("bias", 0))
        moe.topk(KernelCache(backend), stream, p["logits"], p["topk_ids"], p["topk_weights"],
                 tokens, experts, top_k, routing)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return oracle_router(x["logits"], top_k, sigmoid, x.get("bias"), renormalize, scale)

    return KernelCase(name, "moe_router", inputs, outputs, run, oracle)


def router_bias_case(name: str, logits: np.ndarray, bias: np.ndarray, top_k: int) -> KernelCase:
    """gpt-oss's router: float32 logits (the unrounded GEMV's sums) plus its bf16 bias, each
    sum rounded once to bf16 in float32 arithmetic, then softmax top-k renormalized."""
    tokens, experts = logits.shape
    inputs = {"logits": logits.astype(np.float32), "logit_bias": bias}
    outputs = {"topk_ids": OutputSpec(DType.I32, (tokens, top_k)),
               "topk_weights": OutputSpec(DType.FP32, (tokens, top_k))}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        routing = moe.Routing("softmax", True, 1.0, unrounded=True, logit_bias=p["logit_bias"])
        moe.topk(KernelCache(backend), stream, p["logits"], p["topk_ids"], p["topk_weights"],
                 tokens, experts, top_k, routing)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        summed = x["logits"].astype(np.float32) + bf16_bits_to_f32(x["logit_bias"])[None, :]
        return oracle_router(_bf16(summed), top_k, False, None, True, 1.0)

    return KernelCase(name, "moe_router", inputs, outputs, run, oracle)


def _router_bias_cases(rng: np.random.Generator) -> list[KernelCase]:
    """gpt-oss-20b's and -120b's routers (32 and 128 experts, top-4) over float32 logits,
    and one whose sums straddle few bf16 values (ties after the rounding, to the lower id)."""
    def f32_logits(tokens: int, experts: int) -> np.ndarray:
        return (rng.standard_normal((tokens, experts)) * 3).astype(np.float32)

    def bias(experts: int) -> np.ndarray:
        return random_bf16(rng, (experts,), 0.5)

    near = (1.0 + rng.uniform(-1, 1, (6, 32)) * 2.0 ** -8).astype(np.float32)
    return [router_bias_case("moe_topk softmax logit bias t7 e32 k4 (gpt-oss-20b)",
                             f32_logits(7, 32), bias(32), 4),
            router_bias_case("moe_topk softmax logit bias t3 e128 k4 (gpt-oss-120b)",
                             f32_logits(3, 128), bias(128), 4),
            router_bias_case("moe_topk softmax logit bias ties e32 k4", near,
                             np.zeros(32, np.uint16), 4)]


def _bf16_logits(rng: np.random.Generator, tokens: int, experts: int, scale: float = 3.0
                 ) -> np.ndarray:
    """Router logits as the gate writes them: bf16 values widened to f32."""
    return bf16_bits_to_f32(random_bf16(rng, (tokens, experts), scale))


def _slot_count(shared_gate: np.ndarray | None, shared_slots: int) -> int:
    """A case's shared slots: `shared_slots` (with a gate, 1 where not given), none without
    either."""
    return shared_slots or (1 if shared_gate is not None else 0)


def _case_routing(kw: dict[str, Any], p: dict[str, DevicePtr]) -> moe.Routing:
    """The Routing of gate_case's keyword arguments, its bias at its device address."""
    return moe.Routing("sigmoid" if kw.get("sigmoid") else "softmax",
                       bool(kw.get("renormalize", True)), float(kw.get("scale", 1.0)),
                       p.get("bias", 0), bool(kw.get("unrounded", False)))


def _case_shared(p: dict[str, DevicePtr], m: int) -> moe.SharedExpertWeights | None:
    """A router case's shared expert: its gate row where the case has one, else (m slots
    without a gate) an ungated one."""
    return moe.SharedExpertWeights(0, 0, p.get("shared_gate", 0)) if m else None


def oracle_logits(xs: np.ndarray, w_gate: np.ndarray, unrounded: bool) -> np.ndarray:
    """The router's float64 logits: the exact sums rounded to bf16, or (`unrounded`, a
    float32 router) to float32."""
    sums = xs @ w_gate.T
    return sums.astype(np.float32).astype(np.float64) if unrounded else _bf16(sums)


def gate_case(name: str, x: np.ndarray, w_gate: np.ndarray, top_k: int, sigmoid: bool = False,
              bias: np.ndarray | None = None, renormalize: bool = True, scale: float = 1.0,
              shared_gate: np.ndarray | None = None, shared_slots: int = 0,
              routes: KernelRoutes | None = None, unrounded: bool = False) -> KernelCase:
    """The fused decode router (gate GEMV + top-k) on bf16 bits x [tokens, hidden] and
    w_gate [experts, hidden], launched twice over one counter (the second launch routes
    only if the first left it at zero, as a graph replay needs); with `shared_gate` (bits
    [hidden]) a shared expert's slots (`shared_slots`, default 1) follow each token's
    top-k; `shared_slots` without `shared_gate`: an ungated shared expert's (weight 1).
    `unrounded`: a float32 router (its logits the float32 sums). `routes`: the launch
    builder's paths (None: the environment's)."""
    tokens, hidden = x.shape
    experts = len(w_gate)
    m = _slot_count(shared_gate, shared_slots)
    shape = moe.MoeShape(experts, top_k, hidden, 16, shared_inter=16 * m)
    inputs = {"x": x, "w_gate": w_gate, "counter": np.zeros(1, np.int32)}
    if bias is not None:
        inputs["bias"] = bias.astype(np.float32)
    outputs = {"counter": OutputSpec(DType.I32, (1,))}
    if shared_gate is not None:
        inputs["shared_gate"] = shared_gate
        # beside unrounded logits, exactly the rounded value (on an exact grid in any order)
        outputs["shared_logits"] = OutputSpec(DType.FP32, (tokens,),
                                              (0.0, 0.0) if unrounded else None, True)
    for sfx in ("", "2"):
        outputs |= {"logits" + sfx: OutputSpec(DType.FP32, (tokens, experts),
                                               bf16_valued=not unrounded),
                    "topk_ids" + sfx: OutputSpec(DType.I32, (tokens, top_k + m)),
                    "topk_weights" + sfx: OutputSpec(DType.FP32, (tokens, top_k + m))}
    kw = {"sigmoid": sigmoid, "renormalize": renormalize, "scale": scale,
          "unrounded": unrounded}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        for sfx in ("", "2"):
            moe.gate_topk(KernelCache(backend, routes), stream, p["x"], p["w_gate"],
                          p["logits" + sfx],
                          p["topk_ids" + sfx], p["topk_weights" + sfx], p["counter"], tokens,
                          shape, _case_routing(kw, p), _case_shared(p, m),
                          p.get("shared_logits", 0))

    def oracle(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        xs = _f64(inp["x"])
        logits = oracle_logits(xs, _f64(inp["w_gate"]), unrounded)
        r = oracle_router(logits, top_k, sigmoid, inp.get("bias"), renormalize, scale)
        ids, w = r["topk_ids"], r["topk_weights"]
        out = {"counter": np.zeros(1)}
        if m:
            weight = np.ones(tokens)
            if shared_gate is not None:
                g = _bf16(xs @ _f64(inp["shared_gate"]))
                out["shared_logits"], weight = g, _bf16(1 / (1 + np.exp(-g)))
            ids = np.concatenate([ids, np.tile(experts + np.arange(m), (tokens, 1))], axis=1)
            w = np.concatenate([w, np.repeat(weight[:, None], m, 1)], 1)
        for sfx in ("", "2"):
            out |= {"logits" + sfx: logits, "topk_ids" + sfx: ids, "topk_weights" + sfx: w}
        return out

    return KernelCase(name, "moe_router", inputs, outputs, run, oracle)


def gate_norm_case(rng: np.random.Generator, name: str, tokens: int, experts: int,
                   hidden: int, top_k: int, offset: bool = False, cluster: bool = False,
                   gate_grid: tuple[float, int] = (1 / 64, 1), **kw: Any) -> KernelCase:
    """gate_case with the residual add + RMSNorm before the router done by its launch
    (moe_add_rmsnorm_gate_topk_*, ops.moe.RouterNorm), on inputs whose norm is exact in any
    arithmetic: residual + delta = +-1 (0.75 + 0.25 of one sign), so mean(r^2) = 1, r x
    rsqrt(1 + eps) rounds to +-1 and x = +-w (offset: +-(1 + w)) with w on gate_case's
    exact grid; the residual and normed rows are outputs too. kw: gate_case's (routing,
    shared gate, routes); `cluster`: the launch must take the cluster router
    (ops.moe.router_uses_cluster; its routes switched on); `gate_grid`: w_gate's (step,
    span) on _exact_gate's grid."""
    if cluster:
        kw["routes"] = KernelRoutes(moe_router_cluster=True)
    sign = np.where(rng.integers(0, 2, (tokens, hidden)) == 1, 1.0, -1.0).astype(np.float32)
    w = rng.integers(-1, 2 if not offset else 1, hidden).astype(np.float32)
    x = sign * ((1 + w) if offset else w)
    w_gate = _exact_gate(rng, 1, experts, hidden, *gate_grid)[1]
    base = gate_case(name, f32_to_bf16_bits(x), w_gate, top_k, **kw)
    inputs = {k: v for k, v in base.inputs.items() if k != "x"}
    # each launch its own residual row (updated in place), one counter for both
    inputs |= {"residual": f32_to_bf16_bits(0.75 * sign), "residual2": f32_to_bf16_bits(
        0.75 * sign), "delta": f32_to_bf16_bits(0.25 * sign), "norm_w": f32_to_bf16_bits(w)}
    outputs = dict(base.outputs) | {
        "residual": OutputSpec(DType.BF16, (tokens, hidden)),
        "residual2": OutputSpec(DType.BF16, (tokens, hidden)),
        "x": OutputSpec(DType.BF16, (tokens, hidden))}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        m = _slot_count(kw.get("shared_gate"), kw.get("shared_slots", 0))
        shape = moe.MoeShape(experts, top_k, hidden, 16, shared_inter=16 * m)
        routing, shared = _case_routing(kw, p), _case_shared(p, m)
        kc = KernelCache(backend, kw.get("routes"))
        if cluster and not moe.router_uses_cluster(kc, tokens, shape, routing):
            raise RuntimeError(f"{name}: the cluster router does not run here")
        for sfx in ("", "2"):
            norm = moe.RouterNorm(p["residual" + sfx], p["delta"], p["norm_w"], 1e-6, offset)
            moe.gate_topk(kc, stream, p["x"], p["w_gate"], p["logits" + sfx],
                          p["topk_ids" + sfx], p["topk_weights" + sfx], p["counter"], tokens,
                          shape, routing, shared, p.get("shared_logits", 0), norm=norm)

    def oracle(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return base.oracle({**inp, "x": f32_to_bf16_bits(x)}) | {
            "residual": sign, "residual2": sign, "x": x}

    return dataclasses.replace(base, inputs=inputs, outputs=outputs, run=run, oracle=oracle)


def _exact_gate(rng: np.random.Generator, tokens: int, experts: int, hidden: int,
                step: float = 1 / 16, span: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """x, w_gate on small integer grids (x in -span..span, w the same times `step`, a power
    of two): every dot product is exact in float32 whatever the summation order, so the
    device's bf16 logits equal the reference's bit for bit and the top-k ids (compared
    exactly) cannot flip on a rounding difference; equal logits (ties) are frequent."""
    x = rng.integers(-span, span + 1, (tokens, hidden)).astype(np.float32)
    w = rng.integers(-span, span + 1, (experts, hidden)).astype(np.float32) * step
    return f32_to_bf16_bits(x), f32_to_bf16_bits(w)


def _gate_cases(rng: np.random.Generator) -> list[KernelCase]:
    """Fused router cases: the leaf shapes (Qwen3-30B-A3B: 128 experts, hidden 2048, top-8;
    Qwen3.5-35B-A3B: 256 experts with a shared expert's gate) at 1 and 8 tokens, exact ties,
    sigmoid with a bias, an expert count not a multiple of the block's 8 rows. Inputs on
    exact grids (logits of typical size: x, w in -1..1, w / 64) except one small random
    case, whose 256-term sums leave a rounding flip at the k-th place vanishingly rare."""
    def leaf(t: int, e: int) -> tuple[np.ndarray, np.ndarray]:
        return _exact_gate(rng, t, e, 2048, 1 / 64, 1)

    bias = bf16_bits_to_f32(random_bf16(rng, (64,), 0.5))
    return [gate_case("moe_gate_topk softmax leaf t1 e128 h2048 k8", *leaf(1, 128), 8),
            gate_case("moe_gate_topk softmax leaf t8 e128 h2048 k8", *leaf(8, 128), 8),
            gate_case("moe_gate_topk softmax t3 e256 h2048 k8 (qwen3.5-35b-a3b)",
                      *leaf(3, 256), 8),
            gate_case("moe_gate_topk softmax exact ties t5 e60 h512 k4",
                      *_exact_gate(rng, 5, 60, 512), 4),
            gate_case("moe_gate_topk sigmoid bias t4 e64 h256 k6 scale 2.5",
                      random_bf16(rng, (4, 256)), random_bf16(rng, (64, 256), 2 / 16), 6, True,
                      bias, True, 2.5),
            # a shared expert's gate as one more row: 256 + 1 rows (a block of one row)
            gate_case("moe_gate_topk softmax shared t2 e256 h2048 k8 (qwen3.5-35b-a3b)",
                      *leaf(2, 256), 8, shared_gate=_exact_gate(rng, 1, 1, 2048, 1 / 64, 1)[1][0]),
            gate_case("moe_gate_topk softmax shared x3 t8 e8 h128 k3",
                      *_exact_gate(rng, 8, 8, 128), 3,
                      shared_gate=_exact_gate(rng, 1, 1, 128)[1][0], shared_slots=3),
            # batch 1 (the one-token GEMV loop) at the flagship's shape and a run-time hidden
            gate_case("moe_gate_topk softmax shared t1 e256 h2048 k8 (qwen3.5-35b-a3b)",
                      *leaf(1, 256), 8, shared_gate=_exact_gate(rng, 1, 1, 2048, 1 / 64, 1)[1][0]),
            gate_case("moe_gate_topk sigmoid t1 e64 h320 k6",
                      *_exact_gate(rng, 1, 64, 320), 6, True),
            gate_case("moe_gate_topk softmax t2 e384 h256 k10", *_exact_gate(rng, 2, 384, 256),
                      10),
            # the add + norm before the router by its launch (NormIn): the leaf shapes at batch
            # 1, a batch of 8, Qwen3.5's zero-centred weights, a row of 4 vectors a thread
            gate_norm_case(rng, "moe_add_rmsnorm_gate_topk t1 e128 h2048 k8", 1, 128, 2048, 8),
            gate_norm_case(rng, "moe_add_rmsnorm_gate_topk t8 e128 h2048 k8", 8, 128, 2048, 8),
            gate_norm_case(rng, "moe_add_rmsnorm_gate_topk offset t1 e256 h2048 k8", 1, 256,
                           2048, 8, offset=True),
            gate_norm_case(rng, "moe_add_rmsnorm_gate_topk t3 e64 h8192 k6", 3, 64, 8192, 6),
            # the same at batch 1 as one cluster (ATLAS_MOE_ROUTER_CLUSTER): Qwen3-30B-A3B's
            # 128 experts, Qwen3.5-35B-A3B's 256 with the shared gate row, sigmoid with a bias,
            # an expert count that leaves the last block's warps part empty
            gate_norm_case(rng, "moe_add_rmsnorm_gate_topk cluster t1 e128 h2048 k8", 1, 128,
                           2048, 8, cluster=True),
            gate_norm_case(rng, "moe_add_rmsnorm_gate_topk cluster offset shared t1 e256 "
                           "h2048 k8", 1, 256, 2048, 8, offset=True, cluster=True,
                           shared_gate=_exact_gate(rng, 1, 1, 2048, 1 / 64, 1)[1][0]),
            gate_norm_case(rng, "moe_add_rmsnorm_gate_topk cluster sigmoid bias t1 e64 h1024 "
                           "k6 scale 2.5", 1, 64, 1024, 6, cluster=True, sigmoid=True,
                           bias=bf16_bits_to_f32(random_bf16(rng, (64,), 0.5)), scale=2.5),
            gate_norm_case(rng, "moe_add_rmsnorm_gate_topk cluster shared x2 t1 e200 h512 k8",
                           1, 200, 512, 8, cluster=True,
                           shared_gate=_exact_gate(rng, 1, 1, 512, 1 / 64, 1)[1][0],
                           shared_slots=2)] + _unrounded_gate_cases(rng)


#: (step, span) of a gate whose products with x on _exact_gate's grid have float32 sums that
#: are exact in any order (2^18 steps at most) and mostly need more than bf16's 8 bits: a
#: rounded logit shows
UNROUNDED_GRID = (1 / 1024, 8)


def _unrounded_gate_cases(rng: np.random.Generator) -> list[KernelCase]:
    """The fused router's float32-logit mode (a float32 router, GLM-4.5's) and an ungated
    shared expert (its slot weighted 1): GLM-4.5-Air's shape (128 experts, hidden 4096, top-8
    of sigmoid + bias scaled by 2.5, one shared slot) at batches 3 and 8, GLM-4.5's (160
    experts, hidden 5120) as one cluster at batch 1, softmax, and a gated shared expert beside
    unrounded logits (its gate logit still bf16-rounded), on the ticket and the cluster path."""
    def bias(e: int) -> np.ndarray:
        return bf16_bits_to_f32(random_bf16(rng, (e,), 0.5))

    glm = {"sigmoid": True, "renormalize": True, "scale": 2.5, "shared_slots": 1,
           "unrounded": True}
    return [gate_case("moe_gate_topk sigmoid unrounded ungated t3 e128 h4096 k8 (glm-4.5-air)",
                      *_exact_gate(rng, 3, 128, 4096, *UNROUNDED_GRID), 8, bias=bias(128),
                      **glm),
            gate_case("moe_gate_topk softmax unrounded shared t2 e60 h512 k4",
                      *_exact_gate(rng, 2, 60, 512, *UNROUNDED_GRID), 4,
                      shared_gate=_exact_gate(rng, 1, 1, 512, *UNROUNDED_GRID)[1][0],
                      unrounded=True),
            gate_norm_case(rng, "moe_add_rmsnorm_gate_topk sigmoid unrounded ungated t8 e128 "
                           "h4096 k8 (glm-4.5-air)", 8, 128, 4096, 8, gate_grid=UNROUNDED_GRID,
                           bias=bias(128), **glm),
            gate_norm_case(rng, "moe_add_rmsnorm_gate_topk cluster sigmoid unrounded ungated t1 "
                           "e160 h5120 k8 (glm-4.5)", 1, 160, 5120, 8, cluster=True,
                           gate_grid=UNROUNDED_GRID, bias=bias(160), **glm),
            gate_norm_case(rng, "moe_add_rmsnorm_gate_topk cluster unrounded shared t1 e64 h4096 "
                           "k6", 1, 64, 4096, 6, cluster=True, gate_grid=UNROUNDED_GRID,
                           # wider than the grid (x is +-1 at most here): a logit of ~13 bits
                           shared_gate=_exact_gate(rng, 1, 1, 4096, 1 / 1024, 256)[1][0],
                           unrounded=True)]


@kernel_cases("moe_router")
def router_cases(rng: np.random.Generator) -> list[KernelCase]:
    cases = [router_case("moe_topk softmax t5 e128 k8", _bf16_logits(rng, 5, 128), 8),
             router_case("moe_topk softmax leaf t7 e128 k8 (qwen3-30b-a3b)",
                         _bf16_logits(rng, 7, 128), 8),
             router_case("moe_topk softmax leaf t3 e256 k8 (qwen3.5-35b-a3b)",
                         _bf16_logits(rng, 3, 256), 8),
             router_case("moe_topk softmax k=e=8 no renorm", _bf16_logits(rng, 4, 8), 8,
                         renormalize=False),
             router_case("moe_topk softmax e60 k4 scale 2.5", _bf16_logits(rng, 9, 60), 4,
                         scale=2.5),
             router_case("moe_topk softmax all tied e64 k6", np.zeros((3, 64), np.float32), 6),
             # each per-lane tier of the general path just past its boundary, and the widest
             router_case("moe_topk softmax e129 k8", _bf16_logits(rng, 3, 129), 8),
             router_case("moe_topk softmax e257 k8", _bf16_logits(rng, 3, 257), 8),
             router_case("moe_topk softmax e512 k10 (qwen3-next)", _bf16_logits(rng, 4, 512),
                         10)]
    # ties at the k-th place: logits on a coarse grid, many equal values per row
    coarse = np.round(rng.uniform(-2, 2, (6, 32)) * 2) / 2
    cases.append(router_case("moe_topk softmax coarse ties e32 k5", coarse, 5))
    bias = bf16_bits_to_f32(random_bf16(rng, (256,), 0.5))
    cases += [router_case("moe_topk sigmoid bias e256 k8 scale 2.5",
                          _bf16_logits(rng, 6, 256), 8, True, bias, True, 2.5),
              router_case("moe_topk sigmoid leaf t5 e128 k8 (the size leaf's shape)",
                          _bf16_logits(rng, 5, 128), 8, True, bias[:128], True, 1.0),
              router_case("moe_topk sigmoid no bias k=e=16 no renorm",
                          _bf16_logits(rng, 3, 16), 16, True, None, False)]
    # sigmoid ties: equal logits and equal biases give equal keys; -200 underflows to 0
    tied = np.round(rng.uniform(-2, 2, (5, 48)))
    tied[0] = -200.0
    cases.append(router_case("moe_topk sigmoid ties + underflow e48 k6", tied, 6, True,
                             np.repeat(np.array([0.0, 0.25], np.float32), 24), True))
    return cases + _gate_cases(rng) + _router_bias_cases(rng)


# ---- decode experts -----------------------------------------------------------------------
def decode_case(rng: np.random.Generator, name: str, shape: moe.MoeShape, ids: np.ndarray,
                graph: bool = False, routes: KernelRoutes | None = None) -> KernelCase:
    """moe_gate_up_silu then moe_down_sum, act checked on its own (it is the first kernel's
    output and the second one's input); with shape.shared_inter, a shared expert folded in
    as shape.shared_slots more slots. `graph`: also captured into the GPU check's graph;
    `routes`: the launch builders' paths (None: the environment's)."""
    tokens, k = len(ids), shape.top_k
    w_gu, w_d = expert_weights(rng, shape)
    inputs = {"x": random_bf16(rng, (tokens, shape.hidden)), "w_gate_up": w_gu, "w_down": w_d,
              "topk_ids": ids.astype(np.int32),
              "topk_weights": _routing_weights(rng, tokens, k)}
    if shape.shared_inter:
        inputs |= shared_inputs(rng, shape, ids, inputs["topk_weights"])
    outputs = {"act": OutputSpec(DType.BF16, (tokens, shape.slots, shape.inter)),
               "out": OutputSpec(DType.BF16, (tokens, shape.hidden))}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend, routes)
        moe.decode_gate_up(kc, stream, p["x"], p["w_gate_up"], p["topk_ids"], p["act"], tokens,
                           shape, _shared_ptrs(p))
        moe.decode_down(kc, stream, p["act"], p["w_down"], p["topk_ids"], p["topk_weights"],
                        p["out"], tokens, shape, _shared_ptrs(p))

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        r = oracle_experts(_f64(x["x"]), _f64(x["w_gate_up"]), _f64(x["w_down"]),
                           x["topk_ids"][:, :k], x["topk_weights"][:, :k])
        if not shape.shared_inter:
            return r
        sh = oracle_shared(_f64(x["x"]), _f64(x["sh_gate_up"]), _f64(x["sh_down"]),
                           x["topk_weights"][:, k], r["out"], shape.inter)
        return {"act": np.concatenate([r["act"], sh["act"]], axis=1), "out": sh["out"]}

    return KernelCase(name, "moe_decode", inputs, outputs, run, oracle,
                      reference_abs_tol=ACT_REFERENCE_TOL, graph=graph)


def down_case(rng: np.random.Generator, name: str, shape: moe.MoeShape, ids: np.ndarray,
              routes: KernelRoutes | None = None) -> KernelCase:
    """moe_down_sum alone from a given act: one rounding per expert and one at the end, so
    it is held to the tight reference tolerance, widened by one per-expert rounding flip
    (down_flip_tol). With shape.shared_inter the shared expert's slots follow (act zero past
    its width, as the gate/up kernel leaves it). `routes`: as decode_case's."""
    tokens, k = len(ids), shape.top_k
    _, w_d = expert_weights(rng, shape)
    act = random_bf16(rng, (tokens, shape.slots, shape.inter))
    act.reshape(tokens, -1)[:, k * shape.inter + shape.shared_inter:] = 0
    inputs = {"act": act, "w_down": w_d, "topk_ids": ids.astype(np.int32),
              "topk_weights": _routing_weights(rng, tokens, k)}
    if shape.shared_inter:
        inputs |= shared_inputs(rng, shape, ids, inputs["topk_weights"])

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        moe.decode_down(KernelCache(backend, routes), stream, p["act"], p["w_down"],
                        p["topk_ids"], p["topk_weights"], p["out"], tokens, shape,
                        _shared_ptrs(p))

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        act, wd = _f64(x["act"]), _f64(x["w_down"])
        out = np.zeros((tokens, shape.hidden))
        for t in range(tokens):
            for j, e in enumerate(x["topk_ids"][t, :k]):
                if 0 <= e < shape.experts:
                    out[t] += float(x["topk_weights"][t, j]) * _bf16(wd[e] @ act[t, j])
        if shape.shared_inter:
            sd = _f64(x["sh_down"])
            y = _bf16(act[:, k:].reshape(tokens, -1)[:, :shape.shared_inter] @ sd.T)
            out = _bf16(out) + _bf16(x["topk_weights"][:, k:k + 1].astype(np.float64) * y)
        return {"out": out}

    return KernelCase(name, "moe_decode", inputs,
                      {"out": OutputSpec(DType.BF16, (tokens, shape.hidden))}, run, oracle,
                      reference_abs_tol=down_flip_tol(inputs, shape))


def down_flip_tol(inputs: dict[str, np.ndarray], shape: moe.MoeShape) -> float:
    """How far one per-expert rounding flip moves a down sum's output from the host
    reference's. Each y_j = bf16(w_down[e] @ act_j) is summed in f32 by the kernel and in f64
    by the reference: a dot product within f32 error of a bf16 rounding midpoint rounds to
    the neighbouring value on one of them, so sum_j w_j y_j moves by w_j * ulp(y_j) (up to
    2 bf16 ulps of w_j y_j), more than the check script's 2 ulps of an output that cancels
    to a fraction of that term (gpu95, seed 1796377139: `leaf t2` out[0, 849] = -0.0148,
    3 of its ulps from the reference after y_0 = -0.8457 sat 1e-5 ulp from a midpoint and
    flipped, w_0 * ulp(y_0) = 1.6e-4; gpu34's `t4 e8 k2`, 1 of 1,280 outputs, looks the
    same). So: the largest w_j * ulp(y_j) of the case (one scalar for every output: the
    check script takes no per-element allowance). With a shared expert the flip passes one
    more bf16 rounding, of the routed sum (a routed term's) or of gate * y_shared (the shared
    product's: gpu95 `shared t2`, out[0, 883] = 0.0015 one ulp of that product, 2.4e-4, from
    the reference), which turns it into whole ulps of that value. Two flips in one output
    (two of its terms each within ~1e-5 ulp of a midpoint) are not covered: far rarer than
    the one in ~10^4 outputs seen."""
    k, experts, tokens = shape.top_k, shape.experts, len(inputs["topk_ids"])
    act = _f64(inputs["act"]).reshape(tokens, shape.slots, shape.inter)
    wd = _f64(inputs["w_down"])
    y, w = np.zeros((tokens, k, shape.hidden)), np.zeros((tokens, k))
    for t in range(tokens):
        for j, e in enumerate(inputs["topk_ids"][t, :k]):
            if 0 <= e < experts:
                y[t, j] = _bf16(wd[e] @ act[t, j])
                w[t, j] = inputs["topk_weights"][t, j]
    flip = (np.abs(w)[:, :, None] * bf16_ulp(y)).max(axis=1)  # [tokens, hidden]
    if not shape.shared_inter:
        return float(flip.max())

    def rounded(move: np.ndarray, value: np.ndarray) -> np.ndarray:
        """A move of `value` after its bf16 rounding: a whole number of its ulps."""
        u = bf16_ulp(value)
        return np.ceil(move / u) * u

    a_sh = act[:, k:].reshape(tokens, -1)[:, :shape.shared_inter]
    y_sh = _bf16(a_sh @ _f64(inputs["sh_down"]).T)
    gate = inputs["topk_weights"][:, k:k + 1].astype(np.float64)
    routed = rounded(flip, np.einsum("tj,tjh->th", w, y))
    shared = rounded(np.abs(gate) * bf16_ulp(y_sh), gate * y_sh)
    return float(np.maximum(routed, shared).max())


@kernel_cases("moe_decode")
def decode_cases(rng: np.random.Generator) -> list[KernelCase]:
    # first: the case the GPU check captures into a CUDA graph (first of its module): the
    # down sum at the Qwen3-30B-A3B leaf's shape (8 of its 128 experts)
    leaf = moe.MoeShape(experts=8, top_k=8, hidden=2048, inter=768)
    fused = [down_case(rng, "moe_down_sum leaf t2 h2048 i768 k8", leaf, random_ids(rng, 2, 8, 8))]
    small = moe.MoeShape(experts=16, top_k=4, hidden=256, inter=96)
    ids3 = random_ids(rng, 3, 16, 4)
    ids3[1, 2] = -1  # an expert held by another rank
    ids3[2, 0] = 16  # out of range: ignored the same way
    cases = [decode_case(rng, "moe_decode t1 e16 k4 h256 i96", small, random_ids(rng, 1, 16, 4)),
             decode_case(rng, "moe_decode t3 invalid ids", small, ids3),
             decode_case(rng, "moe_decode t8 all tokens one expert", small,
                         np.stack([np.roll(np.arange(4), t) + 5 for t in range(8)])),
             decode_case(rng, "moe_decode t5 k=e=4 h128 i1008",
                         moe.MoeShape(4, 4, 128, 1008), random_ids(rng, 5, 4, 4)),
             down_case(rng, "moe_down_sum t4 e8 k2 h320 i64", moe.MoeShape(8, 2, 320, 64),
                       random_ids(rng, 4, 8, 2))]
    # the Qwen3-30B-A3B per-expert shape (hidden 2048, inter 768, top-8) that the size leaf
    # compiles in; 8 experts keep the host reference small
    cases.append(decode_case(rng, "moe_decode leaf t2 h2048 i768 k8", leaf,
                             random_ids(rng, 2, 8, 8)))
    ids_bad = random_ids(rng, 3, 16, 4)
    ids_bad[0, 3] = -1  # another rank's expert: nothing in the sum
    # top_k 3: 5 rows a block, hidden 336 = 67 blocks and one of a single row
    odd = moe.MoeShape(experts=12, top_k=3, hidden=336, inter=64)
    # top_k 20 > one pass of 16 items: a block of one row takes two passes
    wide = moe.MoeShape(experts=24, top_k=20, hidden=128, inter=32)
    fused += [down_case(rng, "moe_down_sum t3 e16 k4 invalid id", small, ids_bad),
              down_case(rng, "moe_down_sum t5 e12 k3 h336", odd, random_ids(rng, 5, 12, 3)),
              down_case(rng, "moe_down_sum t8 e24 k20 (two passes)", wide,
                        random_ids(rng, 8, 24, 20)),
              down_case(rng, "moe_down_sum t2 e24 k20 (two passes) h128 i32", wide,
                        random_ids(rng, 2, 24, 20)),
              # rows of 194 chunks: 7 steps, the general tile's batches of 5 (the second
              # partial), and 12 rows a group
              down_case(rng, "moe_down_sum t3 e6 k2 h72 i1552 (long rows)",
                        moe.MoeShape(6, 2, 72, 1552), random_ids(rng, 3, 6, 2))]
    # a shared expert folded in: 48 columns in chunks of 32 (two slots, the second partial),
    # as the tiny Qwen3.5-MoE / Qwen3-Next fixtures; then Qwen3.5-35B-A3B's per-expert shape
    # (hidden 2048, inter 512, top-8, shared 512: one slot), 8 of its 256 experts
    part = moe.MoeShape(experts=8, top_k=3, hidden=128, inter=32, shared_inter=48)
    q35 = moe.MoeShape(experts=8, top_k=8, hidden=2048, inter=512, shared_inter=512)
    four = moe.MoeShape(experts=6, top_k=2, hidden=64, inter=16, shared_inter=64)
    fused += [decode_case(rng, "moe_decode shared t3 e8 k3 i32 shared 48 (partial chunk)", part,
                          random_ids(rng, 3, 8, 3)),
              decode_case(rng, "moe_decode shared t1 e6 k2 i16 shared 64 (four chunks)", four,
                          random_ids(rng, 1, 6, 2)),
              down_case(rng, "moe_down_sum shared t4 e8 k3 shared 48", part,
                        random_ids(rng, 4, 8, 3)),
              down_case(rng, "moe_down_sum shared t2 h2048 i512 k8 (qwen3.5-35b-a3b)", q35,
                        random_ids(rng, 2, 8, 8)),
              decode_case(rng, "moe_decode shared t2 h2048 i512 k8 (qwen3.5-35b-a3b)", q35,
                          random_ids(rng, 2, 8, 8))]
    # many row groups a block, a partial last block, a partial shared chunk
    ring = moe.MoeShape(experts=8, top_k=3, hidden=1040, inter=512, shared_inter=528)
    ring_ids = random_ids(rng, 8, 8, 3)
    ring_ids[5, 1] = -1
    fused += [down_case(rng, "moe_down_sum shared t8 h1040 i512 k3 shared 528", ring, ring_ids)]
    # batch 1 with 28 slots: an id of another rank, a shared expert whose second chunk is
    # partial; the Qwen3-30B-A3B leaf at batch 1 (captured into the graph too); the
    # flagship's shape at batch 8
    many = moe.MoeShape(experts=40, top_k=28, hidden=64, inter=1008, shared_inter=1040)
    many_ids = rng.permutation(40)[None, :28].astype(np.int32)
    many_ids[0, 5] = -1
    fused += [decode_case(rng, "moe_decode t1 e40 k28 h64 i1008 shared 1040", many, many_ids),
              decode_case(rng, "moe_decode leaf t1 h2048 i768 k8", leaf,
                          random_ids(rng, 1, 8, 8), graph=True),
              decode_case(rng, "moe_decode leaf shared t8 h2048 i512 k8 (qwen3.5-35b-a3b)", q35,
                          random_ids(rng, 8, 8, 8))]
    # the session-6 launches at both full-size shapes, whatever the environment says: gate/up
    # on the column-loop kernel (ATLAS_MOE_GATE_UP_GEMV=0), down in whole row groups a block
    # (ATLAS_MOE_DOWN_WAVE=0)
    old = KernelRoutes(moe_gate_up_gemv=False, moe_down_wave=False)
    # the GEMV-shaped gate/up's batch entry (ATLAS_MOE_GATE_UP_GEMV_MAX_M=8): pairs of one
    # expert 4 to a weight read, every token on one expert, a partial shared chunk, an id of
    # another rank, the flagship's shape at batch 8
    batched = KernelRoutes(moe_gate_up_gemv_max_m=8)
    fused += [decode_case(rng, "moe_decode t8 all tokens one expert (batched gate/up GEMV)",
                          small, np.stack([np.roll(np.arange(4), t) + 5 for t in range(8)]),
                          routes=batched),
              decode_case(rng, "moe_decode shared t3 e8 k3 i32 shared 48 (batched gate/up GEMV)",
                          part, random_ids(rng, 3, 8, 3), routes=batched),
              decode_case(rng, "moe_decode t3 invalid ids (batched gate/up GEMV)", small, ids3,
                          routes=batched),
              decode_case(rng, "moe_decode leaf shared t8 h2048 i512 k8 (qwen3.5-35b-a3b, "
                          "batched gate/up GEMV)", q35, random_ids(rng, 8, 8, 8), routes=batched)]
    fused += [decode_case(rng, "moe_decode leaf t1 h2048 i768 k8 (session-6 launches)", leaf,
                          random_ids(rng, 1, 8, 8), routes=old),
              decode_case(rng, "moe_decode leaf shared t8 h2048 i512 k8 (qwen3.5-35b-a3b, "
                          "session-6 launches)", q35, random_ids(rng, 8, 8, 8), routes=old),
              down_case(rng, "moe_down_sum leaf t2 h2048 i768 k8 (session-6 launches)", leaf,
                        random_ids(rng, 2, 8, 8), routes=old)]
    return (fused + cases + _down_gemv_cases(rng, leaf, q35)
            + _tiled_gate_up_cases(rng, leaf, q35) + _route_in_experts_cases(rng))


def route_in_experts_case(rng: np.random.Generator, name: str, shape: moe.MoeShape,
                          gate: tuple[np.ndarray, np.ndarray], sigmoid: bool = False,
                          bias: np.ndarray | None = None, renormalize: bool = True,
                          scale: float = 1.0, heavy: bool = False, unrounded: bool = False,
                          ungated: bool = False) -> KernelCase:
    """A batch-1 MoE block routing inside its expert launches (ops/moe.py routes_in_experts):
    moe_gate_logits_bf16 (the logits, the shared expert's logit), then the tiled gate/up and
    the GEMV-shaped down each taking the top-k of the logits (moe_*_route_*), against the
    float64 router and expert oracles. gate: bits of x [1, hidden] and w_gate [experts,
    hidden] (exact grids: the top-k cannot flip on a rounding difference). `unrounded`: a
    float32 router; `ungated`: the shared expert has no gate (weight 1, GLM-4.5's)."""
    x, w_gate = gate
    k = shape.top_k
    w_gu, w_d = expert_weights(rng, shape)
    inputs = {"x": x, "w_gate": w_gate, "w_gate_up": w_gu, "w_down": w_d}
    outputs = {"logits": OutputSpec(DType.FP32, (1, shape.experts), bf16_valued=not unrounded),
               "act": OutputSpec(DType.BF16, (1, shape.slots, shape.inter)),
               "out": OutputSpec(DType.BF16, (1, shape.hidden))}
    if bias is not None:
        inputs["bias"] = bias.astype(np.float32)
    if shape.shared_inter:
        h, w = shape.hidden, shape.shared_inter
        if not ungated:
            inputs["sh_gate"] = _exact_gate(rng, 1, 1, h, 1 / 64, 1)[1][0]
            outputs["shared_logits"] = OutputSpec(DType.FP32, (1,), bf16_valued=True)
        inputs |= {"sh_gate_up": random_bf16(rng, (2 * w, h), h ** -0.5),
                   "sh_down": random_bf16(rng, (h, w), w ** -0.5)}
    routing_rule = ("sigmoid" if sigmoid else "softmax", renormalize, scale)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend, KernelRoutes(moe_gate_up_tiled=True, moe_route_in_experts=True))
        shared = (moe.SharedExpertWeights(p["sh_gate_up"], p["sh_down"], p.get("sh_gate", 0))
                  if shape.shared_inter else None)
        moe.gate_logits(kc, stream, p["x"], p["w_gate"], p["logits"], 1, shape, shared,
                        p.get("shared_logits", 0), unrounded)
        route = moe.LogitRoute(p["logits"], p.get("shared_logits", 0),
                               moe.Routing(*routing_rule, p.get("bias", 0), unrounded))
        moe.experts(kc, stream, p["x"], p["w_gate_up"], p["w_down"], 0, 0, p["out"], 1, shape,
                    moe.MoeScratch(act=p["act"]), shared=shared, route=route)

    def oracle(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        xs = _f64(inp["x"])
        logits = oracle_logits(xs, _f64(inp["w_gate"]), unrounded)
        r = oracle_router(logits, k, sigmoid, inp.get("bias"), renormalize, scale)
        e = oracle_experts(xs, _f64(inp["w_gate_up"]), _f64(inp["w_down"]), r["topk_ids"],
                           r["topk_weights"])
        got = {"logits": logits, "act": e["act"]}
        delta = e["out"]
        if shape.shared_inter:
            weight = np.ones(1)
            if not ungated:
                g = _bf16(xs @ _f64(inp["sh_gate"]))
                got["shared_logits"], weight = g, _bf16(1 / (1 + np.exp(-g)))
            sh = oracle_shared(xs, _f64(inp["sh_gate_up"]), _f64(inp["sh_down"]), weight, delta,
                               shape.inter)
            got["act"] = np.concatenate([e["act"], sh["act"]], axis=1)
            delta = sh["out"]
        return got | {"out": delta}

    label = f"moe_route_in_experts{' leaf' if heavy else ''} {name}"
    return KernelCase(label, "moe_decode", inputs, outputs, run, oracle,
                      reference_abs_tol=ACT_REFERENCE_TOL)


def _route_in_experts_cases(rng: np.random.Generator) -> list[KernelCase]:
    """Routing inside the batch-1 expert launches: softmax, exact ties at the k-th place and
    an all-tied row (lower index first), sigmoid with a bias and a scale, no renormalization,
    top-k = experts, 256 experts (the wider per-lane tier), a shared expert (its logit, its
    slot's weight), the flagship's per-expert shape (heavy: GPU only), and GLM-4.5's rule
    (float32 logits, an ungated shared expert)."""
    def gate(e: int, h: int, step: float = 1 / 16, span: int = 2
             ) -> tuple[np.ndarray, np.ndarray]:
        return _exact_gate(rng, 1, e, h, step, span)

    small = moe.MoeShape(16, 4, 256, 256)
    zero_gate = (gate(16, 256)[0], np.zeros((16, 256), np.uint16))
    return [
        route_in_experts_case(rng, "softmax t1 e16 k4 h256 i256", small, gate(16, 256)),
        route_in_experts_case(rng, "softmax ties t1 e60 k5 h128 i256",
                              moe.MoeShape(60, 5, 128, 256), gate(60, 128, 1 / 4, 1)),
        route_in_experts_case(rng, "softmax all tied t1 e16 k4", small, zero_gate),
        route_in_experts_case(rng, "sigmoid bias scale 2.5 no renorm t1 e32 k6 h128 i256",
                              moe.MoeShape(32, 6, 128, 256), gate(32, 128), True,
                              bf16_bits_to_f32(random_bf16(rng, (32,), 0.5)), False, 2.5),
        route_in_experts_case(rng, "softmax k=e=8 t1 h128 i256", moe.MoeShape(8, 8, 128, 256),
                              gate(8, 128)),
        route_in_experts_case(rng, "softmax t1 e256 k8 h64 i256", moe.MoeShape(256, 8, 64, 256),
                              gate(256, 64)),
        route_in_experts_case(rng, "shared t1 e16 k4 h256 i256 shared 384",
                              moe.MoeShape(16, 4, 256, 256, 384), gate(16, 256)),
        route_in_experts_case(rng, "shared t1 e32 k8 h2048 i512 shared 512 (qwen3.5-35b-a3b)",
                              moe.MoeShape(32, 8, 2048, 512, 512), gate(32, 2048, 1 / 64, 1),
                              heavy=True),
        # GLM-4.5's routing: a float32 router, sigmoid + bias scaled by 2.5, the shared expert
        # ungated
        route_in_experts_case(rng, "sigmoid unrounded ungated t1 e32 k8 h1024 i256 shared 256",
                              moe.MoeShape(32, 8, 1024, 256, 256),
                              gate(32, 1024, *UNROUNDED_GRID), True,
                              bf16_bits_to_f32(random_bf16(rng, (32,), 0.5)), scale=2.5,
                              unrounded=True, ungated=True)]


def _tiled_gate_up_cases(rng: np.random.Generator, leaf: moe.MoeShape, q35: moe.MoeShape
                         ) -> list[KernelCase]:
    """The tiled batch-1 gate/up (moe_gate_up_gemv_tiles_bf16, ATLAS_MOE_GATE_UP_TILED=1):
    the one-wave rule, blocks of one pair, of a partial last block,
    of a whole slot; ids of another rank and out of range (zeros through the pair loop), a
    partial shared chunk, rows longer than one pass of the block's threads (a partial second
    pass), both full-size shapes; and the two-column entry (ATLAS_MOE_GATE_UP_TILED=0)."""
    def tiles(n: int) -> KernelRoutes:
        return KernelRoutes(moe_gate_up_tiled=True, moe_gate_up_tiles=n)

    leaf_ids = random_ids(rng, 1, 8, 8)
    leaf_ids[0, 2], leaf_ids[0, 6] = -1, 8
    many = moe.MoeShape(experts=40, top_k=28, hidden=64, inter=1008, shared_inter=1040)
    many_ids = rng.permutation(40)[None, :28].astype(np.int32)
    many_ids[0, 0] = -1
    long_rows = moe.MoeShape(experts=4, top_k=2, hidden=4160, inter=64)  # 520 chunks a row
    small = moe.MoeShape(experts=16, top_k=4, hidden=256, inter=96)
    return [
        decode_case(rng, "moe_gate_up tiled t1 leaf 5 pairs a block (partial last), ids -1 "
                    "and 8", leaf, leaf_ids, routes=tiles(5)),
        decode_case(rng, "moe_gate_up tiled t1 leaf 1 pair a block", leaf,
                    random_ids(rng, 1, 8, 8), routes=tiles(1)),
        decode_case(rng, "moe_gate_up tiled t1 e16 k4 i96 a whole slot a block", small,
                    random_ids(rng, 1, 16, 4), routes=tiles(1000)),
        decode_case(rng, "moe_gate_up tiled t1 e40 k28 i1008 shared 1040 7 pairs a block",
                    many, many_ids, routes=tiles(7)),
        decode_case(rng, "moe_gate_up tiled t1 h4160 (two passes a row) 3 pairs a block",
                    long_rows, random_ids(rng, 1, 4, 2), routes=tiles(3)),
        decode_case(rng, "moe_gate_up tiled t1 leaf h2048 i512 k8 shared 512 (qwen3.5-35b-a3b) "
                    "2 pairs a block", q35, random_ids(rng, 1, 8, 8), routes=tiles(2)),
        decode_case(rng, "moe_gate_up tiled t1 leaf top-k = experts, reversed (one wave)",
                    leaf, np.arange(8, dtype=np.int32)[None, ::-1].copy(), routes=tiles(0)),
        decode_case(rng, "moe_gate_up two-column t1 leaf (ATLAS_MOE_GATE_UP_TILED=0)", leaf,
                    random_ids(rng, 1, 8, 8), routes=KernelRoutes(moe_gate_up_tiled=False)),
        decode_case(rng, "moe_gate_up two-column t1 shared 1040 (ATLAS_MOE_GATE_UP_TILED=0)",
                    many, many_ids, routes=KernelRoutes(moe_gate_up_tiled=False)),
    ]


def _down_gemv_cases(rng: np.random.Generator, leaf: moe.MoeShape, q35: moe.MoeShape
                     ) -> list[KernelCase]:
    """The GEMV-shaped down kernel (moe_down_gemv_sum_bf16) at every batch (its default is
    batch 1 only): each chunk count a thread holds (1..3, and 4 in two batches), ids of another
    rank and out of range, a partial shared chunk, both full-size shapes, blocks of one tile,
    of the one-wave rule's and of 3 with a partial last block; each chunk-step count again on
    the twin holding that count's code (the default; ATLAS_MOE_DOWN_ONE_STEP=0 the general
    kernel the other cases run); and the row-group kernel
    at batch 1 (ATLAS_MOE_DOWN_GEMV=0)."""
    gemv = KernelRoutes(moe_down_gemv_max_m=8, moe_down_one_step=False)
    one_step = KernelRoutes(moe_down_gemv_max_m=8)

    def tiles(n: int) -> KernelRoutes:  # n tiles of 4 rows a block
        return KernelRoutes(moe_down_gemv_max_m=8, moe_down_gemv_tiles=n, moe_down_one_step=False)

    two = moe.MoeShape(experts=8, top_k=2, hidden=512, inter=512)       # 128 chunks a row
    six = moe.MoeShape(experts=8, top_k=6, hidden=256, inter=512)       # 384: two a thread
    # 20 routed + 2 shared slots of 64 chunks (the second shared slot's 16 live: columns 512
    # .. 639) = 1,408 chunks a row: batches of 4 a thread, the second partial
    long = moe.MoeShape(experts=24, top_k=20, hidden=128, inter=512, shared_inter=640)
    bad = random_ids(rng, 3, 8, 6)
    bad[0, 1] = -1  # another rank's expert
    bad[2, 5] = 8   # out of range
    return [
        down_case(rng, "moe_down_gemv_sum leaf t1 h2048 i768 k8", leaf, random_ids(rng, 1, 8, 8),
                  routes=gemv),
        down_case(rng, "moe_down_gemv_sum shared t1 h2048 i512 k8 (qwen3.5-35b-a3b)", q35,
                  random_ids(rng, 1, 8, 8), routes=gemv),
        down_case(rng, "moe_down_gemv_sum shared t8 h2048 i512 k8 (qwen3.5-35b-a3b)", q35,
                  random_ids(rng, 8, 8, 8), routes=gemv),
        down_case(rng, "moe_down_gemv_sum t2 e8 k2 h512 i512 (one chunk a thread)", two,
                  random_ids(rng, 2, 8, 2), routes=gemv),
        down_case(rng, "moe_down_gemv_sum t3 e8 k6 h256 i512 invalid ids", six, bad,
                  routes=gemv),
        down_case(rng, "moe_down_gemv_sum shared t2 e24 k20 i512 shared 640 (two batches, two "
                  "tiles a block)", long, random_ids(rng, 2, 24, 20), routes=tiles(2)),
        down_case(rng, "moe_down_gemv_sum leaf t1 h2048 i768 k8 (a tile a block)", leaf,
                  random_ids(rng, 1, 8, 8), routes=tiles(1)),
        down_case(rng, "moe_down_gemv_sum shared t2 h2048 i512 k8 (3 tiles a block, the last 2)",
                  q35, random_ids(rng, 2, 8, 8), routes=tiles(3)),
        decode_case(rng, "moe_decode leaf t1 h2048 i768 k8 (down gemv)", leaf,
                    random_ids(rng, 1, 8, 8), routes=gemv),
        decode_case(rng, "moe_decode leaf shared t1 h2048 i512 k8 (qwen3.5-35b-a3b, down gemv)",
                    q35, random_ids(rng, 1, 8, 8), routes=gemv),
        down_case(rng, "moe_down_gemv_sum t2 e8 k2 h512 i512 one-step s1", two,
                  random_ids(rng, 2, 8, 2), routes=one_step),
        down_case(rng, "moe_down_gemv_sum t3 e8 k6 h256 i512 invalid ids one-step s2", six, bad,
                  routes=one_step),
        down_case(rng, "moe_down_gemv_sum leaf t1 h2048 i768 k8 one-step s3", leaf,
                  random_ids(rng, 1, 8, 8), routes=one_step),
        down_case(rng, "moe_down_gemv_sum shared t1 h2048 i512 k8 (qwen3.5-35b-a3b) one-step s3",
                  q35, random_ids(rng, 1, 8, 8), routes=one_step),
        down_case(rng, "moe_down_gemv_sum shared t2 e24 k20 i512 shared 640 one-step s4", long,
                  random_ids(rng, 2, 24, 20), routes=one_step),
        down_case(rng, "moe_down_sum leaf t1 h2048 i768 k8 (row groups)", leaf,
                  random_ids(rng, 1, 8, 8), routes=KernelRoutes(moe_down_gemv=False))
    ]


# ---- grouped path -------------------------------------------------------------------------
def pipeline_case(rng: np.random.Generator, name: str, shape: moe.MoeShape, ids: np.ndarray,
                  sm90: bool = False, epi: Epilogue | None = None,
                  x_scale: float = 1.0) -> KernelCase:
    """ops.moe.experts end to end (decode kernels or align + grouped GEMMs + combine, by the
    token count), with every intermediate buffer checked where it is defined; `sm90` runs the
    grouped GEMMs on the wgmma kernels (module moe_grouped_sm90), else on mma.sync. `epi`:
    gpt-oss's expert epilogue (the entries' epilogue twins), x scaled by `x_scale` so the
    clamped GLU's limits bind on a share of the gate and up values."""
    tokens = len(ids)
    slots = tokens * shape.top_k
    layout = moe.scratch_layout(shape, tokens)
    grouped = not moe.uses_decode_kernels(tokens)
    tiles = moe.max_tiles(slots, shape.experts)
    w_gu, w_d = expert_weights(rng, shape)
    inputs = {"x": random_bf16(rng, (tokens, shape.hidden), x_scale), "w_gate_up": w_gu,
              "w_down": w_d, "topk_ids": ids.astype(np.int32),
              "topk_weights": _routing_weights(rng, tokens, shape.top_k)}
    if epi is not None and epi.biases:
        inputs["gate_up_bias"] = random_bf16(rng, (shape.experts, 2 * shape.inter), 0.5)
        inputs["down_bias"] = random_bf16(rng, (shape.experts, shape.hidden), 0.5)
    outputs = {"out": OutputSpec(DType.BF16, (tokens, shape.hidden)),
               "act": OutputSpec(DType.BF16, (layout.act // 2 // shape.inter, shape.inter))}
    masks: dict[str, np.ndarray] = {}
    sorted_slots, tile_expert = oracle_align(ids.reshape(-1), shape.experts, tiles)
    valid = ((ids >= 0) & (ids < shape.experts)).reshape(-1)
    if grouped:
        outputs["y"] = OutputSpec(DType.BF16, (slots, shape.hidden))
        outputs["sorted_slots"] = OutputSpec(DType.I32, (tiles * moe.MOE_TILE_M,))
        outputs["tile_expert"] = OutputSpec(DType.I32, (tiles,))
        # act rows of slots only: a tile's padding rows hold the GLU of zero sums (of the
        # biases, with gpt-oss's epilogue), which the down GEMM's padding rows drop
        masks["act"] = np.repeat((sorted_slots >= 0)[:, None], shape.inter, axis=1)
        masks["y"] = np.repeat(valid[:, None], shape.hidden, axis=1)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        scratch = moe.MoeScratch(p["act"], p.get("y", 0), p.get("sorted_slots", 0),
                                 p.get("tile_expert", 0), max_tokens=tokens)
        epilogue = (moe.NO_EPILOGUE if epi is None else moe.ExpertEpilogue(
            p.get("gate_up_bias", 0), p.get("down_bias", 0), epi.alpha, epi.limit))
        moe.experts(KernelCache(backend), stream, p["x"], p["w_gate_up"], p["w_down"],
                    p["topk_ids"], p["topk_weights"], p["out"], tokens, shape, scratch, sm90,
                    epilogue=epilogue)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        r = oracle_experts(_f64(x["x"]), _f64(x["w_gate_up"]), _f64(x["w_down"]),
                           x["topk_ids"], x["topk_weights"], epi,
                           _f64(x["gate_up_bias"]) if "gate_up_bias" in x else None,
                           _f64(x["down_bias"]) if "down_bias" in x else None)
        out = {"out": r["out"], "y": r["y"].reshape(slots, shape.hidden),
               "sorted_slots": sorted_slots, "tile_expert": tile_expert}
        act_slots = r["act"].reshape(slots, shape.inter)
        if grouped:
            act = np.zeros((tiles * moe.MOE_TILE_M, shape.inter))
            live = sorted_slots >= 0
            act[live] = act_slots[sorted_slots[live]]
            out["act"] = act
        else:
            out["act"] = act_slots
        return out

    module = ("moe_grouped_sm90" if sm90 else "moe_grouped") if grouped else "moe_decode"
    slack = act_flip_slack(_f64(inputs["x"]), _f64(w_gu), ids, epi,
                           _f64(inputs["gate_up_bias"]) if "gate_up_bias" in inputs else None)
    if grouped:
        live = sorted_slots >= 0
        rows = np.zeros((tiles * moe.MOE_TILE_M, shape.inter))
        rows[live] = slack[sorted_slots[live]]
        slack = rows
    return KernelCase(name, module, inputs, outputs, run, oracle, compare_mask=masks,
                      reference_abs_tol=ACT_REFERENCE_TOL, reference_slack={"act": slack})


def combine_case(rng: np.random.Generator, name: str, shape: moe.MoeShape, ids: np.ndarray
                 ) -> KernelCase:
    """moe_combine alone: y rows of invalid slots hold NaN and must not leak into out."""
    tokens = len(ids)
    y = random_bf16(rng, (tokens * shape.top_k, shape.hidden))
    y[~((ids >= 0) & (ids < shape.experts)).reshape(-1)] = 0x7FC0  # bf16 NaN
    inputs = {"y": y, "topk_ids": ids.astype(np.int32),
              "topk_weights": _routing_weights(rng, tokens, shape.top_k)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        moe.combine(KernelCache(backend), stream, p["y"], p["topk_ids"], p["topk_weights"],
                    p["out"], tokens, shape)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ys = _f64(x["y"]).reshape(tokens, shape.top_k, shape.hidden)
        out = np.zeros((tokens, shape.hidden))
        for t in range(tokens):
            for j, e in enumerate(x["topk_ids"][t]):
                if 0 <= e < shape.experts:
                    out[t] += float(x["topk_weights"][t, j]) * ys[t, j]
        return {"out": out}

    return KernelCase(name, "moe_grouped", inputs,
                      {"out": OutputSpec(DType.BF16, (tokens, shape.hidden))}, run, oracle)


def _grouped_pipelines(rng: np.random.Generator, sm90: bool) -> list[KernelCase]:
    """The grouped path's edge cases, on the mma.sync or the wgmma GEMMs."""
    tag = "sm90" if sm90 else "grouped"
    small = moe.MoeShape(experts=16, top_k=4, hidden=256, inter=96)
    skewed = random_ids(rng, 40, 16, 4)
    skewed[:, 0] = 3  # expert 3 gets every token (40 slots): several tokens per tile row set
    sparse = np.stack([rng.permutation(4)[:2] * 17 for _ in range(24)])  # 4 of 64 experts
    bad = random_ids(rng, 20, 16, 4)
    bad[::3, 1] = -1
    one = np.tile(np.arange(4, dtype=np.int32) + 9, (70, 1))  # 70 tokens, the same 4 experts
    # the leaf shape (hidden 2048, inter 768, top-8) with 8 experts
    leaf = moe.MoeShape(experts=8, top_k=8, hidden=2048, inter=768)
    # a 512-token prefill chunk routed over the leaf's 128 experts, top-8 (4096 slots, up to
    # 192 tiles, expert ids past 64): every token's first choice among experts 120..127, so
    # those take ~64-130 slots each (several tiles) while the rest share the others
    wide = moe.MoeShape(experts=128, top_k=8, hidden=256, inter=96)
    chunk = np.stack([np.concatenate([[f], rng.permutation(np.delete(np.arange(128), f))[:7]])
                      for f in 120 + rng.integers(0, 8, 512)]).astype(np.int32)
    return [pipeline_case(rng, f"moe_experts {tag} t40 e16 k4 (skewed)", small, skewed, sm90),
            pipeline_case(rng, f"moe_experts {tag} t24 e64 k2 (60 empty experts)",
                          moe.MoeShape(64, 2, 128, 64), sparse, sm90),
            pipeline_case(rng, f"moe_experts {tag} t20 invalid ids", small, bad, sm90),
            pipeline_case(rng, f"moe_experts {tag} t70 every token to the same 4 experts",
                          small, one, sm90),
            pipeline_case(rng, f"moe_experts {tag} t17 k=e=4 h208 i144",
                          moe.MoeShape(4, 4, 208, 144), random_ids(rng, 17, 4, 4), sm90),
            # inter 608: the last gate/up column block is partly past inter in both kernels;
            # hidden 320: a partial down column block; h208: K ends inside a k-tile
            pipeline_case(rng, f"moe_experts {tag} t33 e6 k3 h320 i608",
                          moe.MoeShape(6, 3, 320, 608), random_ids(rng, 33, 6, 3), sm90),
            pipeline_case(rng, f"moe_experts leaf {tag} t16 h2048 i768 k8", leaf,
                          random_ids(rng, 16, 8, 8), sm90),
            pipeline_case(rng, f"moe_experts {tag} t512 e128 k8 (a prefill chunk)", wide, chunk,
                          sm90)] + epilogue_pipelines(rng, tag, sm90, grouped=True)


#: gpt-oss's tiny fixture's per-expert shape (hidden 128, inter 32, top-4 of 8), and
#: gpt-oss-20b's (hidden 2880 = 360 chunks, inter 2880) with 2 of its experts
GPT_OSS_TINY = moe.MoeShape(experts=8, top_k=4, hidden=128, inter=32)
GPT_OSS_20B = moe.MoeShape(experts=2, top_k=2, hidden=2880, inter=2880)


def epilogue_pipelines(rng: np.random.Generator, tag: str, sm90: bool, grouped: bool
                       ) -> list[KernelCase]:
    """ops.moe.experts with gpt-oss's expert epilogue: the published GLU (limit 7, x scaled
    so that both clamps bind), the tiny fixture's (limit 2), the biases without the GLU and
    the GLU without the biases, an id of another rank; prefill chunks (`grouped`) or decode
    batches (the epilogue twins of moe_gate_up_silu / moe_down_sum)."""
    published, tiny = Epilogue(), Epilogue(limit=2.0)
    n = (lambda t: t + 9) if grouped else (lambda t: t)  # tokens past DECODE_MAX_TOKENS
    bad = random_ids(rng, n(3), 8, 4)
    bad[1, 2] = -1
    return [pipeline_case(rng, f"moe_experts {tag} gpt-oss t{n(3)} e8 k4 h128 i32 limit 7",
                          GPT_OSS_TINY, random_ids(rng, n(3), 8, 4), sm90, published, 6.0),
            pipeline_case(rng, f"moe_experts {tag} gpt-oss t{n(1)} e8 k4 h128 i32 limit 2",
                          GPT_OSS_TINY, random_ids(rng, n(1), 8, 4), sm90, tiny, 2.0),
            pipeline_case(rng, f"moe_experts {tag} gpt-oss t{n(8)} biases silu",
                          GPT_OSS_TINY, random_ids(rng, n(8), 8, 4), sm90,
                          Epilogue(limit=0.0)),
            pipeline_case(rng, f"moe_experts {tag} gpt-oss t{n(2)} glu no biases",
                          GPT_OSS_TINY, random_ids(rng, n(2), 8, 4), sm90,
                          Epilogue(biases=False), 6.0),
            pipeline_case(rng, f"moe_experts {tag} gpt-oss t{n(3)} invalid id", GPT_OSS_TINY,
                          bad, sm90, published, 6.0),
            pipeline_case(rng, f"moe_experts leaf {tag} gpt-oss t{n(1)} h2880 i2880 k2 "
                          "(gpt-oss-20b)", GPT_OSS_20B, random_ids(rng, n(1), 2, 2), sm90,
                          published, 6.0)]


@kernel_cases("moe_grouped")
def grouped_cases(rng: np.random.Generator) -> list[KernelCase]:
    small = moe.MoeShape(experts=16, top_k=4, hidden=256, inter=96)
    bad = random_ids(rng, 9, 16, 4)
    bad[::3, 1] = -1
    return _grouped_pipelines(rng, sm90=False) + [
        pipeline_case(rng, "moe_experts decode t6 e16 k4", small, random_ids(rng, 6, 16, 4)),
        *epilogue_pipelines(rng, "decode", False, grouped=False),
        combine_case(rng, "moe_combine t9 k4 h264 invalid ids", moe.MoeShape(16, 4, 264, 16),
                     bad)]


@kernel_cases("moe_grouped_sm90")
def grouped_sm90_cases(rng: np.random.Generator) -> list[KernelCase]:
    return _grouped_pipelines(rng, sm90=True)


def is_heavy(case: KernelCase) -> bool:
    """Cases whose host reference takes seconds (the leaf shapes): CPU tests may skip them."""
    return " leaf " in case.name and case.module != "moe_router"

