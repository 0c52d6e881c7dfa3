"""Launch builders for the FP8 KV cache: the quantizing append (kv_quant.cu) and attention
that reads the fp8 pools (attention_kvq.cu).

A quantized layer's K/V path is: qk_norm_rope_kv writes the step's rotated K/V in bf16 to a
staging buffer (a one-block "cache" of stage_rows rows, addressed by the identity slots
0..tokens-1), `fp8_kv_append` calibrates the layer's scales if they are unset and quantizes
the rows into the pools at the real slots; attention then dequantizes in registers.
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import DECODE_ATTN_COMBINE, DECODE_ATTN_FP8, KV_FP8_APPEND, KV_FP8_CALIBRATE, \
    PREFILL_ATTN_FP8
from . import KernelCache
from .attention import ATTN_THREADS, PREFILL_QUERY_TILE, _check_heads

#: threads of the calibration and append blocks
KV_QUANT_THREADS = 256
#: FP8 E4M3's largest finite value: a calibrated scale maps a head's amax onto it
E4M3_MAX = 448.0
#: default of --fp8-kv-calibration-tokens
DEFAULT_CALIBRATION_TOKENS = 512


def fp8_kv_append(kc: KernelCache, stream: Stream, stage: DevicePtr, stage_rows: int,
                  slots: DevicePtr, scales: DevicePtr, k_cache: DevicePtr, v_cache: DevicePtr,
                  tokens: int, hkv: int, head_dim: int, block_size: int,
                  calib_tokens: int) -> None:
    """Quantize this step's staged K/V rows into the fp8 pools at `slots`.

    calib_tokens > 0 first calibrates the scales still 0 from this step's first
    calib_tokens tokens (prefill steps); 0 skips calibration (decode steps: the scales were
    set by the sequence's prefill or the checkpoint)."""
    if tokens > stage_rows:
        raise ValueError(f"fp8_kv_append: {tokens} tokens exceed the {stage_rows} staging rows")
    if hkv < 1 or head_dim < 1 or block_size < 1:
        raise ValueError(f"fp8_kv_append: need hkv, head_dim, block_size >= 1, got {hkv}, "
                         f"{head_dim}, {block_size}")
    if not tokens:
        return
    if calib_tokens:
        kc.get(KV_FP8_CALIBRATE)(stream, (hkv, 2), KV_QUANT_THREADS, 0, stage, stage_rows,
                                 slots, scales, tokens, calib_tokens, hkv, head_dim)
    kc.get(KV_FP8_APPEND)(stream, (tokens, 2), KV_QUANT_THREADS, 0, stage, stage_rows, slots,
                          scales, k_cache, v_cache, tokens, hkv, head_dim, block_size)


def prefill_attention_fp8(kc: KernelCache, stream: Stream, q: DevicePtr, k_cache: DevicePtr,
                          v_cache: DevicePtr, kv_scales: DevicePtr, block_tables: DevicePtr,
                          cu_q: DevicePtr, kv_lens: DevicePtr, out: DevicePtr, num_seqs: int,
                          hq: int, hkv: int, head_dim: int, block_size: int, max_blocks: int,
                          scale: float, max_q_len: int) -> None:
    """`attention.prefill_attention` over fp8 pools (same grid and outputs)."""
    _check_heads(hq, hkv, head_dim, block_size)
    if num_seqs < 1 or max_q_len < 1 or max_blocks < 1:
        raise ValueError(f"prefill_attention_fp8: need num_seqs, max_q_len, max_blocks >= 1, "
                         f"got {num_seqs}, {max_q_len}, {max_blocks}")
    grid = (hq, -(-max_q_len // PREFILL_QUERY_TILE), num_seqs)
    kc.get(PREFILL_ATTN_FP8)(stream, grid, ATTN_THREADS, 0, q, k_cache, v_cache, kv_scales,
                             block_tables, cu_q, kv_lens, out, num_seqs, hq, hkv, head_dim,
                             block_size, max_blocks, scale)


def decode_attention_fp8(kc: KernelCache, stream: Stream, q: DevicePtr, k_cache: DevicePtr,
                         v_cache: DevicePtr, kv_scales: DevicePtr, block_tables: DevicePtr,
                         kv_lens: DevicePtr, part_o: DevicePtr, part_ml: DevicePtr,
                         out: DevicePtr, num_seqs: int, hq: int, hkv: int, head_dim: int,
                         block_size: int, max_blocks: int, num_splits: int,
                         scale: float) -> None:
    """`attention.decode_attention` over fp8 pools: split partials, then the bf16 combine."""
    _check_heads(hq, hkv, head_dim, block_size)
    if num_seqs < 1 or num_splits < 1 or max_blocks < 1:
        raise ValueError(f"decode_attention_fp8: need num_seqs, num_splits, max_blocks >= 1, "
                         f"got {num_seqs}, {num_splits}, {max_blocks}")
    kc.get(DECODE_ATTN_FP8)(stream, (num_splits, hkv, num_seqs), ATTN_THREADS, 0, q, k_cache,
                            v_cache, kv_scales, block_tables, kv_lens, part_o, part_ml,
                            num_seqs, hq, hkv, head_dim, block_size, max_blocks, num_splits,
                            scale)
    # one block per (q head, sequence), as attention.decode_attention merges long partials
    kc.get(DECODE_ATTN_COMBINE)(stream, (1, hq, num_seqs), ATTN_THREADS, 0, part_o, part_ml,
                                kv_lens, out, num_seqs, hq, head_dim, num_splits)
