"""Check cases for causal_conv1d_silu_bf16: sequences starting at 0 (their state ring is
NaN: a kernel that reads it fails) and continuing ones, chunks shorter than the history (the
new ring keeps old rows), several token tiles, a padded row pitch, channel counts that are
not a multiple of the block, and Qwen3.5's 8,192 channels in decode.

The oracle convolves token by token from the definition in float64, with the ring layout
(the input at position p in row p % kernel) spelled out here."""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, round_bf16
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, linear_attention
from .gemv import random_bf16

_BF16_NAN = np.uint16(0x7FC0)


def _rb(x: np.ndarray) -> np.ndarray:
    return round_bf16(np.asarray(x, dtype=np.float32)).astype(np.float64)


def naive_conv(x: np.ndarray, w: np.ndarray, ring: np.ndarray, start: int) -> np.ndarray:
    """One sequence's chunk, float64: x [n, C] bf16-valued inputs at positions start ..,
    w [C, kernel], ring [kernel, C] its conv state (updated in place). Returns the bf16-valued
    SiLU outputs [n, C]."""
    kernel = w.shape[1]
    out = np.zeros(x.shape)
    for t in range(x.shape[0]):
        pos = start + t
        acc = w[:, -1] * x[t]
        for j in range(kernel - 1):  # tap j reads the input at position pos - kernel + 1 + j
            p = pos - kernel + 1 + j
            if p >= start:
                acc = acc + w[:, j] * x[p - start]
            elif p >= 0:
                acc = acc + w[:, j] * ring[p % kernel]
        y = _rb(acc)
        out[t] = _rb(y / (1.0 + np.exp(-y)))
    for t in range(max(0, x.shape[0] - (kernel - 1)), x.shape[0]):
        ring[(start + t) % kernel] = x[t]
    return out


def conv_state(rng: np.random.Generator, slots: int, kernel: int, channels: int,
               fresh_slots: list[int]) -> np.ndarray:
    """A random ring pool bf16 [slots, kernel, channels]; the fresh slots hold NaN."""
    state = random_bf16(rng, (slots, kernel, channels), 1.0)
    state[fresh_slots] = _BF16_NAN
    return state


def _case(rng: np.random.Generator, lens: list[int], starts: list[int], channels: int,
          kernel: int) -> KernelCase:
    n, total = len(lens), sum(lens)
    pitch = channels + 24
    slots = rng.permutation(n + 1)[:n].astype(np.int32)
    state = conv_state(rng, n + 1, kernel, channels,
                       [int(slots[i]) for i, start in enumerate(starts) if start == 0])
    inputs = {"x": random_bf16(rng, (total, pitch), 1.0),
              "w": random_bf16(rng, (channels, kernel), 0.5), "conv_state": state,
              "state_slots": slots,
              "cu_q": np.concatenate([[0], np.cumsum(lens)]).astype(np.int32),
              "kv_lens": (np.asarray(starts) + np.asarray(lens)).astype(np.int32)}

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        linear_attention.conv1d_silu(KernelCache(backend), stream, p["x"], pitch, p["w"],
                                     p["conv_state"], p["state_slots"], p["cu_q"], p["kv_lens"],
                                     p["out"], n, channels, kernel, max(lens))

    def oracle(inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = bf16_bits_to_f32(inp["x"]).astype(np.float64)[:, :channels]
        w = bf16_bits_to_f32(inp["w"]).astype(np.float64)
        st = bf16_bits_to_f32(inp["conv_state"]).astype(np.float64)
        out = np.zeros((total, channels))
        lo = 0
        for i in range(n):
            out[lo:lo + lens[i]] = naive_conv(x[lo:lo + lens[i]], w, st[slots[i]], starts[i])
            lo += lens[i]
        return {"out": out, "conv_state": st}

    outputs = {"out": OutputSpec(DType.BF16, (total, channels)),
               "conv_state": OutputSpec(DType.BF16, state.shape, tol=(0.0, 0.0))}
    name = f"conv1d_c{channels}_k{kernel}_" + "_".join(f"{s}+{q}" for s, q in zip(starts, lens))
    return KernelCase(name, "conv1d", inputs, outputs, run, oracle,
                      compare_mask={"conv_state": defined_rows(state.shape, slots, lens,
                                                               starts)})


def defined_rows(shape: tuple[int, ...], slots: np.ndarray, lens: list[int],
                 starts: list[int]) -> np.ndarray:
    """Ring elements defined after the step: all of a continuing sequence's slot (and of
    unused slots); of a fresh one's (NaN before) only the rows its last inputs went to."""
    kernel = shape[1]
    keep = np.ones(shape, dtype=bool)
    for slot, q_len, start in zip(slots, lens, starts):
        if start == 0:
            keep[slot] = False
            for t in range(max(0, q_len - (kernel - 1)), q_len):
                keep[slot, t % kernel] = True
    return keep


@kernel_cases("conv1d")
def conv1d_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [
        _case(rng, [5, 1, 2, 70], [0, 9, 4, 0], 200, 4),     # short chunks keep old history
        _case(rng, [130, 64], [3, 0], 136, 4),                # three token tiles
        _case(rng, [1, 1, 1], [1, 0, 2], 77, 2),              # kernel 2, odd channels
        _case(rng, [1] * 4, [8, 0, 1, 500], 8192, 4),          # Qwen3.5 conv_dim decode
        _case(rng, [9], [2], 64, 6),                          # a wider kernel
    ]
