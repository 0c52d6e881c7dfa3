"""Launch builders for the quantized decode GEMV on tensor cores (hopper/common/gemv_mma_quant.cu).

y[m, n] = x[m, k] @ dequant(w)[n, k].T for 1 <= m <= 64 over FP8 (`Fp8Weight`) or NVFP4
(`Nvfp4Weight`) weights: the quantized bytes stream from HBM once for any m, decoded into
bf16 MMA fragments in registers, 32 weight rows a block, K split over 8 warps, each with a
cp.async ring in dynamic shared memory. The geometry below mirrors the kernel's constants.
Only hopper sets build the module; `available` says whether the loaded kernels have it,
`supports` whether a weight meets the kernel's preconditions (else matmul_quant keeps the
CUDA-core GEMV passes).

Batches of 1..8 rows take the register-fed twin (hopper/common/gemv_quant_direct.cu: the
same fragments loaded straight from HBM into registers, no shared-memory ring; FP8 on its
one-block-per-tile loop, NVFP4 on its pipelined loop, one block per 16-row tile, or with
ATLAS_QUANT_PERSISTENT=1 a one-wave grid of blocks looping over their tiles, `direct_blocks`;
`direct_loop` says which loop) where it is loaded, switched on (ATLAS_QUANT_DIRECT) and the
weight meets its preconditions (`direct_supports`). Its `_swiglu` entry points end a dense
MLP's [gate | up] product with the SwiGLU (`gemv_direct_swiglu`), so no silu_mul launch
follows. Its NVFP4 entry points decode E2M1 by bit moves; ATLAS_QUANT_E2M1_LUT=1 takes their
byte-table twins (`direct_sig`), the A/B of that decode. With ATLAS_QUANT_STAGED=1 the same
products run staged through shared memory by bulk copies (`gemv_qs_*` entry points, one block
of 16 warps per SM) wherever the weight meets that variant's preconditions (`staged_supports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..gpu import DevicePtr, KernelSig, Stream
from ..kernel_abi import (GEMV_MMA_FP8, GEMV_MMA_FP8_F32, GEMV_MMA_FP8_SMALL, GEMV_MMA_NVFP4,
                          GEMV_MMA_NVFP4_F32, GEMV_MMA_NVFP4_SMALL, GEMV_QD_FP8,
                          GEMV_QD_FP8_F32, GEMV_QD_FP8_N1, GEMV_QD_FP8_N1_F32,
                          GEMV_QD_FP8_N1_SWIGLU, GEMV_QD_FP8_N2, GEMV_QD_FP8_N2_F32,
                          GEMV_QD_FP8_N2_SWIGLU, GEMV_QD_FP8_PIPE, GEMV_QD_FP8_PIPE_F32,
                          GEMV_QD_FP8_PIPE_SWIGLU, GEMV_QD_FP8_SWIGLU, GEMV_QD_NVFP4,
                          GEMV_QD_NVFP4_F32, GEMV_QD_NVFP4_LUT, GEMV_QD_NVFP4_LUT_F32,
                          GEMV_QD_NVFP4_LUT_SWIGLU, GEMV_QD_NVFP4_N1, GEMV_QD_NVFP4_N1_F32,
                          GEMV_QD_NVFP4_N1_SWIGLU, GEMV_QD_NVFP4_N2, GEMV_QD_NVFP4_N2_F32,
                          GEMV_QD_NVFP4_N2_SWIGLU, GEMV_QD_NVFP4_SWIGLU, GEMV_QD_NVFP4_TILE,
                          GEMV_QD_NVFP4_TILE_F32, GEMV_QD_NVFP4_TILE_SWIGLU, GEMV_QS_FP8,
                          GEMV_QS_FP8_F32, GEMV_QS_FP8_SWIGLU, GEMV_QS_NVFP4, GEMV_QS_NVFP4_F32,
                          GEMV_QS_NVFP4_SWIGLU)
from . import KernelCache
from ._preconditions import require_aligned

if TYPE_CHECKING:
    from .matmul_nvfp4 import Nvfp4Weight
    from .matmul_quant import Fp8Weight

#: largest batch: eight 8-row MMA B tiles (gemv_mma_quant.cu)
MMA_QUANT_MAX_M = 64
#: batches up to this many rows take the _small entry points (one B tile)
MMA_QUANT_SMALL_M = 8
#: weight rows per block (kTiles 16-row A tiles) and threads (kWarps warps)
MMA_ROWS = 32
MMA_THREADS = 256
#: k values per lane-quad step: k must be a multiple
MMA_STEP_K = 64
#: per-warp ring: at most this many steps; the block's rings aim at this many bytes (m <= 8:
#: two blocks per SM; more rows: one, whose registers allow no second) but always hold two
_MAX_STAGES = 12
_RING_BUDGET = {True: 110 * 1024, False: 200 * 1024}
_WARPS = MMA_THREADS // 32
#: a lane's bytes of one weight row per step, and the group-scale bytes per stage
_W_BYTES = {"fp8": 16, "nvfp4": 8}
_SCALE_BYTES = {"fp8": 0, "nvfp4": (MMA_ROWS // 16) * 16 * 4}


def stage_bytes(fmt: str, m: int) -> int:
    """Bytes of one warp's ring stage: weight rows g and g + 8 of both A tiles per lane,
    NVFP4 group scales, and 32 bytes of x per lane of each batch row: 8 rows per B tile, or
    at m <= 8 the rows there are rounded up to a power of two (more stages fit)."""
    btiles = -(-m // 8)
    xrows = 1 << (m - 1).bit_length() if m <= MMA_QUANT_SMALL_M else 8
    return (2 * (MMA_ROWS // 16) * 32 * _W_BYTES[fmt] + _SCALE_BYTES[fmt]
            + btiles * 4 * xrows * 32)


def ring_bytes(fmt: str, m: int) -> int:
    """Dynamic shared memory of a launch (gemv_mma_quant.cu ring_stages * stage_bytes)."""
    stage = stage_bytes(fmt, m)
    budget = _RING_BUDGET[m <= MMA_QUANT_SMALL_M]
    stages = max(2, min(_MAX_STAGES, budget // (_WARPS * stage)))
    return _WARPS * stages * stage


#: the most dynamic shared memory a launch needs: what the kernels opt in to
MMA_QUANT_MAX_SHARED = max(ring_bytes(f, m) for f in _W_BYTES
                           for m in range(1, MMA_QUANT_MAX_M + 1))


def available(kc: KernelCache) -> bool:
    """Whether the backend's loaded kernels include gemv_mma_quant (hopper sets do; gb10
    sets, the host references and the mock load no such module)."""
    return GEMV_MMA_FP8.module in kc.backend.module_names


def supports(w: "Fp8Weight | Nvfp4Weight") -> bool:
    """The kernel's preconditions on the weight: k a multiple of 64 and, for FP8, scale
    blocks spanning a whole 64-column step (or one scale per row / tensor)."""
    if w.k % MMA_STEP_K:
        return False
    smap = getattr(w, "smap", None)
    return smap is None or smap.col_stride == 0 or smap.col_shift >= 6


#: the register-fed kernel (gemv_quant_direct.cu): weight rows per block, threads, and the
#: k values one lane-quad step covers (k must be a multiple)
DIRECT_ROWS = 16
DIRECT_THREADS = 256
DIRECT_STEP_K = {"fp8": 64, "nvfp4": 128}


#: blocks of the register-fed kernel one SM holds (its __launch_bounds__ minimum: 128
#: registers x 256 threads, two blocks fill the register file)
DIRECT_BLOCKS_PER_SM = 2
#: ... on each loop: the narrow pipelined loops (ATLAS_QUANT_NARROW) fit 64 / 80 registers,
#: four / three blocks an SM
LOOP_BLOCKS_PER_SM = {"tile": DIRECT_BLOCKS_PER_SM, "pipe": DIRECT_BLOCKS_PER_SM,
                      "lut": DIRECT_BLOCKS_PER_SM, "n1": 4, "n2": 3}


def direct_blocks(tiles: int, sm_count: int, persistent: bool,
                  per_sm: int | None = None, most_per_sm: int = DIRECT_BLOCKS_PER_SM) -> int:
    """Grid of the register-fed kernel for `tiles` tiles (16 weight rows, or 8 SwiGLU
    features, each; a block loops over tiles blockIdx.x, + gridDim.x, ...).

    One block per tile (`persistent` off, the default: gpu16 timed it ahead on NVFP4
    gate_up) runs ~1.5 waves at Qwen3-8B's qkv (384 tiles, 264 slots): the second wave's
    blocks start when the first ones end. Persistent: one wave of 1 or 2 blocks per SM,
    whichever gives the busiest SM the fewest tiles (ties: 2, more loads in flight). Qwen3-8B's qkv
    thus takes 132 blocks of <= 3 tiles (2.91 on average), its o / down 256 blocks of one
    tile, gate_up 264 blocks of <= 6 (5.82). `per_sm` (1 or 2) forces that many blocks per
    SM instead (ATLAS_QUANT_BLOCKS_PER_SM, a device sweep: one block per SM has 8 warps'
    loads in flight, two 16). `most_per_sm`: the loop's occupancy (LOOP_BLOCKS_PER_SM)."""
    if not persistent or tiles <= 0:
        return max(tiles, 1)
    if per_sm is not None:
        if not 1 <= per_sm <= most_per_sm:
            raise ValueError(f"direct_blocks: per_sm={per_sm} must be in 1..{most_per_sm}")
        return min(tiles, sm_count * per_sm)
    best_load, best_grid = 0, 0
    for blocks in range(most_per_sm, 0, -1):
        grid = min(tiles, sm_count * blocks)
        load = busiest_sm_tiles(tiles, grid, sm_count)
        if not best_grid or load < best_load:
            best_load, best_grid = load, grid
    return best_grid


