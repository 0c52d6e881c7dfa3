"""References for the mixture-of-experts kernels (kernels/*/common/moe_*.cu).

The contract (shapes, layouts, the two expert paths) is written out in `ops/moe.py`; this
module is its executable form. In short:

* Router: the k experts with the largest selection keys, best first, equal keys to the lower
  expert index (torch.topk's order). Softmax scoring selects on the logit itself (softmax is
  strictly increasing, so this is the top-k of the exact probabilities) and weights by
  softmax over all experts; sigmoid scoring selects on float32(sigmoid(logit)) + bias and
  weights by the unbiased sigmoid. With `renormalize` the k weights are divided by
  (their sum + 1e-20) (norm_topk_prob; the 1e-20 keeps an all-underflowed sigmoid row at
  zero instead of NaN and cannot change a softmax sum, which is at least k / experts); then
  every weight is multiplied by `scale`. Computed in float64, stored as float32.
* Fused decode router: the logits are the bf16-rounded products widened or, `unrounded` (a
  float32 router), the exact sums rounded once to float32 (the unrounded GEMV's values); a
  shared expert's gate logit is always bf16-rounded, and a null shared gate (an ungated
  shared expert) weights its slots 1.
* Experts: g and u are the bf16-rounded products of x with the expert's gate and up rows,
  act = bf16(bf16(silu(g)) * u) (the dense MLP's gate_up GEMV + silu_mul), each expert's down
  product is rounded to bf16 (what transformers' per-expert Linear returns), and the token's
  output is bf16(sum_j weight_j * y_j), summed exactly (float64; the kernels use float32 in
  slot order). The decode kernels and the grouped path compute the same values, so a token
  gives the same result in a batch of 1 and of 100 here.
* The expert epilogue (gpt-oss; the entries taking expert_bias / glu_alpha / glu_limit): a
  per-expert bias added to each bf16 product in bf16, g = bf16(g + b_gate), u = bf16(u +
  b_up), y = bf16(y + b_down) (transformers' grouped experts add the bias after the product),
  and where glu_limit > 0 the clamped GLU in transformers' bf16 steps (`clamped_glu`). A
  shared expert's slots keep the plain SwiGLU.
* Router logit bias (moe_topk_softmax_f32's logit_bias, gpt-oss's router): the float32
  logits plus the bf16 bias, rounded once to bf16, are the keys and the softmax's logits.
* An expert id outside [0, experts) contributes nothing (zeros in act, skipped in sums, not
  placed by the align kernel): routing never produces one, expert parallelism may.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import (MOE_ADD_RMSNORM_GATE_TOPK_SIGMOID, MOE_ADD_RMSNORM_GATE_TOPK_SOFTMAX,
                          MOE_DOWN_SUM_BIAS, MOE_GATE_UP_EPILOGUE,
                          MOE_GROUPED_DOWN_BIAS, MOE_GROUPED_DOWN_SM90_BIAS,
                          MOE_GROUPED_GATE_UP_EPILOGUE, MOE_GROUPED_GATE_UP_SM90_EPILOGUE,
                          MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SIGMOID,
                          MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SOFTMAX,
                          MOE_ALIGN, MOE_COMBINE, MOE_GATE_UP_GEMV,
                          MOE_GATE_UP_GEMV_SINGLE, MOE_GATE_UP_GEMV_TILES,
                          MOE_GATE_UP_GEMV_TILES_ROUTE, MOE_DOWN_GEMV_ROUTE_SUM,
                          MOE_GATE_LOGITS, MOE_DOWN_GEMV_SUM, MOE_DOWN_GEMV_SUM_STEPS,
                          MOE_DOWN_SUM,
                          MOE_GATE_TOPK_SIGMOID,
                          MOE_GATE_TOPK_SOFTMAX, MOE_GATE_UP_SILU,
                          MOE_GROUPED_DOWN, MOE_GROUPED_DOWN_SM90, MOE_GROUPED_GATE_UP,
                          MOE_GROUPED_GATE_UP_SM90, MOE_TOPK_SIGMOID, MOE_TOPK_SOFTMAX,
                          MOE_TOPK_SOFTMAX_BIAS)
from ..ops.moe import MOE_TILE_M, ROUTE_IN_EXPERTS_MAX_EXPERTS, down_gemv_steps
from . import HostMemory, reference, widened_f64
from .rmsnorm import add_rmsnorm_bf16, add_rmsnorm_offset_bf16

#: added to the sum of the selected weights before renormalizing
RENORM_EPS = 1e-20


# ---- router -------------------------------------------------------------------------------
def select_topk(keys: np.ndarray, top_k: int) -> np.ndarray:
    """i32 [tokens, top_k]: indices of the top_k largest keys per row, best first, equal
    keys in ascending index order (a stable sort of the negated keys)."""
    return np.argsort(-keys, axis=1, kind="stable")[:, :top_k].astype(np.int32)


def finish_weights(chosen: np.ndarray, renormalize: bool, scale: float) -> np.ndarray:
    """float32 routing weights from the float64 scores of the chosen experts."""
    if renormalize:
        chosen = chosen / (chosen.sum(axis=1, keepdims=True) + RENORM_EPS)
    return (chosen * np.float64(np.float32(scale))).astype(np.float32)


def topk_softmax(logits: np.ndarray, top_k: int, renormalize: bool, scale: float,
                 logit_bias: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ids, weights) of softmax routing from float32 logits [tokens, experts]; with a
    `logit_bias` (float32 [experts], bf16 values) the logits are bf16(logits + bias) first
    (a router Linear with a bias: one rounding of the float32 sum)."""
    if logit_bias is not None:
        logits = _bf16(logits.astype(np.float32) + logit_bias[None, :]).astype(np.float32)
    ids = select_topk(logits, top_k)
    x = logits.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    probs = e / e.sum(axis=1, keepdims=True)
    return ids, finish_weights(np.take_along_axis(probs, ids, axis=1), renormalize, scale)


