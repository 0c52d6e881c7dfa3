"""Check cases for the fused Gated-DeltaNet decode step (gdn_decode.cu).

The oracle chains the three float64 oracles written for the unfused kernels (conv1d's
token-by-token convolution over the ring, gated_delta's per-head recurrence, gated_rmsnorm's
norm), sharing no code with the reference kernels. Cases: a decode batch mixing fresh
sequences (their conv ring and delta state hold NaN: a kernel that reads them fails) with
ones at positions 1 and 2 (the ring is partly history, partly zero) and later ones; the
exact head shapes of Qwen3.5-35B-A3B and Qwen3-Next-80B-A3B (16 key heads, 32 value heads of
128, conv kernel 4, 8,192 conv channels), also at batch 8; a group of three value heads per
key head; dk 256 with threads that only convolve (conv kernel 2); a CUDA-graph
case: one captured launch replayed for 40 tokens of one sequence (step inputs copied into
the graph's fixed buffers, as the decode runner does), from position 0 through ten laps of
the ring; and verification runs (a sequence's K + 1 tokens as consecutive rows, each
token's state left in an out slot) checked bit for bit against one-row decode steps.
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
    at position rows[r][1]: out, conv_state and state after all of them, float64; and
    after each row its slot's state ("row_state") and its ring ("row_ring": positions
    pos - kernel + 1 .. pos, zero below 0)."""
    h, cd = lay.heads, lay.conv_dim
    proj = bf16_bits_to_f32(inp["proj"]).astype(np.float64)
    w = bf16_bits_to_f32(inp["conv_w"]).astype(np.float64)
    a_log = bf16_bits_to_f32(inp["a_log"]).astype(np.float64)
    dt_bias = bf16_bits_to_f32(inp["dt_bias"]).astype(np.float64)
    norm = bf16_bits_to_f32(inp["norm_w"]).astype(np.float64)
    ring = bf16_bits_to_f32(inp["conv_state"]).astype(np.float64)
    st = inp["state"].astype(np.float64).copy()
    out = np.zeros((len(rows), h.hv, h.dv))
    row_state = np.zeros((len(rows), h.hv, h.dk, h.dv))
    row_ring = np.zeros((len(rows), lay.kernel, cd))
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
        row_state[r] = st[slot]
        for i, p in enumerate(range(pos - lay.kernel + 1, pos + 1)):
            if p >= 0:
                row_ring[r, i] = ring[slot, p % lay.kernel]
    return {"out": out.reshape(len(rows), -1), "conv_state": ring, "state": st,
            "row_state": row_state, "row_ring": row_ring}


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
        p["a_log"], p["dt_bias"], p["norm_w"], p["state"], p["state_slots"], p["state_slots"],
        p["cu_q"], kv_lens, out, num_seqs, h.hk, h.hv, h.dk, h.dv, lay.kernel, EPS)


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
                      compare_mask={"conv_state": mask}, reference_abs_tol=REFERENCE_ABS_TOL,
                      capturable=False)


