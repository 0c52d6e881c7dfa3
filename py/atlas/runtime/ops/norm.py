"""Launch builders for RMSNorm and the fused residual add + RMSNorm (rmsnorm.cu).

One block per row (the plain norm of many rows: `rmsnorm_grid`'s rows a block, looped); each
thread holds up to RMSNORM_MAX_VECS 16-byte vectors of the row in registers, so dim is
limited to 8 * RMSNORM_MAX_VECS * 1024 elements.

Two block sizes: a decode batch (few rows, latency-bound) gives each thread one vector, so
the row is loaded, reduced and stored in the fewest steps. Many rows (prefill) would then run
as a few large blocks per SM, each waiting out its load, reduce and store in turn (measured
at 43% of the H200's bandwidth); there each thread takes RMSNORM_MAX_VECS vectors instead,
so a 4096-wide row is a 128-thread block and an SM holds 16 rows of rmsnorm at once (32
registers a thread; a 2048-token prefill is one wave on the H200's 132 SMs) or 9 of
add_rmsnorm (54 registers: the delta row is in flight too).
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import (ADD_RMSNORM, ADD_RMSNORM_EARLY, ADD_RMSNORM_LATE, ADD_RMSNORM_OFFSET,
                          ADD_RMSNORM_OFFSET_EARLY, ADD_RMSNORM_OFFSET_LATE, ADD_RMSNORM_ONEROUND,
                          ADD_RMSNORM_ONEROUND_EARLY, EMBED_RMSNORM, EMBED_RMSNORM_LATE,
                          EMBED_RMSNORM_OFFSET, EMBED_RMSNORM_OFFSET_LATE, EMBED_RMSNORM_ONEROUND,
                          NORM_ADD_RMSNORM_OFFSET, RMSNORM, RMSNORM_OFFSET, RMSNORM_ONEROUND,
                          RMSNORM_PITCHED)
from . import KernelCache
from .early_trigger import triggers_early
from .routes import DEFAULT_NORM_ROWS_PER_BLOCK
from ._preconditions import require_aligned, require_multiple, warp_threads

#: rmsnorm.cu kMaxVecs: 16-byte vectors per thread
RMSNORM_MAX_VECS = 4
RMSNORM_MAX_THREADS = 1024
RMSNORM_MAX_DIM = 8 * RMSNORM_MAX_VECS * RMSNORM_MAX_THREADS
#: above this many rows the launch is throughput-bound and takes the many-rows block size.
#: Up to 2 rows per SM of an H200 (132 SMs) every row's block is resident at once in either
#: geometry, and the one-vector block's shorter chain (one w load a thread) is the faster.
RMSNORM_LATENCY_ROWS = 256
#: add_rmsnorm's entry points by (offset weights, trigger: after the wait, early, late)
_ADD_RMSNORM = {(False, "wait"): ADD_RMSNORM, (True, "wait"): ADD_RMSNORM_OFFSET,
                (False, "early"): ADD_RMSNORM_EARLY, (True, "early"): ADD_RMSNORM_OFFSET_EARLY,
                (False, "late"): ADD_RMSNORM_LATE, (True, "late"): ADD_RMSNORM_OFFSET_LATE}
#: ... and with the one-rounding weights (gpt-oss), by early trigger
_ADD_RMSNORM_ONEROUND = {False: ADD_RMSNORM_ONEROUND, True: ADD_RMSNORM_ONEROUND_EARLY}
#: embed_rmsnorm's entry points by (offset weights, late trigger)
_EMBED_RMSNORM = {(False, False): EMBED_RMSNORM, (True, False): EMBED_RMSNORM_OFFSET,
                  (False, True): EMBED_RMSNORM_LATE, (True, True): EMBED_RMSNORM_OFFSET_LATE}


def rmsnorm_threads(dim: int, rows: int) -> int:
    """Block size for `rows` rows of `dim`: one vector per thread for a decode batch,
    RMSNORM_MAX_VECS per thread (a smaller block per row) for many rows. (Four a thread at
    batch 1, 128-thread blocks at 4,096 wide, measured 2.5-9% slower steps: gpu141.)"""
    per_thread = RMSNORM_MAX_VECS if rows > RMSNORM_LATENCY_ROWS else 1
    return warp_threads(-(-(dim // 8) // per_thread), RMSNORM_MAX_THREADS)


def rmsnorm_grid(rows: int, rows_per_block: int = DEFAULT_NORM_ROWS_PER_BLOCK) -> int:
    """Blocks of a plain RMSNorm launch over `rows` rows: one a row for a decode batch (up to
    RMSNORM_LATENCY_ROWS), else `rows_per_block` rows each (routes.norm_rows_per_block,
    ATLAS_NORM_ROWS_PER_BLOCK): rmsnorm.cu's plain entries loop over rows blockIdx.x, +
    gridDim.x, .. with the next row's loads in flight under the current row's stores."""
    if rows <= RMSNORM_LATENCY_ROWS:
        return rows
    return -(-rows // rows_per_block)


def _check(kernel: str, dim: int, ptrs: dict[str, DevicePtr]) -> None:
    require_multiple(kernel, "dim", dim, 8)
    if dim > RMSNORM_MAX_DIM:
        raise ValueError(f"{kernel}: dim={dim} exceeds {RMSNORM_MAX_DIM}")
    for name, ptr in ptrs.items():
        require_aligned(kernel, name, ptr, 16)


def rmsnorm(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr, out: DevicePtr,
            rows: int, dim: int, eps: float, offset: bool = False,
            one_round: bool = False) -> None:
    """out[rows, dim] = RMSNorm(x) * w, all bf16 (* (1 + w) with `offset`, zero-centred
    weights as Qwen3.5 stores them; with `one_round` w times the float32 normalized row,
    rounded once, as gpt-oss's norm)."""
    _check("rmsnorm", dim, {"x": x, "w": w, "out": out})
    sig = RMSNORM_ONEROUND if one_round else RMSNORM_OFFSET if offset else RMSNORM
    if rows:
        kc.get(sig)(stream, rmsnorm_grid(rows, kc.routes.norm_rows_per_block),
                    rmsnorm_threads(dim, rows), 0, x, w, out, rows, dim, eps)


def rmsnorm_pitched(kc: KernelCache, stream: Stream, x: DevicePtr, w: DevicePtr,
                    out: DevicePtr, rows: int, dim: int, pitch: int, eps: float) -> None:
    """RMSNorm(x) * w over `rows` rows of `dim` bf16 starting `pitch` elements apart (in
    place when out == x): a part of each row of a wider matrix, as MiniMax-M2 normalizes the
    q (and the k) part of each fused [q | k | v] row over all its heads."""
    _check("rmsnorm_pitched", dim, {"x": x, "w": w, "out": out})
    require_multiple("rmsnorm_pitched", "pitch", pitch, 8)
    if pitch < dim:
        raise ValueError(f"rmsnorm_pitched: pitch={pitch} < dim={dim} (rows would overlap)")
    if rows:
        kc.get(RMSNORM_PITCHED)(stream, rmsnorm_grid(rows, kc.routes.norm_rows_per_block),
                                rmsnorm_threads(dim, rows), 0, x, w, out, rows, dim, pitch, eps)


def norm_triggers_late(kc: KernelCache) -> bool:
    """Whether an add + norm that does not trigger early lets the next kernel launch only
    once its residual and delta rows have landed (routes.norm_late, ATLAS_NORM_LATE; set at
    load by `norm_late_pays` where the environment leaves it unset)."""
    return bool(kc.routes.norm_late)


#: the smallest projection after a model's add + norms (bytes a batch-1 pass streams) from
#: which they trigger late (`norm_late_pays`)
NORM_LATE_MIN_NEXT_BYTES = 24 << 20


def norm_late_pays(next_bytes: int) -> bool:
    """routes.norm_late's rule where the environment leaves it unset (model/load.py), given
    the smallest projection that follows one of the model's add + norms (qkv, Gated-DeltaNet's
    in_proj, a dense gate_up): at batch 1 that projection requests its first wave's weights
    from its launch on, and with the trigger on the norm's entry its two rows queue behind
    them. The late trigger takes the norm off that flood and delays the projection's own
    requests by the norm's load time, which pays once every flood is large. Measured (H100,
    gpu179 / gpu180, 2026-12-07, batch 1 x 512, GPU ms a step, late vs on entry):
    the smallest such projection 36 MiB (Qwen3.5-35B-A3B's attention qkv; in_proj 48) 2.755 /
    2.760 vs 2.795 / 2.796 (its norm after the MoE down 5.31 -> 2.12 us of the critical path,
    in_proj 13.58 -> 16.57), 48 MiB (Qwen3-8B's qkv) 5.338 vs 5.349, 30 MiB (Qwen3-4B) 3.058
    vs 3.074; 20 MiB (Qwen3-30B-A3B) 2.942 vs 2.931, 16 MiB (Qwen3-1.7B) 1.425 vs 1.422,
    12 MiB (Llama-3.2-1B) 0.978 / 0.978 vs 0.976 / 0.976. The threshold lies between 20 and
    30 MiB; the 8B's and 4B's gains, like the 1.7B's and Llama's losses, are one sample's
    size (~0.3%), the 35B's and the 30B's are not."""
    return next_bytes >= NORM_LATE_MIN_NEXT_BYTES


def norm_add_rmsnorm(kc: KernelCache, stream: Stream, residual: DevicePtr, delta: DevicePtr,
                     w_delta: DevicePtr, w: DevicePtr, out: DevicePtr, rows: int, dim: int,
                     eps: float) -> None:
    """Gemma 3's residual step in one launch: residual += RMSNorm(delta) * (1 + w_delta)
    (rounded to bf16, then the bf16 add), out = RMSNorm(residual) * (1 + w)."""
    _check("norm_add_rmsnorm", dim, {"residual": residual, "delta": delta,
                                     "w_delta": w_delta, "w": w, "out": out})
    if rows:
        kc.get(NORM_ADD_RMSNORM_OFFSET)(stream, rows, rmsnorm_threads(dim, rows), 0, residual,
                                        delta, w_delta, w, out, rows, dim, eps)


def add_rmsnorm(kc: KernelCache, stream: Stream, residual: DevicePtr, delta: DevicePtr,
                w: DevicePtr, out: DevicePtr, rows: int, dim: int, eps: float,
                offset: bool = False, one_round: bool = False) -> None:
    """residual += delta (bf16, in place); out = RMSNorm(residual) * w (or * (1 + w); or,
    `one_round`, w times the float32 normalized row rounded once)."""
    _check("add_rmsnorm", dim, {"residual": residual, "delta": delta, "w": w, "out": out})
    if rows:
        early = triggers_early(kc, "norm", rows)
        if one_round:
            sig = _ADD_RMSNORM_ONEROUND[early]
        else:
            trigger = "early" if early else "late" if norm_triggers_late(kc) else "wait"
            sig = _ADD_RMSNORM[offset, trigger]
        kc.get(sig)(stream, rows, rmsnorm_threads(dim, rows), 0, residual, delta, w, out, rows,
                    dim, eps)


def embed_norm_fuses(kc: KernelCache, rows: int) -> bool:
    """Whether a forward of `rows` tokens looks its embeddings up in its first norm's launch
    (`embed_rmsnorm`) instead of an embedding launch before it: a decode batch's rows
    (RMSNORM_LATENCY_ROWS at most, one block a row, as that norm launches anyway), unless
    ATLAS_EMBED_NORM=0 (routes.embed_norm). Prefill chunks keep the two launches, each in
    its throughput geometry."""
    return kc.routes.embed_norm and 0 < rows <= RMSNORM_LATENCY_ROWS


def embed_rmsnorm(kc: KernelCache, stream: Stream, ids: DevicePtr, table: DevicePtr,
                  residual: DevicePtr, w: DevicePtr, out: DevicePtr, rows: int, dim: int,
                  vocab: int, eps: float, scale: float = 1.0, offset: bool = False,
                  one_round: bool = False) -> None:
    """residual[rows, dim] = the embedding rows of `ids` (times `scale`, rounded to bf16 once;
    zeros for an id outside [0, vocab)), out = RMSNorm(residual) * w as `rmsnorm` computes
    it: ops/embedding.embedding then `rmsnorm`, bit for bit, in one launch. The trigger is
    late where add_rmsnorm's is (norm_triggers_late): the projection after it is the same."""
    _check("embed_rmsnorm", dim, {"table": table, "residual": residual, "w": w, "out": out})
    require_aligned("embed_rmsnorm", "ids", ids, 4)
    if rows > RMSNORM_LATENCY_ROWS:
        raise ValueError(f"embed_rmsnorm: {rows} rows exceed its {RMSNORM_LATENCY_ROWS} "
                         "(one block a row)")
    if one_round:
        sig = EMBED_RMSNORM_ONEROUND
    else:
        sig = _EMBED_RMSNORM[offset, norm_triggers_late(kc)]
    if rows:
        kc.get(sig)(stream, rows, rmsnorm_threads(dim, rows), 0, ids, table, residual, w, out,
                    rows, dim, vocab, scale, eps)
