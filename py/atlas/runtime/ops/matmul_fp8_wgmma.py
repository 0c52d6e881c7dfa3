"""Launch builder for FP8 E4M3 weights on Hopper's FP8 tensor cores: y[m, n] = x[m, k] @
dequant(w)[n, k].T for 1..8 rows (kernels/hopper/common/gemm_decode_fp8.cu).

Why a kernel of its own: the FP8 GEMVs decode every weight byte on the CUDA cores (the E4M3
convert runs on the ALU pipe, which binds them near 2.6-2.7 TB/s), while wgmma reads E4M3
operands natively. The kernel is the TMA decode GEMM's mould (matmul_decode.py) with 128-value
k-tiles, x split exactly into two E4M3 parts, and each k-tile's products promoted to f32 with
its scales. Its outputs: bf16, f32 logits (a quantized LM head), or the SwiGLU activation of a
fused [gate | up] weight. `uses` decides, per product, whether a `matmul_quant` route takes it.
"""

from __future__ import annotations

from typing import Literal

from .. import kernel_abi
from ..gpu import DevicePtr, KernelSig, Stream
from . import KernelCache, matmul_quant  # matmul_quant routes here: attributes at call time
from ._preconditions import require_aligned
from .matmul_decode import decode_split
from .routes import DECODE_GEMM_TMA_SPLITS

#: rows the kernel takes: wgmma N = 8 holds 4 tokens' (hi, mid) pairs, N = 16 holds 8
FP8_WGMMA_MAX_M = 8
#: one consumer warpgroup and a producer warp
FP8_THREADS = 160
#: E4M3 values of a k-tile (one 128-byte swizzle row)
K_TILE = 128
#: gemm_decode_fp8.cu's ring: an 8 KiB weight tile a slot and its 64 rows' scales; the most
#: slots a launch may ask for
FP8_SLOT_BYTES = 64 * K_TILE
FP8_SLOT_SCALE_BYTES = 64 * 4
FP8_MAX_STAGES = 16
#: ... the most k-tiles of x a block holds (either wgmma width: the shared memory is the
#: launch's, so batch 8's 2 KiB tiles need no narrower k range than batch 1's 1 KiB ones),
#: their bytes at the widest, and a float scale per (token, k-tile)
FP8_MAX_X_TILES = 32
FP8_X_BYTES = FP8_MAX_X_TILES * 16 * K_TILE
FP8_X_SCALE_BYTES = FP8_MAX_X_TILES * 8 * 4
#: its two partial tiles of 8 tokens x (64 + 4) f32 (gemm_decode_tile.cuh partial_pitch), or
#: a split's inbox
FP8_PART_BYTES = 2 * 8 * 68 * 4
#: the 1 KiB alignment slack
FP8_ALIGN = 1024
#: the most dynamic shared memory a launch asks for (the deepest ring past the largest x)
FP8_SMEM_MAX = (FP8_ALIGN + FP8_X_BYTES + FP8_X_SCALE_BYTES + FP8_PART_BYTES
                + FP8_MAX_STAGES * (FP8_SLOT_BYTES + FP8_SLOT_SCALE_BYTES))