def _run_case(rng: np.random.Generator, name: str, lay: Layer,
              seqs: list[tuple[int, int]]) -> KernelCase:
    """A verification step: sequence i feeds seqs[i] = (start, n) tokens as consecutive
    rows (n == 1: a plain decode row, in place; else a run leaving each token's state in an
    out slot of its own), in one launch; and every row again as a one-row decode step in
    place on a copy of the pools. Row by row the outputs, the states and the rings must hold
    the same bits (model/runner.py's hybrid verification)."""
    h, k = lay.heads, lay.kernel
    n_rows = sum(n for _, n in seqs)
    slot_of = list(range(1, len(seqs) + 1))
    state_slots, state_out, positions, seq_rows = [], [], [], []
    spare = len(seqs) + 1
    for i, (start, n) in enumerate(seqs):
        state_slots += [slot_of[i]] * n
        state_out += [slot_of[i]] if n == 1 else list(range(spare, spare + n))
        spare += n if n > 1 else 0
        positions += range(start, start + n)
        seq_rows += [(slot_of[i], p) for p in range(start, start + n)]
    fresh = [slot_of[i] for i, (start, _) in enumerate(seqs) if start == 0]
    inputs = _inputs(rng, lay, n_rows, spare, fresh)
    inputs.update(state_plain=inputs["state"].copy(), ring_plain_pool=inputs["conv_state"].copy(),
                  state_slots=np.array(state_slots, np.int32),
                  state_out=np.array(state_out, np.int32),
                  cu_q=np.arange(n_rows + 1, dtype=np.int32), cu_one=np.array([0, 1], np.int32),
                  kv_lens=np.array(positions, np.int32) + 1)
    for side in ("run", "plain"):   # zero where a ring row lies below position 0
        inputs[f"row_state_{side}"] = np.zeros((n_rows, h.hv, h.dk, h.dv), np.float32)
        inputs[f"row_ring_{side}"] = np.zeros((n_rows, k, lay.conv_dim), np.uint16)
    pitch = lay.proj_row + 8
    per_state, per_ring, row_bytes = 4 * h.hv * h.dk * h.dv, 2 * k * lay.conv_dim, 2 * lay.conv_dim
    out_bytes = 2 * h.hv * h.dv

    def snapshot(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr], side: str,
                 r: int, state: DevicePtr, ring: DevicePtr, slot: int) -> None:
        backend.copy_d2d(p[f"row_state_{side}"] + r * per_state, state + slot * per_state,
                         per_state, stream)
        pos = positions[r]
        for i, q in enumerate(range(pos - k + 1, pos + 1)):
            if q >= 0:
                backend.copy_d2d(p[f"row_ring_{side}"] + (r * k + i) * row_bytes,
                                 ring + slot * per_ring + (q % k) * row_bytes, row_bytes, stream)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        common = (p["conv_w"], p["a_log"], p["dt_bias"], p["norm_w"])
        linear_attention.gdn_decode(
            kc, stream, p["proj"], pitch, common[0], p["conv_state"], *common[1:], p["state"],
            p["state_slots"], p["state_out"], p["cu_q"], p["kv_lens"], p["out_run"], n_rows,
            h.hk, h.hv, h.dk, h.dv, k, EPS)
        for r in range(n_rows):
            snapshot(backend, stream, p, "run", r, p["state"], p["conv_state"], state_out[r])
        for r in range(n_rows):
            slots = p["state_slots"] + 4 * r    # the sequence's own slot, in place
            linear_attention.gdn_decode(
                kc, stream, p["proj"] + 2 * pitch * r, pitch, common[0], p["ring_plain_pool"],
                *common[1:], p["state_plain"], slots, slots, p["cu_one"], p["kv_lens"] + 4 * r,
                p["out_plain"] + out_bytes * r, 1, h.hk, h.hv, h.dk, h.dv, k, EPS)
            snapshot(backend, stream, p, "plain", r, p["state_plain"], p["ring_plain_pool"],
                     state_slots[r])

    def oracle(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        o = oracle_steps(inp, lay, seq_rows)
        return {f"{name}_{side}": o[key] for side in ("run", "plain")
                for name, key in (("out", "out"), ("row_state", "row_state"),
                                  ("row_ring", "row_ring"))}

    outputs = {}
    for side in ("run", "plain"):
        outputs[f"out_{side}"] = OutputSpec(DType.BF16, (n_rows, h.hv * h.dv))
        outputs[f"row_state_{side}"] = OutputSpec(DType.FP32, (n_rows, h.hv, h.dk, h.dv),
                                                  tol=STATE_TOL)
        outputs[f"row_ring_{side}"] = OutputSpec(DType.BF16, (n_rows, k, lay.conv_dim),
                                                 tol=(0.0, 0.0))
    return KernelCase(name, "gdn_decode", inputs, outputs, run, oracle,
                      reference_abs_tol=REFERENCE_ABS_TOL,
                      same_bits=tuple((f"{n}_run", f"{n}_plain")
                                      for n in ("out", "row_state", "row_ring")))


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
        # verification runs: K = 3 at position 6, a plain row, a run from position 0 and one
        # from position 1 (ring rows below 0), beside each other in one launch
        _run_case(rng, "gdn_decode_verify_runs_mixed", small, [(6, 4), (300, 1), (0, 3), (1, 2)]),
        # the flagship's heads: K = 4 after a 511-token prompt, beside a plain decode row
        _run_case(rng, "gdn_decode_verify_run_qwen3.5-35b-a3b", Layer(QWEN3_5_MOE_HEADS),
                  [(511, 5), (40, 1)]),
    ]
