"""Check cases for the row invariance a verification step relies on (model/runner.py): row i
of an m-row decode step must compute bit for bit what the one-row decode step at its position
computes. Then greedy speculation emits the plain tokens on the GPU, and an oracle drafting
the plain greedy output is accepted exactly as often as it asks (tools/gpu/bench_spec.py).

* gemv: each row of an m-row product (m = 2..8; bf16 out, and f32 out as the LM head), on
  the ring kernel and on the register-tiled one, equals the single-row kernel's product of
  that row.
* attention: K + 1 consecutive positions of one sequence beside another sequence's decode
  row, run as a verification step both ways (qk_norm_rope_kv for every row, then
  decode_attention with one row per position; and the rope-fused decode_attention_rope over
  all rows, whose blocks compute the keys the earlier rows append), equal the plain decode
  steps one position at a time (decode_attention_rope at batch 1, which appends its own
  key), on the same split count: the runner's batch-1 count, which it keeps for steps of up
  to runner.row_invariant_rows rows.

`KernelCase.same_bits` fails the check on any differing bit; the float64 oracles bound each
path's accuracy as every other case does.
"""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, attention, matmul, rope
from .attention import ATTN_TOL, Geometry, paged_cache
from .gemv import gemv_cache, linear_oracle, random_bf16
from .rope_kv import EPS, cos_sin_table, head_norm, rb, rotate

#: the row counts whose rows are compared with single-row launches
GEMV_ROW_COUNTS = tuple(range(2, matmul.GEMV_MAX_M + 1))


def gemv_rows_case(rng: np.random.Generator, n: int, k: int, out_f32: bool) -> KernelCase:
    """Products of 2..8 rows (stacked in x) on the ring kernel ("y") and on the
    register-tiled one ("y_tiled"), and every row again on the single-row kernel ("y_row"),
    whatever routes the environment picks."""
    total = sum(GEMV_ROW_COUNTS)
    inputs = {"x": random_bf16(rng, (total, k)), "w": random_bf16(rng, (n, k), k ** -0.5)}
    out_bytes = 4 if out_f32 else 2

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        for out, kc in (("y", gemv_cache(backend, True)), ("y_tiled", gemv_cache(backend, False))):
            row = 0
            for m in GEMV_ROW_COUNTS:
                matmul.gemv(kc, stream, p["x"] + 2 * k * row, p["w"],
                            p[out] + out_bytes * n * row, m, n, k, out_f32, single=False)
                row += m
        kc = gemv_cache(backend, False)
        for i in range(total):
            matmul.gemv(kc, stream, p["x"] + 2 * k * i, p["w"], p["y_row"] + out_bytes * n * i,
                        1, n, k, out_f32, single=True)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        y = linear_oracle(x)["y"]
        return {"y": y, "y_tiled": y, "y_row": y}

    spec = OutputSpec(DType.FP32 if out_f32 else DType.BF16, (total, n), bf16_valued=out_f32)
    return KernelCase(f"row invariance gemv m2..8 n{n} k{k}{' f32' if out_f32 else ''}",
                      "gemv", inputs, {"y": spec, "y_tiled": spec, "y_row": spec}, run, oracle,
                      same_bits=(("y", "y_row"), ("y_tiled", "y_row")))


@kernel_cases("gemv")
def gemv_row_cases(rng: np.random.Generator) -> list[KernelCase]:
    # (n even: the bf16 rows' offsets stay 4-byte aligned)
    return [gemv_rows_case(rng, 130, 4096, False),     # Qwen3-8B's hidden size as K
            gemv_rows_case(rng, 34, 12288, False),     # its down projection's K
            gemv_rows_case(rng, 257, 1024, True)]      # an LM head (f32 logits)