def sigmoid_scores(logits: np.ndarray) -> np.ndarray:
    """float64 sigmoid of float32 logits, through tanh (no overflow for any input)."""
    return 0.5 + 0.5 * np.tanh(0.5 * logits.astype(np.float64))


def topk_sigmoid(logits: np.ndarray, bias: np.ndarray | None, top_k: int, renormalize: bool,
                 scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(ids, weights) of sigmoid routing: chosen by f32(sigmoid) + bias (f32 arithmetic, as
    transformers adds the float32 bias to the float32 scores), weighted by the sigmoid."""
    scores = sigmoid_scores(logits)
    keys = scores.astype(np.float32)
    if bias is not None:
        keys = keys + bias.astype(np.float32)[None, :]
    ids = select_topk(keys, top_k)
    return ids, finish_weights(np.take_along_axis(scores, ids, axis=1), renormalize, scale)


@reference(MOE_TOPK_SOFTMAX)
@reference(MOE_TOPK_SOFTMAX_BIAS)
def moe_topk_softmax_f32(mem: HostMemory, grid: Dim3, block: Dim3, logits: int, topk_ids: int,
                         topk_weights: int, tokens: int, experts: int, top_k: int,
                         renormalize: int, scale: float, logit_bias: int = 0) -> None:
    """(Only moe_topk_softmax_bias_f32 takes logit_bias: the plain entry keeps its default.)"""
    x = mem.view(logits, np.float32, tokens * experts).reshape(tokens, experts)
    bias = (bf16_bits_to_f32(mem.view(logit_bias, np.uint16, experts)) if logit_bias
            else None)
    ids, w = topk_softmax(x, top_k, bool(renormalize), scale, bias)
    mem.view(topk_ids, np.int32, tokens * top_k)[:] = ids.reshape(-1)
    mem.view(topk_weights, np.float32, tokens * top_k)[:] = w.reshape(-1)


@reference(MOE_TOPK_SIGMOID)
def moe_topk_sigmoid_f32(mem: HostMemory, grid: Dim3, block: Dim3, logits: int, bias: int,
                         topk_ids: int, topk_weights: int, tokens: int, experts: int,
                         top_k: int, renormalize: int, scale: float) -> None:
    x = mem.view(logits, np.float32, tokens * experts).reshape(tokens, experts)
    b = mem.view(bias, np.float32, experts) if bias else None
    ids, w = topk_sigmoid(x, b, top_k, bool(renormalize), scale)
    mem.view(topk_ids, np.int32, tokens * top_k)[:] = ids.reshape(-1)
    mem.view(topk_weights, np.float32, tokens * top_k)[:] = w.reshape(-1)


def _gate_logits(mem: HostMemory, x: int, w_gate: int, logits: int, tokens: int,
                 experts: int, hidden: int, unrounded: int = 0) -> None:
    """float32 logits [tokens, experts] = bf16(x . w_gate) (exact sums, rounded once;
    `unrounded`: rounded to float32 only), stored at `logits` as the fused router's kernel
    leaves them."""
    xs = _act_in(mem, x, tokens, hidden)
    w = widened_f64(mem, w_gate, experts * hidden).reshape(experts, hidden)
    sums = xs @ w.T
    mem.view(logits, np.float32, tokens * experts)[:] = (
        sums if unrounded else _bf16(sums)).astype(np.float32).reshape(-1)


def _shared_gate_logits(mem: HostMemory, x: int, shared_gate: int, shared_logits: int,
                        tokens: int, hidden: int, shared_slots: int) -> int:
    """The shared expert's gate logits (bf16-rounded: a bf16 Linear's) at `shared_logits`
    where it has a gate; their address for the slots' weights, or 0 (ungated: weight 1)."""
    if not (shared_slots and shared_gate):
        return 0
    _gate_logits(mem, x, shared_gate, shared_logits, tokens, 1, hidden)
    return shared_logits