def x_bytes(m: int, k: int, split: int) -> int:
    """The x tiles of the largest k range a rank of `split` takes (its wgmma N rows of 128
    bytes a k-tile)."""
    return -(-(-(-k // K_TILE)) // split) * wgmma_cols(m) * K_TILE


def smem_bytes(m: int, k: int, split: int, stages: int) -> int:
    """A launch's dynamic shared memory: a ring of `stages` slots past its x tiles, scales and
    partial tiles (the kernel derives its ring's depth from this size). Smaller than the
    deepest ring so that the kernels launched beside it under PDL find room on its SMs."""
    if not 2 <= stages <= FP8_MAX_STAGES:
        raise ValueError(f"gemm_fp8: {stages} ring slots is outside 2..{FP8_MAX_STAGES}")
    return (FP8_ALIGN + x_bytes(m, k, split) + FP8_X_SCALE_BYTES + FP8_PART_BYTES
            + stages * (FP8_SLOT_BYTES + FP8_SLOT_SCALE_BYTES))


#: u64 words of a block's trace (gemm_decode_fp8.cu kTraceWords): phase stamps (ns) at
#: TRACE_PHASES' indices, the block's SM id at TRACE_SM_WORD
TRACE_WORDS = 16
TRACE_SM_WORD = 15
TRACE_PHASES = {"start": 0, "waited": 1, "x staged": 2, "first tile": 3, "last tile": 4,
                "epilogue": 5, "end": 6, "producer ring issued": 8, "producer waited": 9,
                "producer all issued": 10}
#: words of the traced twins' wait totals (ns): consumer thread 0 waiting for landed slots,
#: the producer for drained ones
TRACE_WAITS = {"consumer waited for weights": 11, "producer waited for slots": 12}

Out = Literal["bf16", "f32", "swiglu"]
_KIND = {"bf16": "bf16", "f32": "f32", "swiglu": "swiglu_bf16"}
_SIGS: dict[tuple[Out, int], KernelSig] = {}
_TRACE_SIGS: dict[int, KernelSig] = {}
for _sig in vars(kernel_abi).values():
    if isinstance(_sig, KernelSig) and _sig.module == "gemm_decode_fp8":
        _name, _, _split = _sig.func.removeprefix("gemm_decode_fp8_").partition("_split")
        if _name == "trace_bf16":
            _TRACE_SIGS[int(_split or 1)] = _sig
            continue
        _out = next(o for o, kind in _KIND.items() if kind == _name)
        _SIGS[_out, int(_split or 1)] = _sig


def wgmma_cols(m: int) -> int:
    """The kernel's wgmma N for m rows: two E4M3 parts a token, 8 or 16."""
    return 8 if m <= 4 else 16


def fitting_splits(k: int) -> tuple[int, ...]:
    """The cluster splits whose blocks' k ranges fit their x tiles (FP8_MAX_X_TILES)."""
    k_tiles = -(-k // K_TILE)
    return tuple(s for s in DECODE_GEMM_TMA_SPLITS if -(-k_tiles // s) <= FP8_MAX_X_TILES)


def supports(w: object, m: int) -> bool:
    """Whether the kernel can compute an m-row product of w: an FP8 weight whose scale is
    constant over each 128-column tile (128x128 blocks, per channel, per tensor), codes
    16-byte aligned (its TMA map), k a multiple of 16, a split that fits its x tiles."""
    return (isinstance(w, matmul_quant.Fp8Weight) and 1 <= m <= FP8_WGMMA_MAX_M and w.k % 16 == 0
            and w.codes % 16 == 0
            and (w.smap.col_stride == 0 or w.smap.col_shift >= 7)
            and bool(fitting_splits(w.k)))


def available(kc: KernelCache) -> bool:
    """Whether the loaded kernel set has the module (sm_90a sets)."""
    return "gemm_decode_fp8" in kc.backend.module_names


def uses(kc: KernelCache, w: object, m: int) -> bool:
    """Whether a `matmul_quant` route runs an m-row product of w here: switched on
    (ATLAS_QUANT_FP8_WGMMA=1), the module loaded, and `supports`."""
    return kc.routes.quant_fp8_wgmma and available(kc) and supports(w, m)


def split_for(kc: KernelCache, m: int, n: int, k: int, out: Out) -> int:
    """The cluster split of a launch: the routes' forced one (ATLAS_DECODE_GEMM_SPLIT) where
    it fits, else matmul_decode.decode_split's wave rule over the fitting splits, with the
    blocks the device holds at each (two 160-thread blocks an SM, clusters in a GPC). The
    rule counts k-tiles of 64 bf16 columns: 128 E4M3 columns are the same 128 bytes."""
    splits = fitting_splits(k)
    forced = kc.routes.decode_gemm_split
    if forced is not None and forced in splits:
        return forced
    return decode_split(m, n, k // 2, kc.facts.sm_count, None, 1,
                        _resident(kc, out, m, k, splits), splits)


def _resident(kc: KernelCache, out: Out, m: int, k: int,
              splits: tuple[int, ...]) -> dict[int, int] | None:
    """The blocks of each split's entry the launch may keep at once (`resident`, asked once
    per shape by KernelCache); None where the routes do not ask or the backend cannot say."""
    if not kc.routes.decode_gemm_occupancy:
        return None
    counts = {}
    for split in splits:
        blocks = resident(kc, _SIGS[out, split], m, k, split)
        if blocks is None:
            return None
        counts[split] = blocks
    return counts


def resident(kc: KernelCache, sig: KernelSig, m: int, k: int, split: int) -> int | None:
    """The blocks of entry `sig` at its launch's shared memory that the device holds at once,
    at most the routes' blocks an SM (ATLAS_QUANT_FP8_WGMMA_SM_BLOCKS: a shallow ring must
    not spread the grid over more slots than the deep one's two); None: the backend cannot
    say."""
    nbytes = smem_bytes(m, k, split, kc.routes.quant_fp8_wgmma_stages)
    launch = kc.get_with_shared(sig, FP8_SMEM_MAX)
    blocks = kc.resident_blocks(launch.handle, FP8_THREADS, nbytes, split)
    if blocks is None:
        return None
    cap = kc.routes.quant_fp8_wgmma_sm_blocks * kc.facts.sm_count
    return min(blocks, max(split, cap // split * split))


def gemm_fp8(kc: KernelCache, stream: Stream, x: DevicePtr, w: matmul_quant.Fp8Weight,
             y: DevicePtr, m: int, out: Out = "bf16", split: int | None = None) -> None:
    """y = x @ dequant(w).T, 1 <= m <= 8 (x bf16 [m, k]); `out` 'bf16' (y [m, n]), 'f32'
    (logits: the bf16-rounded sums widened) or 'swiglu' (w the fused [gate | up] weight, n
    even; y the activation [m, n / 2]). `split` forces the cluster split (check cases).
    Grid ceil(n / 64) * split (a gated tile holds 32 gate/up pairs: the same count)."""
    if not supports(w, m):
        raise ValueError(f"gemm_fp8: m={m}, FP8 [{w.n}, {w.k}] (scale map {w.smap}) is not "
                         "a product the FP8 tensor-core kernel takes (matmul_fp8_wgmma.supports)")
    if out == "swiglu" and w.n % 2:
        raise ValueError(f"gemm_fp8: the SwiGLU output needs an even n, got {w.n}")
    require_aligned("gemm_fp8", "x", x, 8)
    require_aligned("gemm_fp8", "y", y, 4 if out == "f32" else 2)
    if split is None:
        split = split_for(kc, m, w.n, w.k, out)
    elif split not in fitting_splits(w.k):
        raise ValueError(f"gemm_fp8: split {split} is not one of {fitting_splits(w.k)} "
                         f"(k={w.k}, m={m})")
    rows = 32 if out == "swiglu" else 64  # a gated slot is two half boxes
    wmap = kc.tensor_map(w.codes, w.n, w.k // 2, rows)
    _launch(kc, stream, _SIGS[out, split], x, w, y, m, split, wmap)


def _launch(kc: KernelCache, stream: Stream, sig: KernelSig, x: DevicePtr,
            w: matmul_quant.Fp8Weight, y: DevicePtr, m: int, split: int, wmap: bytes,
            *extra: DevicePtr) -> None:
    """Entry `sig` on its persistent grid with the routes' ring depth."""
    nbytes = smem_bytes(m, w.k, split, kc.routes.quant_fp8_wgmma_stages)
    launch = kc.get_with_shared(sig, FP8_SMEM_MAX)
    blocks = grid_blocks(w.n, split, resident(kc, sig, m, w.k, split))
    launch(stream, blocks, FP8_THREADS, nbytes, x, w.codes, w.scales, y, m, w.n, w.k,
           *w.map_args, wmap, *extra)


def grid_blocks(n: int, split: int, resident: int | None = None) -> int:
    """Blocks of a launch: clusters of `split`, one for each 64-row tile (32 gate/up pairs)
    up to the clusters the device holds at once (`resident` blocks; None: unknown, a cluster
    a tile); the kernel is persistent, cluster c taking tiles c, c + C, ... of C clusters."""
    clusters = -(-n // 64)
    if resident is not None:
        clusters = max(1, min(clusters, resident // split))
    return clusters * split


def gemm_fp8_traced(kc: KernelCache, stream: Stream, x: DevicePtr,
                    w: matmul_quant.Fp8Weight, y: DevicePtr, m: int, split: int,
                    trace: DevicePtr) -> None:
    """The bf16 product of `gemm_fp8` at `split` (1..4, fitting) on the traced twin: the
    same instructions, each block's phase stamps in trace (u64 [grid_blocks, TRACE_WORDS],
    zeroed by the caller; tools/gpu/trace_decode_fp8.py)."""
    if not supports(w, m) or split not in _TRACE_SIGS or split not in fitting_splits(w.k):
        raise ValueError(f"gemm_fp8_traced: m={m}, FP8 [{w.n}, {w.k}] at split {split} has no "
                         f"traced entry (splits {sorted(_TRACE_SIGS)} that fit)")
    wmap = kc.tensor_map(w.codes, w.n, w.k // 2, 64)
    _launch(kc, stream, _TRACE_SIGS[split], x, w, y, m, split, wmap, trace)


def traced_blocks(kc: KernelCache, w: matmul_quant.Fp8Weight, m: int, split: int) -> int:
    """Blocks of a traced launch of w at `split` (its trace holds a row for each): gemm_fp8's
    grid for the traced entry."""
    return grid_blocks(w.n, split, resident(kc, _TRACE_SIGS[split], m, w.k, split))
