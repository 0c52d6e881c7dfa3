"""Check cases for the gated delta rule: the chunked (prefill) and recurrent (decode) forms.

The oracle is the naive per-token recurrence in float64, head by head, written here from the
definition (transformers' torch_recurrent_gated_delta_rule) and sharing no code with the
reference kernels (which evaluate the chunked WY form and a vectorized recurrence). Cases
mix sequences that start at position 0 (their slot holds NaN: a kernel that reads it fails)
with ones that continue from a stored state, use padded row pitches, grouped key heads,
chunk-boundary lengths (1, 63, 64, 65, 130) and, for the GPU, one 4,096-token sequence
with slow decay so the state carries information across all 64 chunks; the chunked cases
run on both chunked kernels (CUDA cores, tensor cores), the latter also at Qwen3.5-35B-A3B's
exact heads. The decode case
runs the recurrent kernel token after token over a 96-token sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, linear_attention
from .gemv import random_bf16

#: the CPU tests skip cases named with this mark (seconds of numpy each); the GPU runs all
LONG = "long"
STATE_TOL = (2e-4, 2e-4)
LONG_STATE_TOL = (1e-3, 1e-3)


@dataclass(frozen=True)
class Heads:
    hk: int
    hv: int
    dk: int
    dv: int

    @property
    def row(self) -> int:
        return 2 * self.hk * self.dk + self.hv * self.dv


def naive_delta_rule(q: np.ndarray, k: np.ndarray, v: np.ndarray, b: np.ndarray,
                     a: np.ndarray, a_log: np.ndarray, dt_bias: np.ndarray,
                     state: np.ndarray, h: Heads) -> tuple[np.ndarray, np.ndarray]:
    """One sequence, token by token and head by head, float64: q, k [T, hk, dk] and
    v [T, hv, dv] bf16-valued, b, a [T, hv], state [hv, dk, dv]. Returns (o, state)."""
    s = state.astype(np.float64).copy()
    o = np.zeros((q.shape[0], h.hv, h.dv))
    for t in range(q.shape[0]):
        for head in range(h.hv):
            kh = head // (h.hv // h.hk)
            qv, kv = q[t, kh].astype(np.float64), k[t, kh].astype(np.float64)
            qv = qv / np.sqrt(np.dot(qv, qv) + 1e-6) / np.sqrt(h.dk)
            kv = kv / np.sqrt(np.dot(kv, kv) + 1e-6)
            beta = _bf16_round(1.0 / (1.0 + np.exp(-np.float32(b[t, head]))))
            x = a[t, head] + dt_bias[head]
            softplus = x if x > 20 else np.log1p(np.exp(x))
            decay = np.exp(-np.exp(a_log[head]) * softplus)
            s[head] *= decay
            pred = kv @ s[head]
            s[head] += np.outer(kv, beta * (v[t, head] - pred))
            o[t, head] = qv @ s[head]
    return o, s


def _bf16_round(x: float) -> float:
    """x rounded to bf16 through float32 (transformers' sigmoid of a bf16 tensor)."""
    return float(bf16_bits_to_f32(f32_to_bf16_bits(np.array([x], dtype=np.float32)))[0])


def _case(rng: np.random.Generator, name: str, h: Heads, lens: list[int], starts: list[int],
          mode: str, a_range: tuple[float, float] = (0.02, 0.5)) -> KernelCase:
    """mode: "chunk" (one chunked launch on CUDA cores), "chunk_tc" (on tensor cores),
    "step" (one recurrent launch, a token per sequence) or "loop" (one sequence, a recurrent
    launch per token)."""
    n, total = len(lens), sum(lens)
    qkv_pitch, ba_pitch = h.row + 8, 2 * h.hv + 6
    slots = rng.permutation(n + 2)[:n].astype(np.int32)
    state = (rng.standard_normal((n + 2, h.hv, h.dk, h.dv)) * 0.3).astype(np.float32)
    for i, start in enumerate(starts):
        if start == 0:
            state[slots[i]] = np.nan  # a fresh sequence must not read its slot
    inputs = {
        "qkv": random_bf16(rng, (total, qkv_pitch), 1.0),
        "ba": random_bf16(rng, (total, ba_pitch), 1.0),
        "a_log": f32_to_bf16_bits(np.log(rng.uniform(*a_range, h.hv)).astype(np.float32)),
        "dt_bias": f32_to_bf16_bits((1.0 + 0.1 * rng.standard_normal(h.hv)).astype(np.float32)),
        "state": state, "state_slots": slots,
        "cu_q": np.concatenate([[0], np.cumsum(lens)]).astype(np.int32),
        "kv_lens": (np.asarray(starts) + np.asarray(lens)).astype(np.int32),
    }
    if mode == "loop":  # one sequence, one launch per token: kv_lens[t] = start + t + 1
        assert n == 1
        inputs["kv_lens"] = (starts[0] + 1 + np.arange(total)).astype(np.int32)
        inputs["cu_q"] = np.array([0, 1], dtype=np.int32)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        args = (p["a_log"], p["dt_bias"], p["state"], p["state_slots"])
        if mode != "loop":
            linear_attention.gated_delta_rule(kc, stream, p["qkv"], qkv_pitch, p["ba"],
                                              ba_pitch, *args, p["cu_q"], p["kv_lens"],
                                              p["out"], n, h.hk, h.hv, h.dk, h.dv,
                                              recurrent=mode == "step",
                                              tensor_cores=mode == "chunk_tc")
            return
        for t in range(total):
            linear_attention.gated_delta_rule(
                kc, stream, p["qkv"] + 2 * t * qkv_pitch, qkv_pitch, p["ba"] + 2 * t * ba_pitch,
                ba_pitch, *args, p["cu_q"], p["kv_lens"] + 4 * t,
                p["out"] + 2 * t * h.hv * h.dv, 1, h.hk, h.hv, h.dk, h.dv, recurrent=True)

    def oracle(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = bf16_bits_to_f32(inp["qkv"]).astype(np.float64)
        ba = bf16_bits_to_f32(inp["ba"]).astype(np.float64)
        a_log = bf16_bits_to_f32(inp["a_log"]).astype(np.float64)
        dt_bias = bf16_bits_to_f32(inp["dt_bias"]).astype(np.float64)
        st = inp["state"].astype(np.float64).copy()
        out = np.zeros((total, h.hv, h.dv))
        kd = h.hk * h.dk
        for i in range(n):
            lo, hi = sum(lens[:i]), sum(lens[:i + 1])
            s0 = np.zeros((h.hv, h.dk, h.dv)) if starts[i] == 0 else st[slots[i]]
            o, s1 = naive_delta_rule(
                x[lo:hi, :kd].reshape(-1, h.hk, h.dk), x[lo:hi, kd:2 * kd].reshape(-1, h.hk, h.dk),
                x[lo:hi, 2 * kd:h.row].reshape(-1, h.hv, h.dv), ba[lo:hi, :h.hv],
                ba[lo:hi, h.hv:2 * h.hv], a_log, dt_bias, s0, h)
            out[lo:hi], st[slots[i]] = o, s1
        return {"out": out, "state": st}

    long = total > 1000
    outputs = {"out": OutputSpec(DType.BF16, (total, h.hv, h.dv)),
               "state": OutputSpec(DType.FP32, state.shape,
                                   tol=LONG_STATE_TOL if long else STATE_TOL)}
    return KernelCase(name, "gated_delta", inputs, outputs, run, oracle,
                      reference_abs_tol=2e-4 if long else 2e-5)


@kernel_cases("gated_delta")
def gated_delta_cases(rng: np.random.Generator) -> list[KernelCase]:
    small = Heads(hk=2, hv=4, dk=32, dv=64)
    model = Heads(hk=2, hv=4, dk=128, dv=128)  # Qwen3.5 head dims, 2 value heads a key head
    return [
        _case(rng, "gdn_chunk_mixed", small, [1, 63, 64, 65, 130], [0, 7, 0, 200, 0], "chunk"),
        _case(rng, "gdn_chunk_model_dims", model, [70, 3], [0, 12], "chunk"),
        _case(rng, "gdn_step_batch", small, [1] * 6, [0, 5, 9, 0, 1, 300], "step"),
        _case(rng, "gdn_step_batch_model_dims", model, [1] * 3, [4, 0, 17], "step"),
        _case(rng, "gdn_step_decode_96", small, [96], [3], "loop"),
        _case(rng, f"gdn_chunk_4096_{LONG}", model, [4096], [0], "chunk", (0.001, 0.02)),
        _case(rng, "gdn_chunk_tc_mixed", small, [1, 63, 64, 65, 130], [0, 7, 0, 200, 0],
              "chunk_tc"),
        _case(rng, "gdn_chunk_tc_model_dims", model, [70, 3], [0, 12], "chunk_tc"),
        _case(rng, "gdn_chunk_tc_qwen3.5-35b-a3b", Heads(hk=16, hv=32, dk=128, dv=128), [24],
              [30], "chunk_tc"),
        _case(rng, f"gdn_chunk_tc_4096_{LONG}", model, [4096], [0], "chunk_tc",
              (0.001, 0.02)),
    ]