def _gate_route(mem: HostMemory, x: int, w_gate: int, shared_gate: int, bias: int, logits: int,
                shared_logits: int, topk_ids: int, topk_weights: int, tokens: int,
                experts: int, hidden: int, top_k: int, shared_slots: int, renormalize: int,
                scale: float, sigmoid: bool, unrounded: int) -> None:
    """The fused router: logits, the top-k into rows of top_k + shared_slots, and the shared
    expert's slots (id experts + c, weight bf16(sigmoid(bf16(x . shared_gate))), or 1 with no
    shared gate)."""
    _gate_logits(mem, x, w_gate, logits, tokens, experts, hidden, unrounded)
    gate = _shared_gate_logits(mem, x, shared_gate, shared_logits, tokens, hidden, shared_slots)
    ids, w = _route_logits(mem, logits, gate, bias, tokens, experts, top_k, shared_slots,
                           renormalize, scale, sigmoid)
    slots = top_k + shared_slots
    mem.view(topk_ids, np.int32, tokens * slots)[:] = ids.reshape(-1)
    mem.view(topk_weights, np.float32, tokens * slots)[:] = w.reshape(-1)


def _route_logits(mem: HostMemory, logits: int, shared_logits: int, bias: int, tokens: int,
                  experts: int, top_k: int, shared_slots: int, renormalize: int, scale: float,
                  sigmoid: bool) -> tuple[np.ndarray, np.ndarray]:
    """(ids i32, weights f32) [tokens, top_k + shared_slots] from the logits at `logits`:
    the top-k, then the shared expert's slots (id experts + c, weight
    bf16(sigmoid(shared logit)), or 1 where `shared_logits` is 0: an ungated shared
    expert)."""
    lg = mem.view(logits, np.float32, tokens * experts).reshape(tokens, experts)
    if sigmoid:
        b = mem.view(bias, np.float32, experts) if bias else None
        ids, w = topk_sigmoid(lg, b, top_k, bool(renormalize), scale)
    else:
        ids, w = topk_softmax(lg, top_k, bool(renormalize), scale)
    if not shared_slots:
        return ids, w
    sh_ids = np.broadcast_to(experts + np.arange(shared_slots, dtype=np.int32),
                             (tokens, shared_slots))
    weight = (_bf16(sigmoid_scores(mem.view(shared_logits, np.float32, tokens)))
              if shared_logits else np.ones(tokens))
    sh_w = np.broadcast_to(weight[:, None].astype(np.float32), (tokens, shared_slots))
    return np.concatenate([ids, sh_ids], axis=1), np.concatenate([w, sh_w], axis=1)


@reference(MOE_GATE_LOGITS)
def moe_gate_logits_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w_gate: int,
                         shared_gate: int, logits: int, shared_logits: int, tokens: int,
                         experts: int, hidden: int, shared_slots: int, unrounded: int) -> None:
    _gate_logits(mem, x, w_gate, logits, tokens, experts, hidden, unrounded)
    _shared_gate_logits(mem, x, shared_gate, shared_logits, tokens, hidden, shared_slots)


@reference(MOE_GATE_TOPK_SOFTMAX)
def moe_gate_topk_softmax_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w_gate: int,
                               shared_gate: int, logits: int, shared_logits: int, topk_ids: int,
                               topk_weights: int, counter: int, tokens: int, experts: int,
                               hidden: int, top_k: int, shared_slots: int, renormalize: int,
                               scale: float, unrounded: int) -> None:
    _gate_route(mem, x, w_gate, shared_gate, 0, logits, shared_logits, topk_ids, topk_weights,
                tokens, experts, hidden, top_k, shared_slots, renormalize, scale, False,
                unrounded)


@reference(MOE_GATE_TOPK_SIGMOID)
def moe_gate_topk_sigmoid_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w_gate: int,
                               shared_gate: int, bias: int, logits: int, shared_logits: int,
                               topk_ids: int, topk_weights: int, counter: int, tokens: int,
                               experts: int, hidden: int, top_k: int, shared_slots: int,
                               renormalize: int, scale: float, unrounded: int) -> None:
    _gate_route(mem, x, w_gate, shared_gate, bias, logits, shared_logits, topk_ids,
                topk_weights, tokens, experts, hidden, top_k, shared_slots, renormalize, scale,
                True, unrounded)


def _add_norm_route(mem: HostMemory, grid: Dim3, block: Dim3, residual: int, delta: int,
                    norm_w: int, normed: int, hidden: int, tokens: int, eps: float,
                    offset: int) -> None:
    """The NormIn routers' add_rmsnorm (offset: its zero-centred form) into normed."""
    add_norm = add_rmsnorm_offset_bf16 if offset else add_rmsnorm_bf16
    add_norm(mem, grid, block, residual, delta, norm_w, normed, tokens, hidden, eps)


