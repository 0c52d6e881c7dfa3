"""Launch builders for the Gated-DeltaNet mixer: causal conv1d and the gated delta rule.

Geometry mirrors kernels/hopper/common/conv1d.cu and gated_delta.cu:
* conv1d: one CONV_THREADS-thread block per (channel tile, token tile, sequence); the block
  owning a sequence's first token tile also moves the conv state forward.
* chunked delta rule (prefill): one DELTA_THREADS-thread block per (DELTA_DV_TILE value
  columns, value head, sequence) walks the sequence's tokens in chunks of CHUNK, keeping its
  state columns in shared memory (dynamic, `delta_chunk_smem_bytes`); its products run on
  tensor cores (gated_delta_chunk_tc) when dk is a multiple of 16, unless switched off.
* recurrent delta rule (decode): one block per (DELTA_DV_TILE columns, value head, sequence);
  its warps split the key dimension, the state is read and written in place.
* fused decode step (gdn_decode.cu): a cluster of GDN_DECODE_SPLIT blocks per (value head,
  row), each of (dk / GDN_DECODE_ROWS) * (dv / GDN_DECODE_SPLIT / 4) threads (whole
  warps), runs the conv, the norms, the recurrent step and the gated RMSNorm for its
  dv / GDN_DECODE_SPLIT columns of the head, holding its state tile in registers; a run
  of one sequence's rows (a verification) is its first row's cluster's, token by token.
Every form takes the step's cu_q / kv_lens (a sequence starting at position 0 starts from
zero state) and one state slot per sequence.
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import (CONV1D, GATED_DELTA_CHUNK, GATED_DELTA_CHUNK_TC,
                          GATED_DELTA_STEP, GDN_DECODE)
from . import KernelCache
from ._preconditions import require_aligned, require_multiple

CONV_THREADS = 128
#: tokens per conv block (conv1d.cu kTokenTile)
CONV_TOKEN_TILE = 64
#: conv widths the kernel keeps in registers (conv1d.cu kMaxKernel)
CONV_MAX_KERNEL = 8
DELTA_THREADS = 128
#: tokens per chunk of the prefill form (gated_delta.cu kChunk)
CHUNK = 64
#: value columns per delta-rule block (gated_delta.cu kDvTile)
DELTA_DV_TILE = 32
#: largest key head dim (gated_delta.cu kMaxDk: the step kernel's q/k staging)
DELTA_MAX_DK = 256


def conv1d_silu(kc: KernelCache, stream: Stream, x: DevicePtr, x_pitch: int, w: DevicePtr,
                conv_state: DevicePtr, state_slots: DevicePtr, cu_q: DevicePtr,
                kv_lens: DevicePtr, out: DevicePtr, num_seqs: int, channels: int, kernel: int,
                max_q_len: int) -> None:
    """out [tokens, channels] = SiLU(causal depthwise conv of x's first `channels` columns),
    with each sequence's history from (and written back to) its conv-state slot."""
    if not 2 <= kernel <= CONV_MAX_KERNEL:
        raise ValueError(f"conv1d: kernel={kernel} must be in 2..{CONV_MAX_KERNEL}")
    if channels < 1 or x_pitch < channels:
        raise ValueError(f"conv1d: need 1 <= channels <= x_pitch, got {channels}, {x_pitch}")
    if num_seqs < 1 or max_q_len < 1:
        raise ValueError(f"conv1d: need num_seqs, max_q_len >= 1, got {num_seqs}, {max_q_len}")
    for name, ptr in (("x", x), ("w", w), ("conv_state", conv_state), ("out", out)):
        require_aligned("conv1d", name, ptr, 2)
    grid = (-(-channels // CONV_THREADS), -(-max_q_len // CONV_TOKEN_TILE), num_seqs)
    kc.get(CONV1D)(stream, grid, CONV_THREADS, 0, x, x_pitch, w, conv_state, state_slots, cu_q,
                   kv_lens, out, num_seqs, channels, kernel)


def delta_chunk_smem_bytes(dk: int) -> int:
    """Dynamic shared memory of the chunked kernel (gated_delta.cu's carve-up): normalized
    q and k of a chunk [CHUNK, dk + 1], the two [CHUNK, CHUNK + 1] triangular matrices, the
    state tile [dk, DELTA_DV_TILE], the chunk's new values and outputs [CHUNK,
    DELTA_DV_TILE + 1], and four per-token vectors, all f32 (rows padded against bank
    conflicts). 130.5 KiB at dk = 128: the launch opts in above 48 KiB."""
    floats = (2 * CHUNK * (dk + 1) + 2 * CHUNK * (CHUNK + 1) + dk * DELTA_DV_TILE
              + 2 * CHUNK * (DELTA_DV_TILE + 1) + 4 * CHUNK)
    return 4 * floats


def chunk_uses_tensor_cores(kc: KernelCache, dk: int) -> bool:
    """The chunked form's dispatch rule: on tensor cores unless switched off
    (ATLAS_GDN_CHUNK_TC=0), for key dims the m16n8k16 tiles cover (multiples of 16)."""
    return kc.routes.gdn_chunk_tc and dk % 16 == 0


def _check_heads(kernel: str, hk: int, hv: int) -> None:
    if hk < 1 or hv < hk or hv % hk:
        raise ValueError(f"{kernel}: hv={hv} must be a positive multiple of hk={hk}")


def _check_delta(kernel: str, qkv_pitch: int, ba_pitch: int, hk: int, hv: int, dk: int,
                 dv: int, ptrs: dict[str, DevicePtr]) -> None:
    _check_heads(kernel, hk, hv)
    require_multiple(kernel, "dv", dv, DELTA_DV_TILE)
    require_multiple(kernel, "dk", dk, 8)
    if dk > DELTA_MAX_DK:
        raise ValueError(f"{kernel}: dk={dk} exceeds {DELTA_MAX_DK}")
    if qkv_pitch < 2 * hk * dk + hv * dv or ba_pitch < 2 * hv:
        raise ValueError(f"{kernel}: row pitches {qkv_pitch}, {ba_pitch} are narrower than "
                         "the q|k|v and b|a rows they hold")
    # the chunked form loads q and k rows 8 bf16 at a time
    require_multiple(kernel, "qkv_pitch", qkv_pitch, 8)
    for name, ptr in ptrs.items():
        require_aligned(kernel, name, ptr, {"state": 4, "qkv": 16}.get(name, 2))


def gated_delta_rule(kc: KernelCache, stream: Stream, qkv: DevicePtr, qkv_pitch: int,
                     ba: DevicePtr, ba_pitch: int, a_log: DevicePtr, dt_bias: DevicePtr,
                     state: DevicePtr, state_slots: DevicePtr, cu_q: DevicePtr,
                     kv_lens: DevicePtr, out: DevicePtr, num_seqs: int, hk: int, hv: int,
                     dk: int, dv: int, recurrent: bool,
                     tensor_cores: bool | None = None) -> None:
    """The delta rule over every sequence's tokens of the step: the chunked (prefill) form,
    or with `recurrent` the decode form (exactly one token per sequence, cu_q[b] == b).

    `tensor_cores` forces (True) or avoids (False) the chunked form's tensor-core kernel;
    None takes it where `chunk_uses_tensor_cores` says."""
    kernel = "gated_delta_step" if recurrent else "gated_delta_chunk"
    _check_delta(kernel, qkv_pitch, ba_pitch, hk, hv, dk, dv,
                 {"qkv": qkv, "ba": ba, "state": state, "out": out})
    if num_seqs < 1:
        raise ValueError(f"{kernel}: num_seqs={num_seqs} must be >= 1")
    if tensor_cores is None:
        tensor_cores = chunk_uses_tensor_cores(kc, dk)
    elif tensor_cores and dk % 16:
        raise ValueError(f"gated_delta_chunk_tc: dk={dk} must be a multiple of 16")
    if recurrent:
        smem, launch = 0, kc.get(GATED_DELTA_STEP)
    else:
        smem = delta_chunk_smem_bytes(dk)
        launch = kc.get_with_shared(GATED_DELTA_CHUNK_TC if tensor_cores else GATED_DELTA_CHUNK,
                                    smem)
    launch(stream, (dv // DELTA_DV_TILE, hv, num_seqs), DELTA_THREADS, smem, qkv, qkv_pitch, ba,
           ba_pitch, a_log, dt_bias, state, state_slots, cu_q, kv_lens, out, num_seqs, hk, hv,
           dk, dv)


#: blocks sharing a value head in the fused decode kernel, each owning dv / GDN_DECODE_SPLIT
#: state columns: a thread-block cluster (gdn_decode.cu kSplit)
GDN_DECODE_SPLIT = 4
#: state rows per thread of the fused decode kernel (gdn_decode.cu kRows)
GDN_DECODE_ROWS = 8
#: its largest block (gdn_decode.cu kMaxThreads, the __launch_bounds__)
GDN_DECODE_MAX_THREADS = 256
#: dynamic shared memory a launch may use without the opt-in
_SMEM_DEFAULT_LIMIT = 48 * 1024


def gdn_decode_threads(dk: int, dv: int) -> int:
    """Threads of a fused decode block: one per (row group, float4 column group) of its
    dv / GDN_DECODE_SPLIT columns, and at least one per 4 of its conv channels, rounded up
    to whole warps."""
    dvt = dv // GDN_DECODE_SPLIT
    groups = max((dk // GDN_DECODE_ROWS) * (dvt // 4), (2 * dk + dvt) // 4)
    return -(-groups // 32) * 32


def gdn_decode_smem_bytes(dk: int, dv: int, kernel: int) -> int:
    """gdn_decode.cu's carve-up, f32 units, for a block's ch = 2 dk + dv / GDN_DECODE_SPLIT
    channels: its conv outputs [ch] (padded to 4 floats), the row groups' two partial-sum
    tiles [dk / GDN_DECODE_ROWS, dv / GDN_DECODE_SPLIT], 64 floats of reduction scratch, and
    the conv taps as bf16 [ch, kernel], a row of 4 channels (2 kernel floats) per convolving
    thread, each row one float longer (no bank conflicts)."""
    dvt = dv // GDN_DECODE_SPLIT
    ch = 2 * dk + dvt
    return 4 * (_pad4(ch) + 2 * (dk // GDN_DECODE_ROWS) * dvt + 64 + ch // 4 * (2 * kernel + 1))


def _pad4(n: int) -> int:
    return -(-n // 4) * 4


def gdn_decode_fits(dk: int, dv: int, kernel: int, proj_pitch: int) -> bool:
    """Whether the fused decode kernel takes these head dims, conv width and projection row
    pitch (other layers run the three unfused kernels): whole float4 column groups in each
    of the GDN_DECODE_SPLIT blocks, at most 32 of them (row group 0 is one warp), whole row
    groups, and rows 8-byte aligned (its row, ring and output accesses move 4 bf16 at once)."""
    dvt = dv // GDN_DECODE_SPLIT
    return (proj_pitch % 4 == 0 and dk >= GDN_DECODE_ROWS and dk % GDN_DECODE_ROWS == 0
            and dv % (4 * GDN_DECODE_SPLIT) == 0 and 4 <= dvt <= 4 * 32
            and gdn_decode_threads(dk, dv) <= GDN_DECODE_MAX_THREADS
            and 2 <= kernel <= CONV_MAX_KERNEL
            and gdn_decode_smem_bytes(dk, dv, kernel) <= _SMEM_DEFAULT_LIMIT)


def gdn_decode(kc: KernelCache, stream: Stream, proj: DevicePtr, proj_pitch: int,
               conv_w: DevicePtr, conv_state: DevicePtr, a_log: DevicePtr, dt_bias: DevicePtr,
               norm_w: DevicePtr, state: DevicePtr, state_slots: DevicePtr,
               state_out: DevicePtr, cu_q: DevicePtr, kv_lens: DevicePtr, out: DevicePtr,
               num_seqs: int, hk: int, hv: int, dk: int, dv: int, kernel: int,
               eps: float) -> None:
    """out [num_seqs, hv * dv] = gated RMSNorm(delta rule step(conv(proj's q|k|v)), z) for
    one token per row, equal to conv1d_silu, gated_delta_rule(recurrent=True) and
    gating.gated_rmsnorm in turn.

    Row b reads its states at slot state_slots[b] and leaves them at state_out[b]: in place
    where the two are equal (plain decode). Consecutive rows with the same slot at
    consecutive positions are one sequence's run (a verification's K + 1 tokens): token by
    token, each as a decode step of its own would compute it, the state after row b's token
    left at state_out[b], which for a run of several rows must differ from its slot (the
    kernel's ring is read by other blocks while a run writes)."""
    name = "gdn_decode"
    _check_heads(name, hk, hv)
    if not gdn_decode_fits(dk, dv, kernel, proj_pitch):
        raise ValueError(f"{name}: dk={dk} dv={dv} kernel={kernel} proj_pitch={proj_pitch} do "
                         f"not fit the kernel (dk a multiple of {GDN_DECODE_ROWS}, dv of "
                         f"{4 * GDN_DECODE_SPLIT} up to {4 * 32 * GDN_DECODE_SPLIT}, at most "
                         f"{GDN_DECODE_MAX_THREADS} threads, kernel in 2..{CONV_MAX_KERNEL}, "
                         "the pitch a multiple of 4)")
    row = 2 * hk * dk + 2 * hv * dv + 2 * hv
    if proj_pitch < row:
        raise ValueError(f"{name}: proj_pitch={proj_pitch} is narrower than the "
                         f"[q | k | v | z | b | a] row of {row}")
    if num_seqs < 1:
        raise ValueError(f"{name}: num_seqs={num_seqs} must be >= 1")
    smem = gdn_decode_smem_bytes(dk, dv, kernel)
    for ptr_name, ptr in (("proj", proj), ("conv_w", conv_w), ("conv_state", conv_state),
                          ("out", out)):
        require_aligned(name, ptr_name, ptr, 8)
    for ptr_name, ptr in (("a_log", a_log), ("dt_bias", dt_bias), ("norm_w", norm_w)):
        require_aligned(name, ptr_name, ptr, 2)
    require_aligned(name, "state", state, 16)
    kc.get(GDN_DECODE)(stream, (GDN_DECODE_SPLIT, hv, num_seqs), gdn_decode_threads(dk, dv),
                       smem, proj, proj_pitch, conv_w, conv_state, a_log, dt_bias, norm_w,
                       state, state_slots, state_out, cu_q, kv_lens, out, num_seqs, hk, hv, dk,
                       dv, kernel, eps)
