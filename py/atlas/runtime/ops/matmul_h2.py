"""Launch builder of the batch-1 decode GEMV on packed half-precision FMAs
(kernels/hopper/common/gemv_h2.cuh): one launch shape for every weight format the kernel
takes (NVFP4: `matmul_nvfp4.gemv_h2`, FP8: `matmul_quant.gemv_fp8_h2`) and its three outputs.
A block owns 4 weight rows (SwiGLU: the gate and up rows of two features), each thread two
16-byte chunks of each row at a time. `launch_h2_ring` runs the same products on the
kernel's cp.async-ring twin (persistent blocks walking the 4-row groups, the next groups'
bytes in flight while one decodes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping

from ..gpu import DevicePtr, KernelSig, Stream
from . import KernelCache
from ._preconditions import require_aligned, warp_threads
from .matmul import GEMV_MAX_THREADS, GEMV_ROWS_PER_BLOCK

#: what an entry point writes: y [1, n] bf16, f32 logits [1, n] (the bf16-rounded sums
#: widened: a quantized LM head), or the SwiGLU activation [1, n / 2] of a fused [gate | up]
H2Out = Literal["bf16", "f32", "swiglu"]


def h2_threads(chunks: int) -> int:
    """Threads per block for rows of `chunks` 16-byte weight chunks: two chunks of each row
    per thread (gemv_core's kUnroll, every load slot used; small blocks, many of them per
    SM), up to 256."""
    return warp_threads(-(-chunks // 2), GEMV_MAX_THREADS)


def _checked(sigs: Mapping[str, KernelSig], out: H2Out, x: DevicePtr, y: DevicePtr, n: int,
             k: int) -> KernelSig:
    """The signature for `out`, after the launch's own preconditions (n even for the SwiGLU,
    16-byte x loads, y aligned to its element)."""
    sig = sigs[out]
    if out == "swiglu" and n % 2:
        raise ValueError(f"{sig.func}: the SwiGLU output needs an even n, got [{n}, {k}]")
    require_aligned(sig.func, "x", x, 16)
    require_aligned(sig.func, "y", y, 4 if out == "f32" else 2)
    return sig


def launch_h2(kc: KernelCache, stream: Stream, sigs: Mapping[str, KernelSig], out: H2Out,
              x: DevicePtr, y: DevicePtr, n: int, k: int, chunk_values: int,
              weight: tuple[DevicePtr, ...], tail: tuple[int, ...] = ()) -> None:
    """One row on the format's entry point for `out` (`sigs`: output -> signature), whose
    arguments are x, the `weight` pointers, y, m = 1, n, k, then `tail` (the format's other
    scalars). The weight checked its own preconditions (k, alignment) when it was built."""
    sig = _checked(sigs, out, x, y, n, k)
    blocks = -(-n // GEMV_ROWS_PER_BLOCK)  # SwiGLU: two features of n / 2 a block, the same
    kc.get(sig)(stream, blocks, h2_threads(k // chunk_values), 0, x, *weight, y, 1, n, k, *tail)


#: whether a row the h2 GEMV takes runs on its ring twin (`launch_h2_ring`) unless
#: ATLAS_QUANT_H2_RING says otherwise (the format's preconditions permitting)
H2_RING_BY_DEFAULT = False
#: the ring's depths (gemv_h2.cuh 2..kH2RingMaxStages) and the one taken unless
#: ATLAS_QUANT_H2_RING_STAGES says otherwise: two tiles in flight while one decodes
RING_MIN_STAGES, RING_MAX_STAGES = 2, 4
RING_DEFAULT_STAGES = 3
#: ring bytes a thread's stage holds (kH2RingSlotBytes: 1 chunk of each of the 4 rows,
#: 16 bytes of codes and a 4-byte scale word each)
RING_STAGE_BYTES_PER_THREAD = GEMV_ROWS_PER_BLOCK * (16 + 4)
#: shared memory an SM keeps per ring block beyond its ring: the two partial-sum buffers
#: (2 KiB) and the 1 KiB the driver reserves per block
RING_BLOCK_OVERHEAD = 3 * 1024
#: registers a thread of the ring kernel holds (nvcc 13.0, sm_90a: 80 under its launch
#: bounds), for the occupancy model where the backend has no device to ask
RING_REGISTERS = 80
SM_REGISTERS = 64 * 1024


@dataclass(frozen=True)
class H2RingPlan:
    """Launch geometry of the ring twin: `grid` persistent blocks of `threads` (gemv_h2's
    width: the sums' order depends on it), `stages` tiles a thread in `shared` bytes of
    dynamic shared memory."""

    grid: int
    threads: int
    stages: int
    shared: int


def ring_chosen(kc: KernelCache) -> bool:
    """Whether a row the h2 GEMV takes runs on the ring twin (the format's preconditions
    permitting): ATLAS_QUANT_H2_RING, else H2_RING_BY_DEFAULT."""
    forced = kc.routes.quant_h2_ring
    return H2_RING_BY_DEFAULT if forced is None else forced


def h2_ring_shape(k: int, chunk_values: int, stages: int | None) -> tuple[int, int, int]:
    """(threads, stages, shared bytes) of the ring twin for rows of k values: gemv_h2's
    threads, `stages` tiles (None: RING_DEFAULT_STAGES)."""
    stages = RING_DEFAULT_STAGES if stages is None else stages
    if not RING_MIN_STAGES <= stages <= RING_MAX_STAGES:
        raise ValueError(f"h2 ring: {stages} stages must be in {RING_MIN_STAGES}.."
                         f"{RING_MAX_STAGES}")
    threads = h2_threads(k // chunk_values)
    return threads, stages, stages * threads * RING_STAGE_BYTES_PER_THREAD


def h2_ring_grid(n: int, resident: int) -> int:
    """Persistent blocks: one per 4-row group up to the blocks the device holds at once."""
    return max(1, min(-(-n // GEMV_ROWS_PER_BLOCK), resident))


def _ring_resident(kc: KernelCache, launch: object, threads: int, shared: int) -> int:
    """Blocks of the ring kernel the device holds at once: the driver's occupancy, or
    without a device the model (registers and shared memory an SM)."""
    resident = kc.resident_blocks(launch.handle, threads, shared, 1)
    if resident is None:
        per_sm = min(SM_REGISTERS // (RING_REGISTERS * threads),
                     kc.facts.shared_memory_per_sm // (shared + RING_BLOCK_OVERHEAD))
        resident = kc.facts.sm_count * per_sm
    return resident


def launch_h2_ring(kc: KernelCache, stream: Stream, sigs: Mapping[str, KernelSig], out: H2Out,
                   x: DevicePtr, y: DevicePtr, n: int, k: int, chunk_values: int,
                   weight: tuple[DevicePtr, ...], tail: tuple[int, ...] = ()) -> H2RingPlan:
    """`launch_h2` on the ring twin (`sigs`: output -> ring signature, whose arguments end
    with `tail`, then the ring's stages); returns the plan it launched."""
    sig = _checked(sigs, out, x, y, n, k)
    threads, stages, shared = h2_ring_shape(k, chunk_values, kc.routes.quant_h2_ring_stages)
    launch = kc.get_with_shared(sig, shared)
    plan = H2RingPlan(h2_ring_grid(n, _ring_resident(kc, launch, threads, shared)), threads,
                      stages, shared)
    launch(stream, plan.grid, plan.threads, plan.shared, x, *weight, y, 1, n, k, *tail,
           plan.stages)
    return plan