@reference(MOE_ADD_RMSNORM_GATE_TOPK_SOFTMAX)
def moe_add_rmsnorm_gate_topk_softmax_bf16(
        mem: HostMemory, grid: Dim3, block: Dim3, residual: int, delta: int, norm_w: int,
        normed: int, w_gate: int, shared_gate: int, logits: int, shared_logits: int,
        topk_ids: int, topk_weights: int, counter: int, tokens: int, experts: int, hidden: int,
        top_k: int, shared_slots: int, renormalize: int, scale: float, unrounded: int,
        eps: float, offset: int) -> None:
    _add_norm_route(mem, grid, block, residual, delta, norm_w, normed, hidden, tokens, eps,
                    offset)
    moe_gate_topk_softmax_bf16(mem, grid, block, normed, w_gate, shared_gate, logits,
                               shared_logits, topk_ids, topk_weights, counter, tokens, experts,
                               hidden, top_k, shared_slots, renormalize, scale, unrounded)


@reference(MOE_ADD_RMSNORM_GATE_TOPK_SIGMOID)
def moe_add_rmsnorm_gate_topk_sigmoid_bf16(
        mem: HostMemory, grid: Dim3, block: Dim3, residual: int, delta: int, norm_w: int,
        normed: int, w_gate: int, shared_gate: int, bias: int, logits: int, shared_logits: int,
        topk_ids: int, topk_weights: int, counter: int, tokens: int, experts: int, hidden: int,
        top_k: int, shared_slots: int, renormalize: int, scale: float, unrounded: int,
        eps: float, offset: int) -> None:
    _add_norm_route(mem, grid, block, residual, delta, norm_w, normed, hidden, tokens, eps,
                    offset)
    moe_gate_topk_sigmoid_bf16(mem, grid, block, normed, w_gate, shared_gate, bias, logits,
                               shared_logits, topk_ids, topk_weights, counter, tokens, experts,
                               hidden, top_k, shared_slots, renormalize, scale, unrounded)


@reference(MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SOFTMAX)
def moe_add_rmsnorm_gate_topk_cluster_softmax_bf16(
        mem: HostMemory, grid: Dim3, block: Dim3, residual: int, delta: int, norm_w: int,
        normed: int, w_gate: int, shared_gate: int, logits: int, shared_logits: int,
        topk_ids: int, topk_weights: int, tokens: int, experts: int, hidden: int, top_k: int,
        shared_slots: int, renormalize: int, scale: float, unrounded: int, eps: float,
        offset: int) -> None:
    """The ticket router's values (the cluster only changes how the logits meet)."""
    moe_add_rmsnorm_gate_topk_softmax_bf16(
        mem, grid, block, residual, delta, norm_w, normed, w_gate, shared_gate, logits,
        shared_logits, topk_ids, topk_weights, 0, tokens, experts, hidden, top_k, shared_slots,
        renormalize, scale, unrounded, eps, offset)


@reference(MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SIGMOID)
def moe_add_rmsnorm_gate_topk_cluster_sigmoid_bf16(
        mem: HostMemory, grid: Dim3, block: Dim3, residual: int, delta: int, norm_w: int,
        normed: int, w_gate: int, shared_gate: int, bias: int, logits: int, shared_logits: int,
        topk_ids: int, topk_weights: int, tokens: int, experts: int, hidden: int, top_k: int,
        shared_slots: int, renormalize: int, scale: float, unrounded: int, eps: float,
        offset: int) -> None:
    moe_add_rmsnorm_gate_topk_sigmoid_bf16(
        mem, grid, block, residual, delta, norm_w, normed, w_gate, shared_gate, bias, logits,
        shared_logits, topk_ids, topk_weights, 0, tokens, experts, hidden, top_k, shared_slots,
        renormalize, scale, unrounded, eps, offset)


# ---- expert products ----------------------------------------------------------------------
def _bf16(x: np.ndarray) -> np.ndarray:
    """float64 values rounded to bf16 (through float32: the kernels' f32 result rounded)."""
    return bf16_bits_to_f32(f32_to_bf16_bits(x.astype(np.float32))).astype(np.float64)


def swiglu_rows(x: np.ndarray, w_gate_up: np.ndarray, epilogue: "Epilogue | None" = None,
                expert: int = 0) -> np.ndarray:
    """bf16-valued float64 act [rows, inter] of float64 x [rows, hidden] through one
    expert's gate/up weights [2 inter, hidden]; with `epilogue`, expert `expert`'s gate/up
    bias and its GLU."""
    inter = w_gate_up.shape[0] // 2
    gu = _bf16(x @ w_gate_up.T)
    if epilogue is not None and epilogue.gate_up_bias is not None:
        gu = _bf16(gu + epilogue.gate_up_bias[expert][None, :])
    g, u = gu[:, :inter], gu[:, inter:]
    if epilogue is not None and epilogue.limit > 0:
        return clamped_glu(g, u, epilogue.alpha, epilogue.limit)
    g = g.astype(np.float32)
    with np.errstate(over="ignore"):  # exp(-g) -> inf gives silu = -0, as on the GPU
        silu = _bf16(g / (np.float32(1.0) + np.exp(-g)))
    return _bf16(silu * u)


