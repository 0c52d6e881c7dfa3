"""Check cases for step_io.cu: the staged step inputs (token spans of 1, 7 and 64 tokens,
carried ids among them, words outside the spans left as they were, an empty lead, more
words than the block's one pass of 8,192, the acknowledged step number; the published ids
are the sampler's cases). The oracles index plain Python lists, sharing nothing with the
numpy reference."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, step_io


def _stage_case(rng: np.random.Generator, tokens: int, stride: int, tail: int,
                carried: int) -> KernelCase:
    tail_at = 3 * stride + 5
    total = tail_at + tail + 9
    src = rng.integers(0, 1 << 20, total).astype(np.int32)
    sampled = rng.integers(0, 1 << 20, 32).astype(np.int32)
    for j in rng.choice(tokens, size=carried, replace=False).tolist() if tokens else []:
        src[j] = -1 - int(rng.integers(0, 32))
    inputs = {"src": src, "sampled": sampled,
              "dst": rng.integers(-(1 << 20), 0, total).astype(np.int32),
              "ack": np.array([-7], dtype=np.int32)}
    seq_word = tail_at + tail // 2

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        step_io.stage_inputs(KernelCache(backend), stream, p["src"], p["dst"], tokens, stride,
                             tail_at, tail, p["sampled"], p["ack"], seq_word)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        s, out, smp = x["src"].tolist(), x["dst"].tolist(), x["sampled"].tolist()
        spans = [range(k * stride, k * stride + tokens) for k in range(3)]
        for w in [w for r in spans for w in r] + list(range(tail_at, tail_at + tail)):
            v = s[w]
            out[w] = smp[-1 - v] if v < 0 and w < tokens else v
        return {"dst": np.array(out, dtype=np.int32), "ack": np.array([s[seq_word]], np.int32)}

    return KernelCase(f"stage_inputs_{tokens}t_{stride}s_{tail}w_{carried}c", "step_io", inputs,
                      {"dst": OutputSpec(DType.I32, (total,)), "ack": OutputSpec(DType.I32, (1,))},
                      run, oracle)


@kernel_cases("step_io")
def step_io_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [_stage_case(rng, *shape) for shape in
            ((1, 16, 40, 1), (7, 16, 300, 3), (64, 200, 1300, 20), (0, 8, 33, 0),
             (256, 300, 9000, 100))]
