"""Launch builders for the matrix products y[m, n] = sum_k x[m, k] * w[n, k].

`linear` owns the dispatch rule: decode batches in the routes' decode-GEMM range (9..256 rows
by default) take the Hopper skinny wgmma GEMM (gemm_decode_sm90) where the PTX set has it;
from routes.batched_gemv_min_m rows (3 by default) up to BATCHED_MAX_M the tensor-core batched
GEMV (gemv_mma) where the PTX set has it; fewer rows, or up to GEMV_MAX_M without gemv_mma,
stream the weights once through the CUDA-core GEMV (memory-bound decode; one row takes the
leaner single-row entry point, more the cp.async-ring kernel `gemv_ring`, ATLAS_GEMV_RING=0
the register-tiled one); more rows go to the tensor-core GEMM: the
Hopper wgmma kernel (gemm_sm90; its TMA twin gemm_sm90_tma where the set has that, unless
ATLAS_GEMM_TMA=0) where the loaded PTX set has it and its 128x256 tiles give at
least GEMM_SM90_MIN_BLOCKS blocks (prefill), else the mma.sync kernel, with the skinny 64x32
tile whenever the 128x128 tile would leave SMs idle (SM count from the device:
KernelCache.facts). The kernel-path switches (ATLAS_GEMM_SM90, ATLAS_BATCHED_GEMV,
ATLAS_DECODE_GEMM, ...) are KernelCache.routes (ops/routes.py).
`linear_swiglu` is a [gate | up] projection ending with its SwiGLU, or Gemma 3's tanh-GELU GLU
(one row on the GEMV, `gemv_swiglu`; decode batches on the decode GEMM's gated entries), where
`fuses_gate_up_swiglu` allows.
`linear_silu` is the MLP down projection with the SwiGLU activation fused into the GEMV's x
load (one launch and no activation buffer for decode batches of up to 8); for more rows it
runs silu_mul into a caller-provided scratch buffer, then `linear`. The o_proj of gated full
attention (hybrid families) can take the sigmoid output gate in its x load at batch 1
(`gemv_attn_gate`) where `fuses_attn_gate` allows. `linear_f32_unrounded` keeps the float32
sums (a float32 router's logits, GLM-4.5's). The geometry constants here mirror the
compile-time constants of kernels/hopper/common/{gemv,gemm,gemm_sm90}.cu.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..gpu import DevicePtr, KernelSig, Stream
from ..kernel_abi import (GEMM, GEMM_F32OUT, GEMM_F32_UNROUNDED, GEMM_SKINNY,
                          GEMM_SKINNY_F32OUT, GEMM_SM90, GEMM_SM90_F32OUT, GEMM_SM90_TMA,
                          GEMM_SM90_TMA_CLUSTER2, GEMM_SM90_TMA_CLUSTER2_F32OUT,
                          GEMM_SM90_TMA_F32OUT, GEMM_SM90_TMA_GEGLU, GEMM_SM90_TMA_SWIGLU,
                          GEMV, GEMV_ATTN_GATE_SINGLE, GEMV_BIAS_SINGLE, GEMV_F32OUT,
                          GEMV_F32_UNROUNDED, GEMV_GEGLU_SINGLE, GEMV_LEAN_SINGLE, GEMV_RING,
                          GEMV_RING_F32OUT,
                          GEMV_RING_SILU, GEMV_SILU, GEMV_SILU_SINGLE, GEMV_SINGLE,
                          GEMV_SINGLE_F32OUT, GEMV_SWIGLU_SINGLE, GEMV_SWIGLU_X8_SINGLE,
                          GEMV_SWIGLU_X8N_SINGLE, GEMV_X8_SINGLE)
from . import KernelCache
from .activation import silu_mul
from .matmul_batched import BATCHED_MAX_M, batched_gemv
from .matmul_batched import available as batched_available
from .matmul_decode import DECODE_MAX_M, Glu, decode_gemm
from .matmul_decode import available as decode_available

#: the GEMV keeps M accumulators per weight row in registers; more rows go to the GEMM
GEMV_MAX_M = 8
#: weight rows per GEMV block (gemv.cu ROWS_PER_BLOCK)
GEMV_ROWS_PER_BLOCK = 4
#: a GEMV block spreads K over at most this many threads (8 bf16 = 16 bytes each)
GEMV_MAX_THREADS = 256

#: (rows, cols, threads) of the GEMM tiles (gemm.cu)
GEMM_TILE = (128, 128, 256)
GEMM_SKINNY_TILE = (64, 32, 128)
#: (rows, cols, threads) of the wgmma tile and its dynamic shared memory: 4 stages of a
#: [128][64] A and a [256][64] W bf16 tile, plus 1 KiB to align the base (gemm_sm90.cu)
GEMM_SM90_TILE = (128, 256, 256)
GEMM_SM90_SMEM = 4 * (128 + 256) * 64 * 2 + 1024
#: its TMA twin (gemm_sm90_tma.cu): the same tile and ring (its mbarriers are static shared
#: memory), one producer warp past the two warpgroups (kProducerThreads)
GEMM_SM90_TMA_THREADS = GEMM_SM90_TILE[2] + 32
GEMM_SM90_TMA_SMEM = GEMM_SM90_SMEM


def gemm_sm90_min_blocks(sm_count: int) -> int:
    """Fewest 128x256 tiles worth the wgmma kernel: half the SMs (66 on an H200). A wgmma
    tile runs at roughly twice the mma.sync tile's rate, so half the SMs busy with it still
    beat the mma.sync kernel on all of them; fewer rows (decode batches, short chunks) stay
    on the mma.sync tiles, whose smaller blocks spread better. Untuned: measure with
    `tools/gpu/bench_kernels.py` on the prefill GEMM family."""
    return sm_count // 2


def _check_aligned(name: str, ptr: DevicePtr, align: int) -> None:
    if ptr % align:
        raise ValueError(f"{name} pointer {ptr:#x} is not {align}-byte aligned")


def gemv_threads(k: int, chunks: int = 2) -> int:
    """Threads per GEMV block: `chunks` 16-byte chunks of each row per thread (the routes'
    gemv_chunks; 2 is gemv_core's kUnroll, so no load slot is zero-filled), up to 256.
    Why 2: at k <= 2,048 one chunk a thread (256 threads at 2,048) left half of every
    thread's loads empty, so an SM held half the bytes in flight its registers allow (the
    MoE gate/up GEMV's width rule, ops/moe.py gate_up_gemv_threads). The sums' order
    depends on the threads, so every GEMV of a row count's family takes the same rule
    (the ring's plan included: row invariance)."""
    per_thread = -(-(k // 8) // chunks)
    return min(GEMV_MAX_THREADS, max(32, -(-per_thread // 32) * 32))


def _check_gemv(name: str, x: DevicePtr, w: DevicePtr, y: DevicePtr, m: int, n: int, k: int,
                single: bool) -> None:
    if not 1 <= m <= GEMV_MAX_M:
        raise ValueError(f"{name}: m={m} must be in 1..{GEMV_MAX_M}")
    if n < 1 or k < 8 or k % 8:
        raise ValueError(f"{name}: need n >= 1 and k a positive multiple of 8, got n={n} k={k}")
    _check_aligned(f"{name} x", x, 16)
    _check_aligned(f"{name} w", w, 16)
    _check_aligned(f"{name} y", y, 4)
    if single and m != 1:
        raise ValueError(f"{name}: the single-row kernel needs m=1, got m={m}")


#: ring GEMV (gemv_ring.cuh): warps per SM (its __launch_bounds__(256, 2), <= 128 registers a
#: thread: 2 blocks of 256 threads, 4 of 128, ...), the bytes a thread's stage holds (kUnroll =
#: 2 chunks of each of the 4 rows), the depths it takes, and the ring bytes per block the plan
#: aims for: 2 stages of a 256-thread block (64 KB: one 32 KB tile in flight while one is
#: multiplied, 2 x 32 KB a SM, twice what ~1 us of DRAM latency at copy bandwidth needs per
#: SM), 3 for narrower blocks (the most an H200 SM holds for 16 warps' blocks at any width).
#: Two 256-thread blocks' ~134 KB (the driver then sets 164 KB of shared memory aside) leave
#: ~90 KB of L1 for x, which each block re-reads per tile.
RING_WARPS_PER_SM = 16
RING_STAGE_BYTES_PER_THREAD = 2 * GEMV_ROWS_PER_BLOCK * 16
RING_MIN_STAGES, RING_MAX_STAGES = 2, 3
RING_TARGET_BYTES = 64 * 1024
#: shared memory an SM keeps per ring block beyond its ring: the kernel's static partial sums
#: (2 KiB) and the 1 KiB the driver reserves per block
RING_BLOCK_OVERHEAD = 3 * 1024


@dataclass(frozen=True)
class RingPlan:
    """Launch geometry of the ring GEMV: `grid` persistent blocks of `threads` (block b takes
    the 4-row groups b, b + grid, ...), a ring of `stages` tiles per thread in `shared`
    bytes of dynamic shared memory."""

    grid: int
    threads: int
    stages: int
    shared: int


def gemv_ring_plan(n: int, k: int, sm_count: int, shared_per_sm: int,
                   stages: int | None = None, chunks: int = 2) -> RingPlan | None:
    """The ring GEMV's geometry for an [n, k] weight: the general GEMV's threads (the sums'
    order depends on them), RING_WARPS_PER_SM warps' worth of blocks per SM (fewer where
    there are fewer 4-row groups), and `stages` tiles a thread (None: as many as
    RING_TARGET_BYTES holds, within RING_MIN_STAGES..RING_MAX_STAGES), never more than those
    blocks' rings fit an SM together; None where not even RING_MIN_STAGES do (a GB10's 100 KiB
    SMs): the register-tiled kernel runs the product there."""
    threads = gemv_threads(k, chunks)
    per_sm = RING_WARPS_PER_SM * 32 // threads
    stage_bytes = threads * RING_STAGE_BYTES_PER_THREAD
    fit = (shared_per_sm // per_sm - RING_BLOCK_OVERHEAD) // stage_bytes
    if stages is None:
        stages = max(RING_MIN_STAGES, min(RING_MAX_STAGES, RING_TARGET_BYTES // stage_bytes))
    stages = min(stages, fit, RING_MAX_STAGES)
    if stages < RING_MIN_STAGES:
        return None
    grid = min(-(-n // GEMV_ROWS_PER_BLOCK), sm_count * per_sm)
    return RingPlan(grid, threads, stages, stages * stage_bytes)


def _ring_plan(kc: KernelCache, n: int, k: int, single: bool) -> RingPlan | None:
    """The plan of a product the ring GEMV runs, or None where it does not: 2..8 rows unless
    ATLAS_GEMV_RING=0, one row only under ATLAS_GEMV_RING_SINGLE=1, and only where the
    device's shared memory holds its ring (`gemv_ring_plan`)."""
    routes = kc.routes
    if not (routes.gemv_ring_single if single else routes.gemv_ring):
        return None
    return gemv_ring_plan(n, k, kc.facts.sm_count, kc.facts.shared_memory_per_sm,
                          routes.gemv_ring_stages, routes.gemv_chunks)


def gemv_ring(kc: KernelCache, stream: Stream, sig: KernelSig, plan: RingPlan, x: DevicePtr,
              w: DevicePtr, y: DevicePtr, m: int, n: int, k: int) -> None:
    """Launch the ring entry `sig` (GEMV_RING, GEMV_RING_F32OUT or GEMV_RING_SILU; x is
    gate_up for the last) on `plan`."""
    kc.get_with_shared(sig, plan.shared)(stream, plan.grid, plan.threads, plan.shared,
                                         x, w, y, m, n, k, plan.stages)


#: the single-row entries with an 8-row twin (single_gemv_rows)
_X8_SINGLE = {GEMV_SINGLE: GEMV_X8_SINGLE, GEMV_SWIGLU_SINGLE: GEMV_SWIGLU_X8_SINGLE}

#: Batch 1's gate_up + SwiGLU (bf16 and FP8's convert GEMV) takes 8-row blocks where a weight
#: row holds this many bytes (bf16 k >= 2,048, FP8 k >= 4,096: 4-row blocks of 16 KiB and up),
#: unless ATLAS_GEMV_SWIGLU_ROWS says. Measured (H100, batch 1 x 512, GPU ms a step, 4 vs 8
#: rows for that product alone; gpu145, gpu146): Qwen3-8B FP8-block 3.062 vs 3.048, Qwen3-8B
#: 5.276 vs 5.245, Llama-3.1-8B 5.156 vs 5.134, Mistral-7B 4.908 vs 4.888, Qwen3-4B 3.146 vs
#: 3.129, Phi-4-mini 3.015 vs 3.010, Qwen3-1.7B 1.4285 vs 1.420, Llama-3.2-1B 0.975 vs 0.967,
#: Llama-3.2-3B 2.400 vs 2.402 and Qwen2.5-7B 4.935 vs 4.938 (level); below it 8 rows lost:
#: Qwen2.5-1.5B (3,072-byte rows) 1.394 vs 1.408, Qwen3-0.6B (2,048) 0.724 vs 0.738. At those
#: widths a 4-row block is 48..96 threads and the 8-row one halves an SM's blocks.
SWIGLU_X8_MIN_ROW_BYTES = 4096


def single_gemv_rows(kc: KernelCache, swiglu: bool, row_bytes: int) -> int:
    """Weight rows a block of batch 1's GEMVs that have an 8-row twin: for the gate_up +
    SwiGLU products routes.gemv_swiglu_rows, else by SWIGLU_X8_MIN_ROW_BYTES; for the plain
    ones routes.gemv_rows."""
    if not swiglu:
        return kc.routes.gemv_rows
    if kc.routes.gemv_swiglu_rows is not None:
        return kc.routes.gemv_swiglu_rows
    return 8 if row_bytes >= SWIGLU_X8_MIN_ROW_BYTES else GEMV_ROWS_PER_BLOCK


def saves_a_wave(kc: KernelCache, sig: KernelSig, lean: KernelSig, blocks: int,
                 threads: int) -> bool:
    """Whether `lean` (the same blocks at fewer registers) runs `blocks` in fewer waves of
    the blocks the device holds at once than `sig` (the driver's occupancy; no device to
    ask: no). Only then does the leaner entry pay: gpu172 capped every batch-1 GEMV, and
    where the waves stayed the same the short kernels under the GEMVs' early blocks lost
    more (Qwen3-8B +0.7%, Llama-3.2-3B +2.1%) than the GEMVs won; taken only where it saves
    a wave (gpu173, H100): Qwen3-4B -2.6% (its down and o_proj, 640 blocks: 528 resident
    free, 660 capped), Gemma-3-4B -2.9%, Qwen3-14B -0.9%."""
    full = kc.resident_blocks(kc.get(sig).handle, threads, 0, 1)
    fewer = kc.resident_blocks(kc.get(lean).handle, threads, 0, 1)
    if not full or not fewer:
        return False
    return -(-blocks // fewer) < -(-blocks // full)


def _launch_single(kc: KernelCache, stream: Stream, sig: KernelSig, x: DevicePtr,
                   w: DevicePtr, y: DevicePtr, n: int, k: int) -> None:
    """One row on the single-row entry `sig` (its 8-row twin where single_gemv_rows says 8;
    the SwiGLU's register-capped one, gemv.cu `_x8n_`, for blocks under 256 threads; the
    plain product's capped one, `_lean_`, where it saves a wave or routes.gemv_lean says)."""
    rows, threads = GEMV_ROWS_PER_BLOCK, gemv_threads(k, kc.routes.gemv_chunks)
    if sig in _X8_SINGLE and single_gemv_rows(kc, sig == GEMV_SWIGLU_SINGLE, 2 * k) == 8:
        sig, rows = _X8_SINGLE[sig], 8
        if sig == GEMV_SWIGLU_X8_SINGLE and threads < GEMV_MAX_THREADS:
            sig = GEMV_SWIGLU_X8N_SINGLE  # capped registers: more narrow blocks an SM
    blocks, lean = -(-n // rows), kc.routes.gemv_lean
    if sig == GEMV_SINGLE and (lean if lean is not None else
                               saves_a_wave(kc, sig, GEMV_LEAN_SINGLE, blocks, threads)):
        sig = GEMV_LEAN_SINGLE
    kc.get(sig)(stream, blocks, threads, 0, x, w, y, 1, n, k)


def gemv(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, y: DevicePtr, m: int,
         n: int, k: int, out_f32: bool = False, single: bool | None = None) -> None:
    """y = x @ w.T for 1 <= m <= 8 rows; every weight byte is read once.

    `single` forces (True) or avoids (False) the m == 1 entry point; None uses it for
    m == 1. The other products
    run on the ring GEMV (`gemv_ring`; ATLAS_GEMV_RING=0: the register-tiled gemv_bf16), as
    does the single-row one under ATLAS_GEMV_RING_SINGLE=1: the same sums either way.
    """
    if single is None:
        single = m == 1
    _check_gemv("gemv", x, w, y, m, n, k, single)
    ring = _ring_plan(kc, n, k, single)
    if ring is not None:
        gemv_ring(kc, stream, GEMV_RING_F32OUT if out_f32 else GEMV_RING, ring, x, w, y, m, n,
                  k)
        return
    if single:
        _launch_single(kc, stream, GEMV_SINGLE_F32OUT if out_f32 else GEMV_SINGLE, x, w, y, n,
                       k)
        return
    grid = -(-n // GEMV_ROWS_PER_BLOCK)
    threads = gemv_threads(k, kc.routes.gemv_chunks)
    kc.get(GEMV_F32OUT if out_f32 else GEMV)(stream, grid, threads, 0, x, w, y, m, n, k)


def fuses_bias(kc: KernelCache, m: int, n: int) -> bool:
    """Whether an m-row bf16 product [n, k] can end with a bf16 bias added to its bf16
    output (`gemv_bias`: Qwen2-family q/k/v biases): one row on the single-row GEMV under
    ATLAS_GEMV_BIAS (the default; gpu128: -3.1% a step on Qwen2.5-1.5B), 4-row blocks, not the ring
    kernel. Then the attention kernel after the projection follows the GEMV itself, not a
    bias_add launch, and starts its prologue under the GEMV's tail (the H100 profile put the
    early attention entry's lead at 0.44 us after bias_add, 1.67 us after the GEMV: gpu125)."""
    return (kc.routes.gemv_bias and m == 1 and kc.routes.gemv_rows == 4 and n % 8 == 0
            and linear_route(kc, m, n) == "gemv" and not kc.routes.gemv_ring_single)


def gemv_bias(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, bias: DevicePtr,
              y: DevicePtr, n: int, k: int) -> None:
    """One row: y[1, n] = bf16(bf16(x @ w.T) + bias), bit for bit the single-row `gemv`
    followed by ops.bias.bias_add (`fuses_bias` must hold)."""
    _check_gemv("gemv_bias", x, w, y, 1, n, k, True)
    _check_aligned("gemv_bias bias", bias, 16)
    kc.get(GEMV_BIAS_SINGLE)(stream, -(-n // GEMV_ROWS_PER_BLOCK),
                             gemv_threads(k, kc.routes.gemv_chunks), 0, x, w, y, 1, n, k, bias)


def fuses_gate_up_swiglu(kc: KernelCache, m: int, n: int, k: int, gelu: bool = False) -> bool:
    """Whether an m-row bf16 [gate | up] product [n, k] ends with its SwiGLU
    (`linear_swiglu`; the down projection then reads the activation), n even:
    * on the decode GEMM (9..256 rows by default) under ATLAS_DECODE_GEMM_SWIGLU (on by
      default; it governs both activations), where the silu_mul (gelu_tanh_mul) launch after
      it, its PDL wait and its round trips through the [m, n] gate_up buffer leave the step
      (the H200 profile at batch 64 put silu_mul at 25.2 us a layer with its wait, for 3 MB
      of data; the GELU GLU's A/B is unmeasured);
    * one row on the single-row GEMV (not the ring kernel) under ATLAS_GEMV_SWIGLU (on by
      default, `gemv_swiglu`): the silu_mul launch (past FUSED_SILU_MAX_K) or the down GEMV's
      recomputation of the whole activation in every block (up to it) leaves batch-1 decode.
      Unmeasured: the A/B is tools/gpu/profile_decode.py with ATLAS_GEMV_SWIGLU=0.
    `gelu`: the tanh-GELU GLU (Gemma 3): both routes have it (the 4-row single-row GEMV only:
    under ATLAS_GEMV_ROWS=8 one row keeps its 4-row GELU entry). 2..8 rows (the ring GEMV, the
    tensor-core batched GEMV) end with neither: gate_up, then the activation's launch.
    * prefill products on the wgmma GEMM's TMA twin under ATLAS_GEMM_SWIGLU (on by default,
      `gemm_glu`), n a multiple of 16: no [m, n] gate_up round trip, no silu_mul launch."""
    if n % 2:
        return False
    route = linear_route(kc, m, n)
    if route == "gemm_decode_sm90":
        return kc.routes.decode_gemm_swiglu
    if route == "gemm_sm90_tma":
        return kc.routes.gemm_swiglu and n % 16 == 0
    return (m == 1 and route == "gemv" and kc.routes.gemv_swiglu
            and _ring_plan(kc, n, k, True) is None)


def linear_swiglu(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, act: DevicePtr,
                  m: int, n: int, k: int, gelu: bool = False) -> None:
    """act[m, n / 2] = swiglu(x @ w.T) (`gelu`: the tanh-GELU GLU) for a bf16 [gate | up]
    weight w [n, k] in one launch, on the single-row GEMV, the decode GEMM's gated entries or
    the prefill GEMM's TMA twin's (`fuses_gate_up_swiglu` must hold)."""
    route = linear_route(kc, m, n)
    if route == "gemv":
        gemv_swiglu(kc, stream, x, w, act, m, n, k, gelu)
        return
    if route == "gemm_sm90_tma":
        gemm_glu(kc, stream, x, w, act, m, n, k, gelu)
        return
    decode_gemm(kc, stream, x, w, act, m, n, k, glu=Glu.GEGLU if gelu else Glu.SWIGLU)


def _check_swiglu(name: str, n: int) -> None:
    """A [gate | up] product splits its n outputs in halves."""
    if n % 2:
        raise ValueError(f"{name}: a [gate | up] weight needs an even n, got n={n}")


def gemv_swiglu(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, act: DevicePtr,
                m: int, n: int, k: int, gelu: bool = False) -> None:
    """One row: act[1, n / 2] = swiglu(x @ w.T) for a bf16 [gate | up] weight w [n, k] (n
    even), bit for bit the single-row `gemv` into [gate | up] followed by silu_mul. Its
    blocks each own two gate rows and their up rows (gemv.cu gemv_swiglu_bf16_single): the
    grid and threads of the plain GEMV. `gelu`: the tanh-GELU GLU (gemv_geglu_bf16_single,
    bit for bit the GEMV followed by gelu_tanh_mul; 4-row blocks only)."""
    _check_gemv("gemv_swiglu", x, w, act, m, n, k, True)
    _check_swiglu("gemv_swiglu", n)
    _launch_single(kc, stream, GEMV_GEGLU_SINGLE if gelu else GEMV_SWIGLU_SINGLE, x, w, act,
                   n, k)


def gemv_silu(kc: KernelCache, stream: Stream, gate_up: DevicePtr, w: DevicePtr, y: DevicePtr,
              m: int, n: int, k: int, single: bool | None = None) -> None:
    """y = swiglu(gate_up) @ w.T for 1 <= m <= 8 rows, gate_up [m, 2k] = [gate | up] bf16.

    Equal to silu_mul (into x [m, k]) followed by `gemv` on x, in one launch. `single` and
    the ring GEMV as for `gemv`.
    """
    if single is None:
        single = m == 1
    _check_gemv("gemv_silu", gate_up, w, y, m, n, k, single)
    ring = _ring_plan(kc, n, k, single)
    if ring is not None:
        gemv_ring(kc, stream, GEMV_RING_SILU, ring, gate_up, w, y, m, n, k)
        return
    if single:
        _launch_single(kc, stream, GEMV_SILU_SINGLE, gate_up, w, y, n, k)
        return
    grid = -(-n // GEMV_ROWS_PER_BLOCK)
    kc.get(GEMV_SILU)(stream, grid, gemv_threads(k, kc.routes.gemv_chunks), 0, gate_up, w, y, m,
                      n, k)


@dataclass(frozen=True)
class AttnGate:
    """The sigmoid output gate of gated full attention, for the o_proj GEMV's x load: the
    gate of head h (head_dim values) at `ptr` + h * head_pitch elements (in the qkv row)."""

    ptr: DevicePtr
    head_dim: int
    head_pitch: int


def _check_attn_gate(name: str, gate: AttnGate, k: int) -> None:
    """The gated x load reads whole 16-byte chunks of one head's gate."""
    if gate.head_dim % 8 or gate.head_pitch % 8 or gate.head_pitch < gate.head_dim or (
            k % gate.head_dim):
        raise ValueError(f"{name}: need head_dim and head_pitch multiples of 8 and k = heads x "
                         f"head_dim, got head_dim={gate.head_dim} "
                         f"head_pitch={gate.head_pitch} k={k}")
    _check_aligned(f"{name} gate", gate.ptr, 16)


def fuses_attn_gate(kc: KernelCache, m: int, n: int, k: int) -> bool:
    """Whether an m-row o_proj [n, k] of gated full attention takes the output gate in its
    x load (`gemv_attn_gate`) instead of after a
    sigmoid_gate_mul launch: one row on the single-row GEMV (not the ring kernel) under
    ATLAS_GEMV_ATTN_GATE=1 (off by default: measured slower, gpu44 / gpu45)."""
    return (m == 1 and kc.routes.gemv_attn_gate and linear_route(kc, m, n) == "gemv"
            and _ring_plan(kc, n, k, True) is None)


def gemv_attn_gate(kc: KernelCache, stream: Stream, x: DevicePtr, gate: AttnGate,
                   w: DevicePtr, y: DevicePtr, n: int, k: int) -> None:
    """One row: y = (x * sigmoid(gate)) @ w.T per head, bit for bit sigmoid_gate_mul then
    the single-row `gemv` (the gate's bf16 roundings, attn_gate.cu's)."""
    _check_gemv("gemv_attn_gate", x, w, y, 1, n, k, True)
    _check_attn_gate("gemv_attn_gate", gate, k)
    kc.get(GEMV_ATTN_GATE_SINGLE)(stream, -(-n // GEMV_ROWS_PER_BLOCK),
                                  gemv_threads(k, kc.routes.gemv_chunks), 0, x, gate.ptr, w, y,
                                  n, k, gate.head_dim, gate.head_pitch)


def _blocks(m: int, n: int, tile: tuple[int, int, int]) -> int:
    return -(-m // tile[0]) * -(-n // tile[1])


def gemm_uses_sm90(kc: KernelCache, m: int, n: int) -> bool:
    """The wgmma dispatch rule: switched on, the gemm_sm90 module loaded (sm_90a PTX sets
    only; not gb10, the host references or the mock) and enough 128x256 tiles."""
    return (kc.routes.gemm_sm90
            and _blocks(m, n, GEMM_SM90_TILE) >= gemm_sm90_min_blocks(kc.facts.sm_count)
            and GEMM_SM90.module in kc.backend.module_names)


def gemm_uses_tma(kc: KernelCache) -> bool:
    """Whether a product on the wgmma kernel runs on its TMA twin (gemm_sm90_tma: the same
    tiles and bits, operands streamed by one producer thread): switched on
    (ATLAS_GEMM_TMA, on by default) and the module loaded (sm_90a PTX sets only)."""
    return kc.routes.gemm_tma and GEMM_SM90_TMA.module in kc.backend.module_names


def tma_grid(tiles: int, persistent: bool, resident: int | None, sm_count: int,
             cluster: int) -> int:
    """Blocks of a TMA-twin launch of `tiles` tiles (a multiple of `cluster`): one a tile, or
    `persistent`ly at most the blocks the device holds at once (`resident`, the driver's count
    for this launch shape; None: one an SM), whole clusters, each block looping over tiles
    gridDim.x apart."""
    if not persistent:
        return tiles
    slots = sm_count if resident is None else resident
    return max(cluster, min(tiles, slots // cluster * cluster))


def _launch_sm90(kc: KernelCache, stream: Stream, a: DevicePtr, w: DevicePtr, c: DevicePtr,
                 m: int, n: int, k: int, out_f32: bool, tma: bool, multicast: bool) -> None:
    """One 128x256-tile wgmma launch: the TMA twin with its tensor maps over a (in [128][64]
    boxes, per buffer and row count) and w (in [256][64] boxes, once per weight; [128][64]
    halves with `multicast`, whose clusters of two m-tiles pad the grid to an even count),
    encoded once and kept by KernelCache.tensor_map, on `tma_grid` blocks
    (KernelRoutes.gemm_tma_persistent); or the cp.async kernel."""
    blocks = _blocks(m, n, GEMM_SM90_TILE)
    if tma:
        cluster = 2 if multicast else 1
        if multicast:
            blocks = -(-m // (2 * GEMM_SM90_TILE[0])) * 2 * -(-n // GEMM_SM90_TILE[1])
            sig = GEMM_SM90_TMA_CLUSTER2_F32OUT if out_f32 else GEMM_SM90_TMA_CLUSTER2
        else:
            sig = GEMM_SM90_TMA_F32OUT if out_f32 else GEMM_SM90_TMA
        amap = kc.tensor_map(a, m, k, GEMM_SM90_TILE[0])
        wmap = kc.tensor_map(w, n, k, GEMM_SM90_TILE[1] // cluster)
        launch = kc.get_with_shared(sig, GEMM_SM90_TMA_SMEM)
        persistent = kc.routes.gemm_tma_persistent
        resident = (kc.resident_blocks(launch.handle, GEMM_SM90_TMA_THREADS, GEMM_SM90_TMA_SMEM,
                                       cluster) if persistent else None)
        grid = tma_grid(blocks, persistent, resident, kc.facts.sm_count, cluster)
        launch(stream, grid, GEMM_SM90_TMA_THREADS, GEMM_SM90_TMA_SMEM, a, w, c, m, n, k,
               amap, wmap)
        return
    launch = kc.get_with_shared(GEMM_SM90_F32OUT if out_f32 else GEMM_SM90, GEMM_SM90_SMEM)
    launch(stream, blocks, GEMM_SM90_TILE[2], GEMM_SM90_SMEM, a, w, c, m, n, k)


def gemm_glu(kc: KernelCache, stream: Stream, a: DevicePtr, w: DevicePtr, act: DevicePtr,
             m: int, n: int, k: int, gelu: bool = False) -> None:
    """act[m, n / 2] = swiglu(a @ w.T) (`gelu`: the tanh-GELU GLU) for a fused [gate | up]
    weight w [n, k] on the TMA twin's gated entry: a tile's 256 weight rows are gate rows
    [p, p + 128) and up rows [n / 2 + p, ...) (two [128][64] boxes), its epilogue the
    activation; bit for bit `gemm` into [gate | up] then silu_mul (gelu_tanh_mul). The grid
    and its persistent form as the plain twin's at n; n and k multiples of 16, as `gemm`."""
    if m < 1 or n < 16 or k < 16 or n % 16 or k % 16:
        raise ValueError(f"gemm_glu: need m >= 1 and n, k positive multiples of 16, got "
                         f"m={m} n={n} k={k}")
    _check_aligned("gemm_glu a", a, 16)
    _check_aligned("gemm_glu w", w, 16)
    _check_aligned("gemm_glu act", act, 4)
    amap = kc.tensor_map(a, m, k, GEMM_SM90_TILE[0])
    wmap = kc.tensor_map(w, n, k, GEMM_SM90_TILE[1] // 2)
    launch = kc.get_with_shared(GEMM_SM90_TMA_GEGLU if gelu else GEMM_SM90_TMA_SWIGLU,
                                GEMM_SM90_TMA_SMEM)
    persistent = kc.routes.gemm_tma_persistent
    resident = (kc.resident_blocks(launch.handle, GEMM_SM90_TMA_THREADS, GEMM_SM90_TMA_SMEM, 1)
                if persistent else None)
    grid = tma_grid(_blocks(m, n, GEMM_SM90_TILE), persistent, resident, kc.facts.sm_count, 1)
    launch(stream, grid, GEMM_SM90_TMA_THREADS, GEMM_SM90_TMA_SMEM, a, w, act, m, n, k, amap,
           wmap)


def gemm(kc: KernelCache, stream: Stream, a: DevicePtr, w: DevicePtr, c: DevicePtr, m: int,
         n: int, k: int, out_f32: bool = False, skinny: bool | None = None,
         sm90: bool | None = None, tma: bool | None = None,
         multicast: bool | None = None) -> None:
    """c = a @ w.T on tensor cores; any m >= 1, n and k multiples of 16.

    `sm90` forces (True) or avoids (False) the wgmma kernel; None applies `gemm_uses_sm90`
    unless `skinny` is given. `tma` picks the wgmma kernel's twin: True its TMA one, False
    the cp.async one, None `gemm_uses_tma`; `multicast` the TMA twin's clusters of two
    (None: KernelRoutes.gemm_tma_multicast). `skinny` forces the mma.sync tile (None: the
    64x32 tile when 128x128 tiles would not give every SM of the device a block).
    """
    if m < 1 or n < 16 or k < 16 or n % 16 or k % 16:
        raise ValueError(f"gemm: need m >= 1 and n, k positive multiples of 16, got "
                         f"m={m} n={n} k={k}")
    _check_aligned("gemm a", a, 16)
    _check_aligned("gemm w", w, 16)
    _check_aligned("gemm c", c, 8 if out_f32 else 4)
    if sm90 is None:
        sm90 = skinny is None and gemm_uses_sm90(kc, m, n)
    if sm90:
        _launch_sm90(kc, stream, a, w, c, m, n, k, out_f32,
                     gemm_uses_tma(kc) if tma is None else tma,
                     kc.routes.gemm_tma_multicast if multicast is None else multicast)
        return
    if skinny is None:
        skinny = _blocks(m, n, GEMM_TILE) < kc.facts.sm_count
    if skinny:
        sig = GEMM_SKINNY_F32OUT if out_f32 else GEMM_SKINNY
        bm, bn, threads = GEMM_SKINNY_TILE
    else:
        sig = GEMM_F32OUT if out_f32 else GEMM
        bm, bn, threads = GEMM_TILE
    kc.get(sig)(stream, (-(-n // bn), -(-m // bm), 1), threads, 0, a, w, c, m, n, k)


def linear_f32_unrounded(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr,
                         y: DevicePtr, m: int, n: int, k: int) -> None:
    """y f32 [m, n] = x @ w.T with the float32 sums kept, not bf16-rounded: the logits of a
    router transformers runs in float32 (GLM-4.5). Up to GEMV_MAX_M rows on the register-tiled
    GEMV, more on the mma.sync GEMM's 128x128 tile where n and k are multiples of 16, else
    on the GEMV GEMV_MAX_M rows at a time (a router of 8 or 60 experts)."""
    if m <= GEMV_MAX_M:
        _check_gemv("gemv_f32_unrounded", x, w, y, m, n, k, single=False)
        kc.get(GEMV_F32_UNROUNDED)(stream, -(-n // GEMV_ROWS_PER_BLOCK),
                                   gemv_threads(k, kc.routes.gemv_chunks), 0, x, w, y, m, n, k)
        return
    if n % 16 or k % 16:
        for r0 in range(0, m, GEMV_MAX_M):
            linear_f32_unrounded(kc, stream, x + 2 * r0 * k, w, y + 4 * r0 * n,
                                 min(GEMV_MAX_M, m - r0), n, k)
        return
    for name, ptr, align in (("a", x, 16), ("w", w, 16), ("c", y, 8)):
        _check_aligned(f"gemm_f32_unrounded {name}", ptr, align)
    bm, bn, threads = GEMM_TILE
    kc.get(GEMM_F32_UNROUNDED)(stream, (-(-n // bn), -(-m // bm), 1), threads, 0, x, w, y, m,
                               n, k)


def linear(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, y: DevicePtr, m: int,
           n: int, k: int, out_f32: bool = False) -> None:
    """y[m, n] = x[m, k] @ w[n, k].T (bf16 in; bf16 or f32 out), on the kernel
    `linear_route` names."""
    route = linear_route(kc, m, n)
    if route == "gemv":
        gemv(kc, stream, x, w, y, m, n, k, out_f32)
    elif route == "gemm_decode_sm90":
        decode_gemm(kc, stream, x, w, y, m, n, k, out_f32)
    elif route == "gemv_mma":
        batched_gemv(kc, stream, x, w, y, m, n, k, out_f32)
    else:
        gemm(kc, stream, x, w, y, m, n, k, out_f32,
             sm90=route in ("gemm_sm90", "gemm_sm90_tma"), tma=route == "gemm_sm90_tma")


def linear_route(kc: KernelCache, m: int, n: int) -> str:
    """The module `linear` runs an m-row product with n outputs on: "gemv",
    "gemm_decode_sm90", "gemv_mma", "gemm_sm90_tma", "gemm_sm90" or "gemm" (the dispatch rule
    in one place, for the benchmarks' labels too)."""
    routes = kc.routes
    if (routes.decode_gemm and routes.decode_gemm_min_m <= m <= routes.decode_gemm_max_m
            and m <= DECODE_MAX_M and decode_available(kc)):
        return "gemm_decode_sm90"
    batched = (kc.routes.batched_gemv and kc.routes.batched_gemv_min_m <= m <= BATCHED_MAX_M
               and batched_available(kc))
    if m <= GEMV_MAX_M and not batched:
        return "gemv"
    if batched:
        return "gemv_mma"
    if not gemm_uses_sm90(kc, m, n):
        return "gemm"
    return "gemm_sm90_tma" if gemm_uses_tma(kc) else "gemm_sm90"


#: Largest k the fused SwiGLU GEMV is used for at 2..8 rows. Measured on the H200 (batch-1
#: decode graph, 2026-11-30, with the 4-row-block kernel): k=3072 (Qwen3-0.6B) 4.58 us fused vs
#: 3.95 + 1.62 us unfused; k=12288 (Qwen3-8B) 30.97 us fused vs 24.7 + 1.6 us unfused: each of
#: its n / 4 blocks recomputed the whole activation.
FUSED_SILU_MAX_K = 4096


def fuses_silu(kc: KernelCache, m: int, n: int, k: int) -> bool:
    """Whether `linear_silu` runs an m-row down projection [n, k] as one fused GEMV."""
    return linear_route(kc, m, n) == "gemv" and k <= FUSED_SILU_MAX_K


def linear_silu(kc: KernelCache, stream: Stream, gate_up: DevicePtr, w: DevicePtr,
                y: DevicePtr, m: int, n: int, k: int, scratch: DevicePtr | None = None) -> None:
    """y[m, n] = swiglu(gate_up[m, 2k]) @ w[n, k].T: the MLP down projection with its
    activation (bf16 in, bf16 out), equal to silu_mul followed by `linear`.

    Where `fuses_silu` allows, the fused GEMV runs (one launch, no activation buffer).
    Otherwise silu_mul runs into `scratch` (bf16 [m, k], 16-byte aligned; the caller owns it
    so that its address is graph-stable) and then `linear`; scratch is required only then.
    """
    if fuses_silu(kc, m, n, k):
        gemv_silu(kc, stream, gate_up, w, y, m, n, k)
        return
    if scratch is None:
        raise ValueError(f"linear_silu: m={m} > {GEMV_MAX_M} needs a scratch buffer of "
                         f"[m, k] bf16 for the activation")
    silu_mul(kc, stream, gate_up, scratch, m, k)
    linear(kc, stream, scratch, w, y, m, n, k)