def clamped_glu(g: np.ndarray, u: np.ndarray, alpha: float, limit: float) -> np.ndarray:
    """gpt-oss's GLU of bf16-valued g and u, in transformers' bf16 steps: g = min(g, limit),
    u = clamp(u, -limit, limit), act = bf16(bf16(u + 1) * bf16(g * bf16(sigmoid(bf16(g *
    alpha))))) (alpha and limit as float32), float32 arithmetic between the roundings."""
    lim, a = np.float32(limit), np.float32(alpha)
    g = _bf16(np.minimum(g.astype(np.float32), lim)).astype(np.float32)
    u = _bf16(np.clip(u.astype(np.float32), -lim, lim)).astype(np.float32)
    t = _bf16(g * a).astype(np.float32)
    with np.errstate(over="ignore"):
        sig = _bf16(np.float32(1.0) / (np.float32(1.0) + np.exp(-t))).astype(np.float32)
    glu = _bf16(g * sig).astype(np.float32)
    return _bf16(_bf16(u + np.float32(1.0)).astype(np.float32) * glu)


class Epilogue:
    """The expert epilogue's values (ops.moe.ExpertEpilogue's pointers read): gate_up_bias
    float64 [experts, 2 inter] or None, down_bias [experts, hidden] or None, alpha, limit."""

    def __init__(self, mem: HostMemory, experts: int, hidden: int, inter: int,
                 gate_up_bias: int = 0, down_bias: int = 0, alpha: float = 0.0,
                 limit: float = 0.0) -> None:
        self.gate_up_bias = (widened_f64(mem, gate_up_bias, experts * 2 * inter)
                             .reshape(experts, 2 * inter) if gate_up_bias else None)
        self.down_bias = (widened_f64(mem, down_bias, experts * hidden)
                          .reshape(experts, hidden) if down_bias else None)
        self.alpha, self.limit = float(alpha), float(limit)


def _valid(ids: np.ndarray, experts: int) -> np.ndarray:
    return (ids >= 0) & (ids < experts)


class ExpertWeights:
    """Widened views of the packed expert weights at two device addresses."""

    def __init__(self, mem: HostMemory, w_gate_up: int, w_down: int, experts: int, hidden: int,
                 inter: int) -> None:
        self.gate_up = (widened_f64(mem, w_gate_up, experts * 2 * inter * hidden)
                        .reshape(experts, 2 * inter, hidden) if w_gate_up else None)
        self.down = (widened_f64(mem, w_down, experts * hidden * inter)
                     .reshape(experts, hidden, inter) if w_down else None)


def expert_act(x: np.ndarray, ids: np.ndarray, w_gate_up: np.ndarray, inter: int,
               epilogue: Epilogue | None = None) -> np.ndarray:
    """act [slots, inter] for slot rows x [slots, hidden] routed to ids [slots]."""
    act = np.zeros((len(ids), inter))
    for e in np.unique(ids[_valid(ids, len(w_gate_up))]):
        rows = np.nonzero(ids == e)[0]
        act[rows] = swiglu_rows(x[rows], w_gate_up[e], epilogue, int(e))
    return act


def expert_down(act: np.ndarray, ids: np.ndarray, w_down: np.ndarray,
                epilogue: Epilogue | None = None) -> np.ndarray:
    """bf16-valued y [slots, hidden] = act @ w_down[id].T per slot (zeros for invalid ids),
    plus the epilogue's down bias (bf16(y + b)) where it has one."""
    y = np.zeros((len(ids), w_down.shape[1]))
    bias = epilogue.down_bias if epilogue is not None else None
    for e in np.unique(ids[_valid(ids, len(w_down))]):
        rows = np.nonzero(ids == e)[0]
        y[rows] = _bf16(act[rows] @ w_down[e].T)
        if bias is not None:
            y[rows] = _bf16(y[rows] + bias[e][None, :])
    return y


def weighted_sum(y: np.ndarray, ids: np.ndarray, weights: np.ndarray, experts: int
                 ) -> np.ndarray:
    """bf16 bits [tokens, hidden] of sum_j weights[t, j] * y[t, j] over valid ids."""
    w = np.where(_valid(ids, experts), weights.astype(np.float64), 0.0)
    out = np.einsum("tj,tjh->th", w, y)
    return f32_to_bf16_bits(out.astype(np.float32))


def _act_in(mem: HostMemory, ptr: int, rows: int, inter: int) -> np.ndarray:
    return bf16_bits_to_f32(mem.view(ptr, np.uint16, rows * inter)).reshape(rows, inter
                                                                           ).astype(np.float64)


@reference(MOE_GATE_UP_SILU)
@reference(MOE_GATE_UP_EPILOGUE)
@reference(MOE_GATE_UP_GEMV)
@reference(MOE_GATE_UP_GEMV_SINGLE)
def moe_gate_up_silu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w_gate_up: int,
                          topk_ids: int, act: int, tokens: int, top_k: int, hidden: int,
                          inter: int, experts: int, shared_gate_up: int, shared_slots: int,
                          shared_inter: int, expert_bias: int = 0, glu_alpha: float = 0.0,
                          glu_limit: float = 0.0) -> None:
    """(Only moe_gate_up_epilogue_bf16 takes the epilogue: the others keep its defaults.)"""
    ids = mem.view(topk_ids, np.int32, tokens * (top_k + shared_slots)).reshape(tokens, -1)
    _gate_up(mem, x, w_gate_up, ids, act, tokens, top_k, hidden, inter, experts,
             shared_gate_up, shared_slots, shared_inter,
             Epilogue(mem, experts, hidden, inter, expert_bias, 0, glu_alpha, glu_limit))