def verification_case(rng: np.random.Generator, name: str, g: Geometry, history: int,
                      drafts: int, other: int, num_splits: int) -> KernelCase:
    """Sequence X with `history` cached keys verifies `drafts` drafts (rows at positions
    history .. history + drafts), sequence Y (`other` cached keys) decodes one row."""
    d, hq, hkv = g.head_dim, g.hq, g.hkv
    rows = drafts + 2
    seq_of = [0] * (drafts + 1) + [1]
    positions = np.array(list(range(history, history + drafts + 1)) + [other], np.int32)
    inputs = paged_cache(rng, [history + drafts + 1, other + 1], g)
    tables = inputs.pop("block_tables")
    row_tables = tables[seq_of]                          # one block-table row per row
    slots = np.array([row_tables[r, p // g.block_size] * g.block_size + p % g.block_size
                      for r, p in enumerate(positions)], np.int32)
    max_blocks = row_tables.shape[1]
    k_cache, v_cache = inputs.pop("k_cache"), inputs.pop("v_cache")
    inputs.update(
        k_plain=k_cache, v_plain=v_cache, k_verify=k_cache.copy(), v_verify=v_cache.copy(),
        k_fused=k_cache.copy(), v_fused=v_cache.copy(),
        row_tables=row_tables, positions=positions, slots=slots, kv_lens=positions + 1,
        qkv=random_bf16(rng, (rows, (hq + 2 * hkv) * d), 3.0),
        cos_sin=cos_sin_table(d, int(positions.max()) + 1),
        q_norm_w=f32_to_bf16_bits(rng.uniform(0.5, 1.5, d).astype(np.float32)),
        k_norm_w=f32_to_bf16_bits(rng.uniform(0.5, 1.5, d).astype(np.float32)),
        q=np.zeros((rows, hq, d), np.uint16),
        part_o=np.zeros((rows, hq, num_splits, d), np.float32),
        part_ml=np.zeros((rows, hq, num_splits, 2), np.float32),
        counters=np.zeros((rows, hq), np.int32))
    qkv_bytes, out_bytes = 2 * (hq + 2 * hkv) * d, 2 * hq * d

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        kc = KernelCache(backend)
        # plain decode: one batch-1 rope-fused step per position, on the CUDA-core kernel a
        # row-invariant runner's batch-1 steps keep (AttentionPlan.row_invariant)
        for r in range(rows):
            # the kernel reads cached rows before its PDL wait (attention.cu RopedQ: the model
            # launches it after the qkv projection), so the step before, which wrote the key
            # this one reads, must have finished
            backend.synchronize(stream)
            attention.decode_attention_rope(
                kc, stream, p["qkv"] + qkv_bytes * r, p["k_plain"], p["v_plain"],
                p["q_norm_w"], p["k_norm_w"], p["cos_sin"], p["positions"] + 4 * r,
                p["slots"] + 4 * r, p["row_tables"] + 4 * max_blocks * r, p["kv_lens"] + 4 * r,
                p["part_o"], p["part_ml"], p["counters"], p["out_plain"] + out_bytes * r, 1, hq,
                hkv, d, g.block_size, max_blocks, num_splits, g.scale, EPS, long=False)
        # the verification step: every row's K/V appended, then one decode row per position;
        # both launches keep the batch-1 kernels (long=False): 8 rows of one sequence would
        # otherwise reach the batched tensor-core route (attention_long.uses_long counts rows
        # as sequences), whose rope-fused entry appends each row's own key only and whose sums
        # are not the batch-1 kernels' bits
        rope.qk_norm_rope_kv(kc, stream, p["qkv"], p["q"], p["k_verify"], p["v_verify"],
                             p["q_norm_w"], p["k_norm_w"], p["cos_sin"], p["positions"],
                             p["slots"], rows, hq, hkv, d, g.block_size, EPS)
        attention.decode_attention(kc, stream, p["q"], p["k_verify"], p["v_verify"],
                                   p["row_tables"], p["kv_lens"], p["part_o"], p["part_ml"],
                                   p["counters"], p["out_verify"], rows, hq, hkv, d,
                                   g.block_size, max_blocks, num_splits, g.scale, long=False)
        # and in one rope-fused launch (after a kernel that writes none of its inputs)
        attention.decode_attention_rope(
            kc, stream, p["qkv"], p["k_fused"], p["v_fused"], p["q_norm_w"], p["k_norm_w"],
            p["cos_sin"], p["positions"], p["slots"], p["row_tables"], p["kv_lens"],
            p["part_o"], p["part_ml"], p["counters"], p["out_fused"], rows, hq, hkv, d,
            g.block_size, max_blocks, num_splits, g.scale, EPS, long=False)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        row = bf16_bits_to_f32(x["qkv"]).astype(np.float64)
        q = row[:, :hq * d].reshape(rows, hq, d)
        k = row[:, hq * d:(hq + hkv) * d].reshape(rows, hkv, d)
        v = row[:, (hq + hkv) * d:].reshape(rows, hkv, d)
        q = head_norm(q, bf16_bits_to_f32(x["q_norm_w"]).astype(np.float64))
        k = head_norm(k, bf16_bits_to_f32(x["k_norm_w"]).astype(np.float64))
        table = x["cos_sin"][x["positions"]].astype(np.float64)
        cos, sin = rb(table[:, None, :d // 2]), rb(table[:, None, d // 2:])
        q, k = rb(rotate(q, cos, sin)), rb(rotate(k, cos, sin))
        kc = bf16_bits_to_f32(x["k_plain"]).astype(np.float64)
        vc = bf16_bits_to_f32(x["v_plain"]).astype(np.float64)
        for r, slot in enumerate(slots):
            blk, off = divmod(int(slot), g.block_size)
            kc[blk, :, off], vc[blk, :, off] = k[r], v[r]
        out = np.empty((rows, hq, d))
        for r, pos in enumerate(positions):
            at = [(row_tables[r, p // g.block_size], p % g.block_size) for p in range(pos + 1)]
            keys = np.stack([kc[b, :, o] for b, o in at])
            vals = np.stack([vc[b, :, o] for b, o in at])
            for h in range(hq):
                kvh = h // (hq // hkv)
                s = keys[:, kvh] @ q[r, h] * g.scale
                e = np.exp(s - s.max())
                out[r, h] = e @ vals[:, kvh] / e.sum()
        return {"out_plain": out, "out_verify": out, "out_fused": out}

    spec = OutputSpec(DType.BF16, (rows, hq, d), ATTN_TOL)
    return KernelCase(name, "attention", inputs,
                      {"out_plain": spec, "out_verify": spec, "out_fused": spec}, run, oracle,
                      same_bits=(("out_plain", "out_verify"), ("out_plain", "out_fused")),
                      capturable=False)


@kernel_cases("attention")
def verification_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [
        # Qwen3-8B's heads at batch 1's 33 splits (10 active), K = 3
        verification_case(rng, "row invariance verify D128 gqa4 K3 splits33",
                          Geometry(32, 8, 128, 16), 300, 3, 45, 33),
        # Qwen3-0.6B's heads, K = 4 crossing a block boundary, 4 long splits
        verification_case(rng, "row invariance verify D128 gqa2 K4 splits4",
                          Geometry(16, 8, 128, 16), 150, 4, 1, 4),
        # Qwen3-30B-A3B's heads (two slices): the drafts' keys 62..65 straddle the clustered
        # kernel's first two 64-key splits
        verification_case(rng, "row invariance verify D128 gqa8 K3 splits33 straddle",
                          Geometry(32, 4, 128, 16), 62, 3, 7, 33),
        # K = 7, the most the rope-fused kernel computes (8 keys of one sequence)
        verification_case(rng, "row invariance verify D128 gqa2 K7 splits4",
                          Geometry(16, 8, 128, 16), 200, 7, 30, 4),
    ]
