"""Reference for decode_persistent_bf16 (kernels/hopper/common/decode_persistent.cu).

Specification: what the per-op batch-1 decode path computes, composed per layer for the one
sequence of the step (every step a reference of its own module):
    normed = rmsnorm.py's norm of resid with in_norm
    qkv    = gemv.py's product of normed with qkv_w           (written to the qkv row)
    attn   = attention.py's decode_attn_rope_bf16 over qkv with `splits` splits
             (appends the step's k, v to the layer's caches; partials in part_o / part_ml)
    resid  = bf16(resid + gemv(attn, o_w))                    (rmsnorm.py's residual add)
    act    = silu_mul.py's SwiGLU of gemv(rmsnorm(resid, post_norm), gate_up_w)
    resid  = bf16(resid + gemv(act, down_w))
The CUDA kernel sums in f32 in its own order (GEMVs, norms, softmax): it agrees to f32
rounding of those sums, not bit for bit. `sync` is left as it is (the device's barrier
count grows; its split tickets, exit ticket and readiness counts stay zero), and `schedule`
(how the device orders its phases) changes no value. A trace buffer (block 0's timeline on the
device) is not written here.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import DECODE_PERSISTENT
from ..ops.decode_persistent import LAYER_POINTERS
from . import HostMemory, reference
from .attention import decode_attn_rope_bf16
from .gemv import product_bits
from .rmsnorm import rms_norm_bf16
from .silu_mul import swiglu_rows


def _norm(mem: HostMemory, resid: np.ndarray, w: int, eps: float) -> np.ndarray:
    wf = bf16_bits_to_f32(mem.view(w, np.uint16, resid.size))
    return rms_norm_bf16(bf16_bits_to_f32(resid), wf, eps)


def _add(resid: np.ndarray, y_bits: np.ndarray) -> None:
    resid[:] = f32_to_bf16_bits(bf16_bits_to_f32(resid) + bf16_bits_to_f32(y_bits))


@reference(DECODE_PERSISTENT)
def decode_persistent_bf16(mem: HostMemory, grid: Dim3, block: Dim3, layers: int, resid: int,
                           qkv: int, attn: int, act: int, part_o: int, part_ml: int, sync: int,
                           cos_sin: int, positions: int, slots: int, block_tables: int,
                           kv_lens: int, num_layers: int, hidden: int, hq: int, hkv: int,
                           head_dim: int, inter: int, block_size: int, splits: int,
                           prefetch_bytes: int, stage0: int, stage1: int, scale: float,
                           eps: float, trace: int, schedule: int) -> None:
    table = mem.view(layers, np.uint64, num_layers * len(LAYER_POINTERS)).reshape(
        num_layers, len(LAYER_POINTERS))
    qkv_n, q_width = (hq + 2 * hkv) * head_dim, hq * head_dim
    kv_len = int(mem.view(kv_lens, np.int32, 1)[0])
    used_blocks = max(1, -(-kv_len // block_size))  # the part of row 0 the step reads
    r = mem.view(resid, np.uint16, hidden)
    for row in table:
        p = dict(zip(LAYER_POINTERS, (int(v) for v in row)))
        normed = _norm(mem, r, p["in_norm"], eps)
        mem.view(qkv, np.uint16, qkv_n)[:] = product_bits(mem, normed, p["qkv_w"], qkv_n, hidden)
        decode_attn_rope_bf16(mem, grid, block, qkv, p["k_cache"], p["v_cache"], p["q_norm"],
                              p["k_norm"], cos_sin, positions, slots, block_tables, kv_lens,
                              part_o, part_ml, sync, attn, 1, hq, hkv, head_dim, block_size,
                              used_blocks, splits, scale, eps)
        _add(r, product_bits(mem, mem.view(attn, np.uint16, q_width), p["o_w"], hidden, q_width))
        normed = _norm(mem, r, p["post_norm"], eps)
        gate_up = product_bits(mem, normed, p["gate_up_w"], 2 * inter, hidden)
        a = mem.view(act, np.uint16, inter)
        a[:] = swiglu_rows(gate_up, inter).reshape(-1)
        _add(r, product_bits(mem, a, p["down_w"], hidden, inter))