def _gate_up(mem: HostMemory, x: int, w_gate_up: int, ids: np.ndarray, act: int, tokens: int,
             top_k: int, hidden: int, inter: int, experts: int, shared_gate_up: int,
             shared_slots: int, shared_inter: int, epilogue: Epilogue | None = None) -> None:
    """act [tokens, slots, inter] of the decode gate/up kernels for the routed ids
    [tokens, >= top_k] (their first top_k columns, with the `epilogue`) and the shared
    expert's slots."""
    w = ExpertWeights(mem, w_gate_up, 0, experts, hidden, inter)
    xs = _act_in(mem, x, tokens, hidden)
    slots = top_k + shared_slots
    out = np.zeros((tokens, slots, inter))
    out[:, :top_k] = expert_act(np.repeat(xs, top_k, axis=0), ids[:, :top_k].reshape(-1),
                                w.gate_up, inter, epilogue).reshape(tokens, top_k, inter)
    if shared_slots:  # the shared expert's columns, in chunks of inter, zero past its width
        wsh = widened_f64(mem, shared_gate_up, 2 * shared_inter * hidden).reshape(
            2 * shared_inter, hidden)
        full = np.zeros((tokens, shared_slots * inter))
        full[:, :shared_inter] = swiglu_rows(xs, wsh)
        out[:, top_k:] = full.reshape(tokens, shared_slots, inter)
    mem.view(act, np.uint16, tokens * slots * inter)[:] = f32_to_bf16_bits(
        out.astype(np.float32)).reshape(-1)


@reference(MOE_GATE_UP_GEMV_TILES)
def moe_gate_up_gemv_tiles_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int,
                                w_gate_up: int, topk_ids: int, act: int, tokens: int,
                                top_k: int, hidden: int, inter: int, experts: int,
                                shared_gate_up: int, shared_slots: int, shared_inter: int,
                                tiles: int) -> None:
    """The tiled batch-1 entry: the same act; the kernel traps on what it refuses."""
    if tokens != 1 or tiles < 1:
        raise ValueError(f"moe_gate_up_gemv_tiles_bf16: tokens={tokens}, tiles={tiles} "
                         f"(batch 1 and at least one column pair a block only)")
    moe_gate_up_silu_bf16(mem, grid, block, x, w_gate_up, topk_ids, act, tokens, top_k, hidden,
                          inter, experts, shared_gate_up, shared_slots, shared_inter)


@reference(MOE_GATE_UP_GEMV_TILES_ROUTE)
def moe_gate_up_gemv_tiles_route_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int,
                                      w_gate_up: int, logits: int, bias: int, act: int,
                                      tokens: int, top_k: int, hidden: int, inter: int,
                                      experts: int, shared_gate_up: int, shared_slots: int,
                                      shared_inter: int, tiles: int, sigmoid: int) -> None:
    """The tiled entry with the routed slots' experts from the logits' top-k."""
    _check_route_in_experts("moe_gate_up_gemv_tiles_route_bf16", tokens, experts)
    ids, _ = _route_logits(mem, logits, 0, bias, tokens, experts, top_k, 0, 0, 1.0,
                           bool(sigmoid))
    _gate_up(mem, x, w_gate_up, ids, act, tokens, top_k, hidden, inter, experts,
             shared_gate_up, shared_slots, shared_inter)


def _check_route_in_experts(name: str, tokens: int, experts: int) -> None:
    """What the routing expert kernels trap on: batch 1 only, at most 256 experts."""
    if tokens != 1 or experts > ROUTE_IN_EXPERTS_MAX_EXPERTS:
        raise ValueError(f"{name}: tokens={tokens}, experts={experts} (batch 1 and at most "
                         f"{ROUTE_IN_EXPERTS_MAX_EXPERTS} experts only)")


