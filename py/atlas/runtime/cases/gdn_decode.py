"""Check cases for the fused Gated-DeltaNet decode step (gdn_decode.cu).

The oracle chains the three float64 oracles written for the unfused kernels (conv1d's
token-by-token convolution over the ring, gated_delta's per-head recurrence, gated_rmsnorm's
norm), sharing no code with the reference kernels. Cases: a decode batch mixing fresh
sequences (their conv ring and delta state hold NaN: a kernel that reads them fails) with
ones at positions 1 and 2 (the ring is partly history, partly zero) and later ones; the
exact head shapes of Qwen3.5-35B-A3B and Qwen3-Next-80B-A3B (16 key heads, 32 value heads of
128, conv kernel 4, 8,192 conv channels), also at batch 8; a group of three value heads per
key head; dk 256 with threads that only convolve (conv kernel 2); and a CUDA-graph
case: one captured launch replayed for 40 tokens of one sequence (step inputs copied into
the graph's fixed buffers, as the decode runner does), from position 0 through ten laps of
the ring.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_abi import GDN_DECODE
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, linear_attention
from .conv1d import conv_state, defined_rows, naive_conv
from .gated_delta import STATE_TOL, Heads, naive_delta_rule
from .gated_rmsnorm import naive_gated_norm
from .gemv import random_bf16

EPS = 1e-6
#: the graph case's step count
GRAPH_TOKENS = 40


@dataclass(frozen=True)
class Layer:
    """A linear-attention layer's shapes: its heads and conv kernel."""

    heads: Heads
    kernel: int = 4

    @property
    def conv_dim(self) -> int:
        return self.heads.row

    @property
    def proj_row(self) -> int:
        """[q | k | v | z | b | a]"""
        return self.conv_dim + self.heads.hv * self.heads.dv + 2 * self.heads.hv


def _rb(x: np.ndarray) -> np.ndarray:
    return round_bf16(np.asarray(x, dtype=np.float32)).astype(np.float64)


def oracle_steps(inp: dict[str, np.ndarray], lay: Layer, rows: list[tuple[int, int]]
                 ) -> dict[str, np.ndarray]:
    """Decode steps in row order, row r of inp["proj"] being sequence slot rows[r][0]'s token
    at position rows[r][1]: out, conv_state and state after all of them, float64."""
    h, cd = lay.heads, lay.conv_dim
    proj = bf16_bits_to_f32(inp["proj"]).astype(np.float64)
    w = bf16_bits_to_f32(inp["conv_w"]).astype(np.float64)
    a_log = bf16_bits_to_f32(inp["a_log"]).astype(np.float64)
    dt_bias = bf16_bits_to_f32(inp["dt_bias"]).astype(np.float64)
    norm = bf16_bits_to_f32(inp["norm_w"]).astype(np.float64)
    ring = bf16_bits_to_f32(inp["conv_state"]).astype(np.float64)
    st = inp["state"].astype(np.float64).copy()
    out = np.zeros((len(rows), h.hv, h.dv))
    kd = h.hk * h.dk
    for r, (slot, pos) in enumerate(rows):
        row = proj[r]
        x = naive_conv(row[None, :cd], w, ring[slot], pos)[0]
        s0 = np.zeros((h.hv, h.dk, h.dv)) if pos == 0 else st[slot]
        ba = row[cd + h.hv * h.dv:]
        o, st[slot] = naive_delta_rule(
            x[None, :kd].reshape(1, h.hk, h.dk), x[None, kd:2 * kd].reshape(1, h.hk, h.dk),
            x[None, 2 * kd:].reshape(1, h.hv, h.dv), ba[None, :h.hv], ba[None, h.hv:], a_log,
            dt_bias, s0, h)
        z = row[cd:cd + h.hv * h.dv].reshape(h.hv, h.dv)
        out[r] = naive_gated_norm(_rb(o[0]), z, norm, EPS)
    return {"out": out.reshape(len(rows), -1), "conv_state": ring, "state": st}


def _inputs(rng: np.random.Generator, lay: Layer, tokens: int, slots: int,
            fresh_slots: list[int]) -> dict[str, np.ndarray]:
    h = lay.heads
    state = (rng.standard_normal((slots, h.hv, h.dk, h.dv)) * 0.3).astype(np.float32)
    state[fresh_slots] = np.nan
    proj = random_bf16(rng, (tokens, lay.proj_row + 8), 1.0)
    return {
        "proj": proj, "conv_w": random_bf16(rng, (lay.conv_dim, lay.kernel), 0.5),
        "conv_state": conv_state(rng, slots, lay.kernel, lay.conv_dim, fresh_slots),
        "a_log": f32_to_bf16_bits(np.log(rng.uniform(0.02, 0.5, h.hv)).astype(np.float32)),
        "dt_bias": f32_to_bf16_bits((1.0 + 0.1 * rng.standard_normal(h.hv)).astype(np.float32)),
        "norm_w": f32_to_bf16_bits(rng.uniform(0.5, 1.5, h.dv).astype(np.float32)),
        "state": state,
    }


def _launch(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr], lay: Layer,
            proj: DevicePtr, kv_lens: DevicePtr, out: DevicePtr, num_seqs: int) -> None:
    h = lay.heads
    linear_attention.gdn_decode(
        KernelCache(backend), stream, proj, lay.proj_row + 8, p["conv_w"], p["conv_state"],
        p["a_log"], p["dt_bias"], p["norm_w"], p["state"], p["state_slots"], p["cu_q"],
        kv_lens, out, num_seqs, h.hk, h.hv, h.dk, h.dv, lay.kernel, EPS)