def busiest_sm_tiles(tiles: int, grid: int, sm_count: int) -> int:
    """Tiles the busiest SM runs when `grid` blocks (spread evenly over the SMs, as the block
    scheduler places one wave) loop over `tiles` tiles."""
    return -(-grid // sm_count) * -(-tiles // grid)


#: the staged variant (gemv_quant_direct.cu gemv_staged): threads of its one block per SM,
#: its ring's most units (kMaxStages) and the dynamic shared memory a launch gives the ring
#: (~200 KiB: 5 NVFP4 / 6 FP8 units of 16 rows x 32 steps; the kernel's static shared
#: memory, 16.1 KiB of partial sums and barriers, fits beside it in the SM's 227 KiB)
STAGED_THREADS = 512
STAGED_MAX_STAGES = 16
STAGED_SHARED = 200 * 1024


def staged_supports(w: "Fp8Weight | Nvfp4Weight") -> bool:
    """The staged variant's preconditions beyond `direct_supports`: bulk copies need 16-byte
    aligned sources and sizes. Codes always are (both weight types require it); NVFP4 group
    scales must be too, their rows (k / 16 bytes) a multiple of 16 bytes: k % 256 == 0."""
    if not direct_supports(w):
        return False
    return _fmt(w) == "fp8" or (w.k % 256 == 0 and w.scales % 16 == 0)


#: formats whose products of 1..8 rows take the staged variant by default (its device A/B
#: decides; ATLAS_QUANT_STAGED=1 / 0 forces it for both / neither)
STAGED_BY_DEFAULT: frozenset[str] = frozenset()


def uses_staged(kc: KernelCache, w: "Fp8Weight | Nvfp4Weight") -> bool:
    """Whether a product of 1..8 rows on the register-fed kernel runs its staged variant: the
    weight meets `staged_supports`, then the route switch (ATLAS_QUANT_STAGED) or, unset,
    STAGED_BY_DEFAULT."""
    forced = kc.routes.quant_staged
    wanted = _fmt(w) in STAGED_BY_DEFAULT if forced is None else forced
    return wanted and staged_supports(w)


#: the staged entry points: (format, output) -> sig
_STAGED = {("fp8", "bf16"): GEMV_QS_FP8, ("fp8", "f32"): GEMV_QS_FP8_F32,
           ("fp8", "swiglu"): GEMV_QS_FP8_SWIGLU, ("nvfp4", "bf16"): GEMV_QS_NVFP4,
           ("nvfp4", "f32"): GEMV_QS_NVFP4_F32, ("nvfp4", "swiglu"): GEMV_QS_NVFP4_SWIGLU}


def _launch_direct(kc: KernelCache, stream: Stream, w: "Fp8Weight | Nvfp4Weight", out: str,
                   tiles: int, x: DevicePtr, y: DevicePtr, m: int) -> None:
    """One launch of the register-fed entry point for `out` over `tiles` tiles, or of its
    staged twin (one block per SM, at most one per tile) where switched on and supported."""
    if uses_staged(kc, w):
        launch = kc.get_with_shared(_STAGED[_fmt(w), out], STAGED_SHARED, most_shared=True)
        launch(stream, min(tiles, kc.facts.sm_count), STAGED_THREADS, STAGED_SHARED, x,
               *_args(w, y, m))
        return
    per_sm = kc.routes.quant_blocks_per_sm
    loop = direct_loop(kc, w)
    grid = tiles if loop == "tile" else direct_blocks(
        tiles, kc.facts.sm_count, kc.routes.quant_persistent or per_sm is not None, per_sm,
        LOOP_BLOCKS_PER_SM[loop])
    kc.get(direct_sig(kc, w, out))(stream, grid, DIRECT_THREADS, 0, x, *_args(w, y, m))


def _fmt(w: "Fp8Weight | Nvfp4Weight") -> str:
    return "fp8" if hasattr(w, "smap") else "nvfp4"


def direct_supports(w: "Fp8Weight | Nvfp4Weight") -> bool:
    """The register-fed kernel's preconditions: `supports`, and for NVFP4 k % 128 == 0 (a
    lane's step is 32 values of a row)."""
    return supports(w) and w.k % DIRECT_STEP_K[_fmt(w)] == 0


def uses_direct(kc: KernelCache, w: "Fp8Weight | Nvfp4Weight", m: int) -> bool:
    """Whether an m-row tensor-core product runs on gemv_quant_direct rather than on the
    ring kernel: 1..8 rows and a weight meeting its preconditions, then the route switch
    (ATLAS_QUANT_DIRECT forces it on / off), else wherever the loaded set has the module."""
    if m > MMA_QUANT_SMALL_M or not direct_supports(w):
        return False
    forced = kc.routes.quant_direct
    return GEMV_QD_FP8.module in kc.backend.module_names if forced is None else forced


#: the register-fed kernel's entry points: (format, output, loop) -> sig; the loop is 'tile'
#: (one block per tile), 'pipe' (pipelined, any grid) or NVFP4's 'lut' (pipelined, byte tables)
_DIRECT = {("fp8", "bf16", "tile"): GEMV_QD_FP8, ("fp8", "f32", "tile"): GEMV_QD_FP8_F32,
           ("fp8", "swiglu", "tile"): GEMV_QD_FP8_SWIGLU,
           ("fp8", "bf16", "pipe"): GEMV_QD_FP8_PIPE, ("fp8", "f32", "pipe"): GEMV_QD_FP8_PIPE_F32,
           ("fp8", "swiglu", "pipe"): GEMV_QD_FP8_PIPE_SWIGLU,
           ("nvfp4", "bf16", "pipe"): GEMV_QD_NVFP4, ("nvfp4", "f32", "pipe"): GEMV_QD_NVFP4_F32,
           ("nvfp4", "swiglu", "pipe"): GEMV_QD_NVFP4_SWIGLU,
           ("nvfp4", "bf16", "tile"): GEMV_QD_NVFP4_TILE,
           ("nvfp4", "f32", "tile"): GEMV_QD_NVFP4_TILE_F32,
           ("nvfp4", "swiglu", "tile"): GEMV_QD_NVFP4_TILE_SWIGLU,
           ("nvfp4", "bf16", "lut"): GEMV_QD_NVFP4_LUT,
           ("nvfp4", "f32", "lut"): GEMV_QD_NVFP4_LUT_F32,
           ("nvfp4", "swiglu", "lut"): GEMV_QD_NVFP4_LUT_SWIGLU,
           ("fp8", "bf16", "n1"): GEMV_QD_FP8_N1, ("fp8", "f32", "n1"): GEMV_QD_FP8_N1_F32,
           ("fp8", "swiglu", "n1"): GEMV_QD_FP8_N1_SWIGLU,
           ("fp8", "bf16", "n2"): GEMV_QD_FP8_N2, ("fp8", "f32", "n2"): GEMV_QD_FP8_N2_F32,
           ("fp8", "swiglu", "n2"): GEMV_QD_FP8_N2_SWIGLU,
           ("nvfp4", "bf16", "n1"): GEMV_QD_NVFP4_N1, ("nvfp4", "f32", "n1"): GEMV_QD_NVFP4_N1_F32,
           ("nvfp4", "swiglu", "n1"): GEMV_QD_NVFP4_N1_SWIGLU,
           ("nvfp4", "bf16", "n2"): GEMV_QD_NVFP4_N2, ("nvfp4", "f32", "n2"): GEMV_QD_NVFP4_N2_F32,
           ("nvfp4", "swiglu", "n2"): GEMV_QD_NVFP4_N2_SWIGLU}

#: formats whose register-fed products take a narrow pipelined loop by default, and which
#: (1: one step a batch, four blocks an SM; 2: two steps, three blocks); ATLAS_QUANT_NARROW
#: overrides it for both formats (0: neither)
NARROW_BY_DEFAULT: dict[str, int] = {}


def narrow_loop(kc: KernelCache, fmt: str) -> str | None:
    """The narrow loop ('n1' / 'n2') a format's products take, or None: the route switch
    (ATLAS_QUANT_NARROW); unset, NARROW_BY_DEFAULT unless ATLAS_QUANT_TILE_LOOP forces the
    tile or the wide pipelined loop."""
    forced = kc.routes.quant_narrow
    if forced is None and kc.routes.quant_tile_loop is not None:
        return None
    steps = NARROW_BY_DEFAULT.get(fmt, 0) if forced is None else forced
    return f"n{steps}" if steps else None


def direct_loop(kc: KernelCache, w: "Fp8Weight | Nvfp4Weight") -> str:
    """Which loop of the register-fed kernel runs `w`: 'tile' (gemv_direct_tile, one block
    per tile: FP8's default, gpu18 timed it 20-25% ahead), 'pipe' (gemv_direct: NVFP4's
    default, 7-11% ahead with its cheaper decode; the one-wave grid needs it), 'lut' (NVFP4
    on the byte-table decode, ATLAS_QUANT_E2M1_LUT=1) or 'n1' / 'n2' (gemv_direct on narrow
    batches, more blocks per SM: `narrow_loop`). ATLAS_QUANT_TILE_LOOP=1 / 0 forces tile /
    pipe for both formats (the A/B) where no narrow loop is chosen."""
    fmt, routes = _fmt(w), kc.routes
    if fmt == "nvfp4" and routes.quant_e2m1_lut:
        return "lut"
    narrow = narrow_loop(kc, fmt)
    if narrow is not None:
        return narrow
    if routes.quant_persistent or routes.quant_blocks_per_sm is not None:
        return "pipe"
    if routes.quant_tile_loop is not None:
        return "tile" if routes.quant_tile_loop else "pipe"
    return "tile" if fmt == "fp8" else "pipe"


def direct_sig(kc: KernelCache, w: "Fp8Weight | Nvfp4Weight", out: str) -> KernelSig:
    """The register-fed entry point for `out` ('bf16', 'f32', 'swiglu') on `direct_loop`."""
    return _DIRECT[_fmt(w), out, direct_loop(kc, w)]


def _args(w: "Fp8Weight | Nvfp4Weight", y: DevicePtr, m: int) -> tuple:
    """The kernels' arguments after x: the weight's buffers, y, m, n, k (and the FP8 map)."""
    if _fmt(w) == "fp8":
        return (w.codes, w.scales, y, m, w.n, w.k, *w.map_args)
    return (w.codes, w.scales, w.row_scales, y, m, w.n, w.k)


def _require_supported(name: str, w: "Fp8Weight | Nvfp4Weight", x: DevicePtr) -> None:
    if not supports(w):
        raise ValueError(f"{name}: weight [{w.n}, {w.k}] needs k % {MMA_STEP_K} == 0 and scale "
                         "blocks of at least 64 columns")
    require_aligned(name, "x", x, 16)
    if _fmt(w) == "nvfp4":
        require_aligned(name, "scales", w.scales, 4)


def gemv_mma(kc: KernelCache, stream: Stream, x: DevicePtr, w: "Fp8Weight | Nvfp4Weight",
             y: DevicePtr, m: int) -> None:
    """y[m, n] = x[m, k] @ dequant(w).T on tensor cores, 1 <= m <= 64 (bf16 x and y): the
    register-fed kernel where `uses_direct`, else the ring kernel."""
    fmt = _fmt(w)
    name = f"gemv_mma_{fmt}"
    if not 1 <= m <= MMA_QUANT_MAX_M:
        raise ValueError(f"{name}: m={m} must be in 1..{MMA_QUANT_MAX_M}")
    _require_supported(name, w, x)
    require_aligned(name, "y", y, 2)
    if uses_direct(kc, w, m):
        _launch_direct(kc, stream, w, "bf16", -(-w.n // DIRECT_ROWS), x, y, m)
        return
    small = m <= MMA_QUANT_SMALL_M
    sig = {("fp8", True): GEMV_MMA_FP8_SMALL, ("fp8", False): GEMV_MMA_FP8,
           ("nvfp4", True): GEMV_MMA_NVFP4_SMALL, ("nvfp4", False): GEMV_MMA_NVFP4}[fmt, small]
    launch = kc.get_with_shared(sig, MMA_QUANT_MAX_SHARED)
    launch(stream, -(-w.n // MMA_ROWS), MMA_THREADS, ring_bytes(fmt, m), x, *_args(w, y, m))


def gemv_logits(kc: KernelCache, stream: Stream, x: DevicePtr, w: "Fp8Weight | Nvfp4Weight",
                logits: DevicePtr, m: int) -> None:
    """logits f32 [m, n] = the bf16-rounded x @ dequant(w).T, widened (a quantized LM head:
    the bf16 GEMV's f32 output), any m >= 1: the register-fed kernel where `uses_direct`,
    else the ring kernel in passes of up to 64 rows (each pass streams the weight once)."""
    fmt = _fmt(w)
    if m < 1:
        raise ValueError(f"gemv_logits: m={m} must be positive")
    _require_supported("gemv_logits", w, x)
    require_aligned("gemv_logits", "logits", logits, 4)
    if uses_direct(kc, w, m):
        _launch_direct(kc, stream, w, "f32", -(-w.n // DIRECT_ROWS), x, logits, m)
        return
    launch = kc.get_with_shared(GEMV_MMA_FP8_F32 if fmt == "fp8" else GEMV_MMA_NVFP4_F32,
                                MMA_QUANT_MAX_SHARED)
    for r in range(0, m, MMA_QUANT_MAX_M):
        rows = min(MMA_QUANT_MAX_M, m - r)
        launch(stream, -(-w.n // MMA_ROWS), MMA_THREADS, ring_bytes(fmt, rows), x + 2 * r * w.k,
               *_args(w, logits + 4 * r * w.n, rows))


#: features (output columns of the SwiGLU) per block of the `_swiglu` entry points
DIRECT_SWIGLU_FEATURES = 8


def gemv_direct_swiglu(kc: KernelCache, stream: Stream, x: DevicePtr,
                       w: "Fp8Weight | Nvfp4Weight", act: DevicePtr, m: int) -> None:
    """act[m, n / 2] = swiglu(x @ dequant(w).T) for the fused [gate | up] weight w [n, k],
    1 <= m <= 8, on the register-fed kernel (the caller checks `uses_direct`)."""
    if not 1 <= m <= MMA_QUANT_SMALL_M:
        raise ValueError(f"gemv_direct_swiglu: m={m} must be in 1..{MMA_QUANT_SMALL_M}")
    if w.n % 2 or not direct_supports(w):
        raise ValueError(f"gemv_direct_swiglu: weight [{w.n}, {w.k}] needs an even n and the "
                         "register-fed kernel's k and scale-block preconditions")
    _require_supported("gemv_direct_swiglu", w, x)
    require_aligned("gemv_direct_swiglu", "act", act, 2)
    _launch_direct(kc, stream, w, "swiglu", -(-(w.n // 2) // DIRECT_SWIGLU_FEATURES), x, act, m)