def _routing_in(mem: HostMemory, topk_ids: int, topk_weights: int, tokens: int, slots: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """(ids, weights) [tokens, slots] as the router left them at the two addresses."""
    return (mem.view(topk_ids, np.int32, tokens * slots).reshape(tokens, slots),
            mem.view(topk_weights, np.float32, tokens * slots).reshape(tokens, slots))


def _down_sum(mem: HostMemory, act: int, w_down: int, ids: np.ndarray, weights: np.ndarray,
              tokens: int, top_k: int, hidden: int, inter: int, experts: int, shared_down: int,
              shared_slots: int, shared_inter: int, down_bias: int = 0) -> np.ndarray:
    """bf16 bits [tokens, hidden] of the decode down kernels' weighted sum over the routing
    (ids, weights [tokens, slots]): the routed slots', then with a shared expert bf16(that) +
    bf16(gate weight * bf16(shared product)) (transformers' `expert_output + sigmoid(gate) *
    shared_expert(x)` in bf16)."""
    w = ExpertWeights(mem, 0, w_down, experts, hidden, inter)
    slots = top_k + shared_slots
    a = _act_in(mem, act, tokens * slots, inter).reshape(tokens, slots, inter)
    y = expert_down(a[:, :top_k].reshape(-1, inter), ids[:, :top_k].reshape(-1), w.down,
                    Epilogue(mem, experts, hidden, inter, 0, down_bias))
    routed = weighted_sum(y.reshape(tokens, top_k, hidden), ids[:, :top_k],
                          weights[:, :top_k], experts)
    if not shared_slots:
        return routed
    sd = widened_f64(mem, shared_down, hidden * shared_inter).reshape(hidden, shared_inter)
    a_sh = a[:, top_k:].reshape(tokens, shared_slots * inter)[:, :shared_inter]
    gated = _bf16(weights[:, top_k:top_k + 1].astype(np.float64) * _bf16(a_sh @ sd.T))
    return f32_to_bf16_bits((bf16_bits_to_f32(routed) + gated).astype(np.float32))


@reference(MOE_DOWN_SUM)
@reference(MOE_DOWN_SUM_BIAS)
@reference(MOE_DOWN_GEMV_SUM)
def moe_down_sum_bf16(mem: HostMemory, grid: Dim3, block: Dim3, act: int, w_down: int,
                      topk_ids: int, topk_weights: int, out: int, tokens: int, top_k: int,
                      hidden: int, inter: int, experts: int, rows_per_block: int,
                      shared_down: int, shared_slots: int, shared_inter: int,
                      expert_bias: int = 0) -> None:
    """(Only moe_down_sum_bias_bf16 takes the down bias: the others keep its default.)"""
    ids, weights = _routing_in(mem, topk_ids, topk_weights, tokens, top_k + shared_slots)
    mem.view(out, np.uint16, tokens * hidden)[:] = _down_sum(
        mem, act, w_down, ids, weights, tokens, top_k, hidden, inter, experts, shared_down,
        shared_slots, shared_inter, expert_bias).reshape(-1)


def _one_step_reference(steps: int):
    """moe_down_sum_bf16's reference for moe_down_gemv_sum_s{steps}_bf16, which traps on a
    launch of another chunk-step count (ops/moe.py down_gemv_steps)."""

    def run(mem: HostMemory, grid: Dim3, block: Dim3, *args: int) -> None:
        top_k, inter, shared_slots = args[6], args[8], args[12]
        count = down_gemv_steps(top_k + shared_slots, inter)
        if count != steps:
            raise ValueError(f"moe_down_gemv_sum_s{steps}_bf16: a launch of {count} chunk "
                             "steps")
        moe_down_sum_bf16(mem, grid, block, *args)
    return run


for _steps, _sig in enumerate(MOE_DOWN_GEMV_SUM_STEPS, start=1):
    reference(_sig)(_one_step_reference(_steps))


@reference(MOE_DOWN_GEMV_ROUTE_SUM)
def moe_down_gemv_route_sum_bf16(mem: HostMemory, grid: Dim3, block: Dim3, act: int,
                                 w_down: int, logits: int, shared_logits: int, bias: int,
                                 out: int, tokens: int, top_k: int, hidden: int, inter: int,
                                 experts: int, rows_per_block: int, shared_down: int,
                                 shared_slots: int, shared_inter: int, renormalize: int,
                                 scale: float, sigmoid: int) -> None:
    _check_route_in_experts("moe_down_gemv_route_sum_bf16", tokens, experts)
    ids, weights = _route_logits(mem, logits, shared_logits, bias, tokens, experts, top_k,
                                 shared_slots, renormalize, scale, bool(sigmoid))
    mem.view(out, np.uint16, tokens * hidden)[:] = _down_sum(
        mem, act, w_down, ids, weights, tokens, top_k, hidden, inter, experts, shared_down,
        shared_slots, shared_inter).reshape(-1)


# ---- grouped path -------------------------------------------------------------------------
def max_tiles(slots: int, experts: int) -> int:
    """Most M-tiles the slots can occupy: each non-empty expert pads to whole tiles, so
    sum_e ceil(c_e / T) <= ceil(slots / T) + min(experts, slots)."""
    return -(-slots // MOE_TILE_M) + min(experts, slots)


def align(ids: np.ndarray, experts: int, tiles: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted_slots [tiles * MOE_TILE_M], tile_expert [tiles]) for flat ids [slots]: expert
    by expert in ascending order, each expert's slots ascending and padded to whole tiles
    with -1; tiles past the last used one are -1."""
    sorted_slots = np.full(tiles * MOE_TILE_M, -1, np.int32)
    tile_expert = np.full(tiles, -1, np.int32)
    tile = 0
    for e in range(experts):
        mine = np.nonzero(ids == e)[0]
        if not len(mine):
            continue
        n = -(-len(mine) // MOE_TILE_M)
        if tile + n > tiles:
            raise ValueError(f"moe_align: {tiles} tiles cannot hold the routed slots")
        sorted_slots[tile * MOE_TILE_M: tile * MOE_TILE_M + len(mine)] = mine
        tile_expert[tile: tile + n] = e
        tile += n
    return sorted_slots, tile_expert


@reference(MOE_ALIGN)
def moe_align_i32(mem: HostMemory, grid: Dim3, block: Dim3, topk_ids: int, sorted_slots: int,
                  tile_expert: int, slots: int, experts: int, max_tiles_: int) -> None:
    ids = mem.view(topk_ids, np.int32, slots)
    s, t = align(ids, experts, max_tiles_)
    mem.view(sorted_slots, np.int32, max_tiles_ * MOE_TILE_M)[:] = s
    mem.view(tile_expert, np.int32, max_tiles_)[:] = t


def _sorted_ids(mem: HostMemory, sorted_slots: int, tile_expert: int, tiles: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """(slot, expert) of every row of the sorted layout; -1 for padding rows."""
    slots = mem.view(sorted_slots, np.int32, tiles * MOE_TILE_M).copy()
    experts = np.repeat(mem.view(tile_expert, np.int32, tiles), MOE_TILE_M)
    experts = np.where(slots >= 0, experts, -1)
    return slots, experts


@reference(MOE_GROUPED_GATE_UP)
@reference(MOE_GROUPED_GATE_UP_SM90)
@reference(MOE_GROUPED_GATE_UP_EPILOGUE)
@reference(MOE_GROUPED_GATE_UP_SM90_EPILOGUE)
def moe_grouped_gate_up_silu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int,
                                  w_gate_up: int, sorted_slots: int, tile_expert: int, act: int,
                                  top_k: int, hidden: int, inter: int, experts: int,
                                  max_tiles_: int, expert_bias: int = 0, glu_alpha: float = 0.0,
                                  glu_limit: float = 0.0) -> None:
    """(Only the *_epilogue_* entries take the epilogue: the others keep its defaults.)"""
    slots, slot_experts = _sorted_ids(mem, sorted_slots, tile_expert, max_tiles_)
    rows = max_tiles_ * MOE_TILE_M
    out = np.zeros((rows, inter))
    live = slots >= 0
    if live.any():
        w = ExpertWeights(mem, w_gate_up, 0, experts, hidden, inter)
        xs = _act_in(mem, x, int(slots.max()) // top_k + 1, hidden)
        out[live] = expert_act(xs[slots[live] // top_k], slot_experts[live], w.gate_up, inter,
                               Epilogue(mem, experts, hidden, inter, expert_bias, 0, glu_alpha,
                                        glu_limit))
    mem.view(act, np.uint16, rows * inter)[:] = f32_to_bf16_bits(out.astype(np.float32)
                                                                ).reshape(-1)


@reference(MOE_GROUPED_DOWN)
@reference(MOE_GROUPED_DOWN_SM90)
@reference(MOE_GROUPED_DOWN_BIAS)
@reference(MOE_GROUPED_DOWN_SM90_BIAS)
def moe_grouped_down_bf16(mem: HostMemory, grid: Dim3, block: Dim3, act: int, w_down: int,
                          sorted_slots: int, tile_expert: int, y: int, hidden: int, inter: int,
                          experts: int, max_tiles_: int, expert_bias: int = 0) -> None:
    """(Only the *_bias_* entries take the down bias: the others keep its default.)"""
    slots, slot_experts = _sorted_ids(mem, sorted_slots, tile_expert, max_tiles_)
    live = slots >= 0
    if not live.any():
        return
    w = ExpertWeights(mem, 0, w_down, experts, hidden, inter)
    a = _act_in(mem, act, max_tiles_ * MOE_TILE_M, inter)
    out = expert_down(a[live], slot_experts[live], w.down,
                      Epilogue(mem, experts, hidden, inter, 0, expert_bias))
    n_slots = int(slots.max()) + 1
    view = mem.view(y, np.uint16, n_slots * hidden).reshape(n_slots, hidden)
    view[slots[live]] = f32_to_bf16_bits(out.astype(np.float32))


@reference(MOE_COMBINE)
def moe_combine_bf16(mem: HostMemory, grid: Dim3, block: Dim3, y: int, topk_ids: int,
                     topk_weights: int, out: int, tokens: int, top_k: int, hidden: int,
                     experts: int) -> None:
    ids = mem.view(topk_ids, np.int32, tokens * top_k).reshape(tokens, top_k)
    weights = mem.view(topk_weights, np.float32, tokens * top_k).reshape(tokens, top_k)
    valid = _valid(ids, experts)
    ys = bf16_bits_to_f32(mem.view(y, np.uint16, tokens * top_k * hidden)).reshape(
        tokens, top_k, hidden).astype(np.float64)
    ys = np.where(valid[:, :, None], ys, 0.0)  # rows of invalid slots were never written
    mem.view(out, np.uint16, tokens * hidden)[:] = weighted_sum(ys, ids, weights,
                                                                experts).reshape(-1)