def _outputs(lay: Layer, inputs: dict[str, np.ndarray], tokens: int) -> dict[str, OutputSpec]:
    h = lay.heads
    return {"out": OutputSpec(DType.BF16, (tokens, h.hv * h.dv)),
            "conv_state": OutputSpec(DType.BF16, inputs["conv_state"].shape, tol=(0.0, 0.0)),
            "state": OutputSpec(DType.FP32, inputs["state"].shape, tol=STATE_TOL)}


#: the host reference and the kernel round the rule's output to bf16 before the norm, which
#: divides by its RMS: a one-ulp flip of that rounding moves the output by about an ulp more
#: than the check's two, so it gets this much absolute slack (values are O(1))
REFERENCE_ABS_TOL = 4e-3


def _batch_case(rng: np.random.Generator, name: str, lay: Layer,
                starts: list[int]) -> KernelCase:
    """One decode step of len(starts) sequences, sequence i at position starts[i]."""
    n = len(starts)
    slots = rng.permutation(n + 2)[:n].astype(np.int32)
    fresh = [int(slots[i]) for i, s in enumerate(starts) if s == 0]
    inputs = _inputs(rng, lay, n, n + 2, fresh)
    inputs.update(state_slots=slots, cu_q=np.arange(n + 1, dtype=np.int32),
                  kv_lens=(np.asarray(starts) + 1).astype(np.int32))

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        _launch(backend, stream, p, lay, p["proj"], p["kv_lens"], p["out"], n)

    def oracle(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return oracle_steps(inp, lay, [(int(slots[i]), starts[i]) for i in range(n)])

    mask = defined_rows(inputs["conv_state"].shape, slots, [1] * n, starts)
    return KernelCase(name, "gdn_decode", inputs, _outputs(lay, inputs, n), run, oracle,
                      compare_mask={"conv_state": mask}, reference_abs_tol=REFERENCE_ABS_TOL)


def _graph_case(rng: np.random.Generator, lay: Layer) -> KernelCase:
    """One sequence from position 0, a captured launch replayed for each of its tokens."""
    h, slot, tokens = lay.heads, 1, GRAPH_TOKENS
    inputs = _inputs(rng, lay, tokens, 3, [slot])
    inputs.update(state_slots=np.array([slot], np.int32), cu_q=np.array([0, 1], np.int32),
                  kv_lens=np.arange(1, tokens + 1, dtype=np.int32))
    pitch_bytes, out_bytes = 2 * (lay.proj_row + 8), 2 * h.hv * h.dv

    def run(backend: GpuBackend, _stream: Stream, p: dict[str, DevicePtr]) -> None:
        stream = backend.create_stream()  # the legacy default stream cannot be captured
        step = {"proj": backend.alloc(pitch_bytes), "kv": backend.alloc(4),
                "out": backend.alloc(out_bytes)}
        try:
            KernelCache(backend).get(GDN_DECODE)  # resolve the kernel outside the capture
            backend.begin_capture(stream)
            _launch(backend, stream, p, lay, step["proj"], step["kv"], step["out"], 1)
            graph = backend.end_capture(stream)
            for t in range(tokens):
                backend.copy_d2d(step["proj"], p["proj"] + t * pitch_bytes, pitch_bytes, stream)
                backend.copy_d2d(step["kv"], p["kv_lens"] + 4 * t, 4, stream)
                backend.launch_graph(graph, stream)
                backend.copy_d2d(p["out"] + t * out_bytes, step["out"], out_bytes, stream)
            backend.synchronize(stream)
            backend.destroy_graph(graph)
        finally:
            for ptr in step.values():
                backend.free(ptr)

    def oracle(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return oracle_steps(inp, lay, [(slot, t) for t in range(tokens)])

    mask = defined_rows(inputs["conv_state"].shape, inputs["state_slots"], [tokens], [0])
    return KernelCase(f"gdn_decode_graph_{tokens}_tokens", "gdn_decode", inputs,
                      _outputs(lay, inputs, tokens), run, oracle,
                      compare_mask={"conv_state": mask}, reference_abs_tol=REFERENCE_ABS_TOL)


#: Qwen3.5-35B-A3B's and Qwen3-Next-80B-A3B's linear attention (the same head shapes)
QWEN3_5_MOE_HEADS = Heads(hk=16, hv=32, dk=128, dv=128)


@kernel_cases("gdn_decode")
def gdn_decode_cases(rng: np.random.Generator) -> list[KernelCase]:
    small = Layer(Heads(hk=2, hv=4, dk=32, dv=64))
    return [
        _batch_case(rng, "gdn_decode_batch_mixed", small, [0, 1, 2, 7, 0, 300]),
        _batch_case(rng, "gdn_decode_qwen3.5-35b-a3b_qwen3-next-80b-a3b",
                    Layer(QWEN3_5_MOE_HEADS), [0, 5, 300]),
        _batch_case(rng, "gdn_decode_group3_kernel3", Layer(Heads(hk=2, hv=6, dk=64, dv=128), 3),
                    [4, 0, 1]),
        # batch 8 of the flagship: fresh, ring partly history (positions 1, 2), and later
        _batch_case(rng, "gdn_decode_qwen3.5-35b-a3b_b8", Layer(QWEN3_5_MOE_HEADS),
                    [0, 1, 2, 3, 17, 300, 4095, 1]),
        # dk 256, dv 64: 132 conv chunks of 4 channels but 128 state owners per block, so
        # four threads only convolve; conv kernel 2 (one history row)
        _batch_case(rng, "gdn_decode_dk256_dv64_kernel2",
                    Layer(Heads(hk=1, hv=2, dk=256, dv=64), 2), [3, 0]),
        _graph_case(rng, small),
    ]
