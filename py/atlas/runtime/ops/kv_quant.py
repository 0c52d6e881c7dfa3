"""Launch builders for the quantized KV caches, FP8 (E4M3) and NVFP4: the calibrating,
quantizing append (kv_quant.cu) and attention that reads the quantized pools
(attention_kvq.cu).

A quantized layer's K/V path is: qk_norm_rope_kv writes the step's rotated K/V in bf16 to a
staging buffer (a one-block "cache" of stage_rows rows, addressed by the identity slots
0..tokens-1), `kv_append` calibrates the layer's scales if they are unset and quantizes
the rows into the pools at the real slots; attention then dequantizes in registers. The
two formats differ only in their kernels and calibration range (`KvFormat`): the launch
geometry, staging and scales are shared.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.dtype import DType
from ..gpu import DevicePtr, KernelSig, Stream
from ..kernel_abi import DECODE_ATTN_FP8, DECODE_ATTN_NVFP4, \
    KV_CALIBRATE, KV_FP8_APPEND, KV_NVFP4_APPEND, PREFILL_ATTN_FP8, PREFILL_ATTN_NVFP4
from . import KernelCache
from .attention import ATTN_THREADS, PREFILL_QUERY_TILE, _check_heads, combine_partials

#: threads of the calibration and append blocks
KV_QUANT_THREADS = 256
#: FP8 E4M3's largest finite value: a calibrated FP8 scale maps a head's amax onto it
E4M3_MAX = 448.0
#: E2M1's largest value: NVFP4 group scales map a group's amax onto it (or onto 4)
E2M1_MAX = 6.0
#: default of --fp8-kv-calibration-tokens (both formats calibrate the same way)
DEFAULT_CALIBRATION_TOKENS = 512


@dataclass(frozen=True, slots=True)
class KvFormat:
    """One quantized pool format: its kernels and what its calibrated scale maps amax onto
    (the per-head scale is code * scale for FP8; for NVFP4 the E4M3 group scales sit on
    top of it, so the head's amax maps onto the largest group scale times E2M1's 6)."""

    label: str
    qmax: float
    append: KernelSig
    prefill: KernelSig
    decode: KernelSig


KV_FORMATS: dict[DType, KvFormat] = {
    DType.FP8E4M3: KvFormat("fp8", E4M3_MAX, KV_FP8_APPEND, PREFILL_ATTN_FP8,
                            DECODE_ATTN_FP8),
    DType.E2M1: KvFormat("nvfp4", E4M3_MAX * E2M1_MAX, KV_NVFP4_APPEND, PREFILL_ATTN_NVFP4,
                         DECODE_ATTN_NVFP4),
}


def kv_format(dtype: DType) -> KvFormat:
    try:
        return KV_FORMATS[dtype]
    except KeyError:
        raise ValueError(f"no quantized KV kernels for {dtype.label}") from None


def kv_append(kc: KernelCache, stream: Stream, dtype: DType, stage: DevicePtr,
              stage_rows: int, slots: DevicePtr, scales: DevicePtr, k_cache: DevicePtr,
              v_cache: DevicePtr, tokens: int, hkv: int, head_dim: int, block_size: int,
              calib_tokens: int) -> None:
    """Quantize this step's staged K/V rows into the `dtype` pools at `slots`.

    calib_tokens > 0 first calibrates the scales still 0 from this step's first
    calib_tokens tokens (prefill steps); 0 skips calibration (decode steps: the scales were
    set by the sequence's prefill or the checkpoint)."""
    fmt = kv_format(dtype)
    if tokens > stage_rows:
        raise ValueError(f"kv_append: {tokens} tokens exceed the {stage_rows} staging rows")
    if hkv < 1 or head_dim < 1 or block_size < 1:
        raise ValueError(f"kv_append: need hkv, head_dim, block_size >= 1, got {hkv}, "
                         f"{head_dim}, {block_size}")
    if dtype is DType.E2M1 and head_dim % 64:
        raise ValueError(f"kv_append: nvfp4 rows need head_dim a multiple of 64 (16-element "
                         f"groups, 4-byte aligned rows), got {head_dim}")
    if not tokens:
        return
    if calib_tokens:
        kc.get(KV_CALIBRATE)(stream, (hkv, 2), KV_QUANT_THREADS, 0, stage, stage_rows, slots,
                             scales, tokens, calib_tokens, hkv, head_dim, fmt.qmax)
    kc.get(fmt.append)(stream, (tokens, 2), KV_QUANT_THREADS, 0, stage, stage_rows, slots,
                       scales, k_cache, v_cache, tokens, hkv, head_dim, block_size)


def prefill_attention_kvq(kc: KernelCache, stream: Stream, dtype: DType, q: DevicePtr,
                          k_cache: DevicePtr, v_cache: DevicePtr, kv_scales: DevicePtr,
                          block_tables: DevicePtr, cu_q: DevicePtr, kv_lens: DevicePtr,
                          out: DevicePtr, num_seqs: int, hq: int, hkv: int, head_dim: int,
                          block_size: int, max_blocks: int, scale: float,
                          max_q_len: int) -> None:
    """`attention.prefill_attention` over `dtype` pools (same grid and outputs)."""
    fmt = kv_format(dtype)
    _check_heads(hq, hkv, head_dim, block_size)
    if num_seqs < 1 or max_q_len < 1 or max_blocks < 1:
        raise ValueError(f"prefill_attention_kvq: need num_seqs, max_q_len, max_blocks >= 1, "
                         f"got {num_seqs}, {max_q_len}, {max_blocks}")
    grid = (hq, -(-max_q_len // PREFILL_QUERY_TILE), num_seqs)
    kc.get(fmt.prefill)(stream, grid, ATTN_THREADS, 0, q, k_cache, v_cache, kv_scales,
                        block_tables, cu_q, kv_lens, out, num_seqs, hq, hkv, head_dim,
                        block_size, max_blocks, scale)


def decode_attention_kvq(kc: KernelCache, stream: Stream, dtype: DType, q: DevicePtr,
                         k_cache: DevicePtr, v_cache: DevicePtr, kv_scales: DevicePtr,
                         block_tables: DevicePtr, kv_lens: DevicePtr, part_o: DevicePtr,
                         part_ml: DevicePtr, out: DevicePtr, num_seqs: int, hq: int, hkv: int,
                         head_dim: int, block_size: int, max_blocks: int, num_splits: int,
                         scale: float) -> None:
    """`attention.decode_attention` over `dtype` pools: split partials, then the bf16
    combine."""
    fmt = kv_format(dtype)
    _check_heads(hq, hkv, head_dim, block_size)
    if num_seqs < 1 or num_splits < 1 or max_blocks < 1:
        raise ValueError(f"decode_attention_kvq: need num_seqs, num_splits, max_blocks >= 1, "
                         f"got {num_seqs}, {num_splits}, {max_blocks}")
    kc.get(fmt.decode)(stream, (num_splits, hkv, num_seqs), ATTN_THREADS, 0, q, k_cache,
                       v_cache, kv_scales, block_tables, kv_lens, part_o, part_ml, num_seqs,
                       hq, hkv, head_dim, block_size, max_blocks, num_splits, scale)
    combine_partials(kc, stream, part_o, part_ml, kv_lens, out, num_seqs, hq, head_dim,
                     num_splits)
