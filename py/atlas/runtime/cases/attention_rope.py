"""Check cases for decode attention with the q/k norm, RoPE and KV append fused in
(decode_attn_rope_bf16): the step's key is in the cache only after the launch, so the
float64 oracle norms and rotates q and k itself (cases/rope_kv.py's roundings), attends over
the cached history plus that key, and expects the new k and v in the caches at the step's
slot (a padding sequence's slot -1 leaves its cache untouched and attends over it as is).

Every cache element a sequence owns is compared (the rest hold NaN, as in cases/attention.py).
The case launches twice: the second launch must find the split tickets reset and rewrite the
same cache rows. A padded geometry (proj_dim < head_dim) reads qkv rows of proj_dim-long
heads (rotating whole) and expects cache rows of those elements, then zeros.
"""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, attention, attention_long
from .attention import (ATTN_TOL, Geometry, case_routes, pad_heads, paged_cache,
                        random_sinks, traced_twins_apply)
from .gemv import random_bf16
from .rope_kv import EPS, cos_sin_table, head_norm, rb, rotate


def decode_rope_case(rng: np.random.Generator, name: str, g: Geometry, kv_lens: list[int],
                     num_splits: int, normed: bool = True, pad_last: bool = False,
                     graph: bool = False, traced: bool = False, twin: str = "",
                     long: bool | None = None, window: int = 0,
                     sinks: bool = False, gated: bool = False) -> KernelCase:
    """One token per sequence at position kv_len - 1; `pad_last`: the last sequence's slot
    is -1 (a graph's padding row); `graph`: also in the device check's graph capture;
    `traced`: the phase-traced twin (attention_twins.cu), which must compute the same;
    `twin`: another twin of that module (cases/attention.py DECODE_TWINS), the same too;
    `long`: decode_attention_rope's `long` (True: the tensor-core kernel's rope entry on
    num_splits splits, module attention_long); `window` > 0: a sliding window (the query
    sees its sequence's last `window` keys, the appended one included); `sinks`: attention
    sinks (cases/attention.py; the long kernel's); `gated`: gated full attention on
    ops/attention_long.decode_attention_long_rope_gated (one sequence; Qwen3.5's layout: each
    q head followed by its output gate, a quarter of a head rotating, (1 + w) norm weights,
    the output multiplied by bf16(sigmoid(gate)))."""
    num_seqs, d, pd = len(kv_lens), g.head_dim, g.proj
    q_pitch, rot = (2 * pd, pd // 4) if gated else (pd, pd)
    q_width = g.hq * q_pitch
    inputs = paged_cache(rng, kv_lens, g)
    tables = inputs["block_tables"]
    slots = np.array([tables[b, (n - 1) // g.block_size] * g.block_size + (n - 1) % g.block_size
                      for b, n in enumerate(kv_lens)], dtype=np.int32)
    if pad_last:
        slots[-1] = -1
    inputs.update(qkv=random_bf16(rng, (num_seqs, q_width + 2 * g.hkv * pd), 3.0),
                  cos_sin=cos_sin_table(rot, max(kv_lens)), slots=slots,
                  positions=np.asarray(kv_lens, dtype=np.int32) - 1,
                  # (two a kv head: the gated entry's SpreadMerge counts arrivals and departures)
                  counters=np.zeros((num_seqs, 2 * g.hq), np.int32))
    if sinks:
        inputs["sinks"] = random_sinks(rng, g.hq)
    if normed:
        for w in ("q_norm_w", "k_norm_w"):  # (1 + w) weights: w near zero
            inputs[w] = f32_to_bf16_bits((rng.uniform(-0.5, 0.5, pd) if gated else
                                          rng.uniform(0.5, 1.5, pd)).astype(np.float32))
    splits_shape = (num_seqs, g.hq, num_splits)
    inputs["part_o"] = np.zeros(splits_shape + (d,), np.float32)  # scratch, not compared
    inputs["part_ml"] = np.zeros(splits_shape + (2,), np.float32)
    max_blocks = tables.shape[1]
    if traced:  # the stamps are clock readings: an input buffer, never compared
        grid = attention.decode_grid(num_splits, g.hq, g.hkv, num_seqs)
        inputs["trace"] = np.zeros((int(np.prod(grid)), attention.TRACE_WORDS), np.int64)

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        for _ in range(2):
            if gated:
                attention_long.decode_attention_long_rope_gated(
                    KernelCache(backend, case_routes(twin)), stream, p["qkv"], p["k_cache"],
                    p["v_cache"], p.get("q_norm_w", 0), p.get("k_norm_w", 0), p["cos_sin"],
                    p["positions"], p["slots"], p["block_tables"], p["kv_lens"], p["part_o"],
                    p["part_ml"], p["counters"], p["out"], g.hq, g.hkv, d, g.block_size,
                    max_blocks, num_splits, g.scale, EPS, q_pitch, rot, True)
                continue
            attention.decode_attention_rope(
                KernelCache(backend, case_routes(twin)), stream, p["qkv"], p["k_cache"],
                p["v_cache"],
                p.get("q_norm_w", 0), p.get("k_norm_w", 0), p["cos_sin"], p["positions"],
                p["slots"], p["block_tables"], p["kv_lens"], p["part_o"], p["part_ml"],
                p["counters"], p["out"], num_seqs, g.hq, g.hkv, d, g.block_size, max_blocks,
                num_splits, g.scale, EPS, trace=p.get("trace", 0), long=long, window=window,
                proj_dim=pd, sinks=p.get("sinks", 0))

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        row = bf16_bits_to_f32(x["qkv"]).astype(np.float64)
        heads = row[:, :q_width].reshape(num_seqs, g.hq, q_pitch)
        q, gate = heads[..., :pd], heads[..., pd:]
        k = row[:, q_width:q_width + g.hkv * pd].reshape(num_seqs, g.hkv, pd)
        v = row[:, q_width + g.hkv * pd:].reshape(num_seqs, g.hkv, pd)
        if normed:
            q = head_norm(q, bf16_bits_to_f32(x["q_norm_w"]).astype(np.float64), gated)
            k = head_norm(k, bf16_bits_to_f32(x["k_norm_w"]).astype(np.float64), gated)
        table = x["cos_sin"][x["positions"]].astype(np.float64)
        cos, sin = rb(table[:, None, :rot // 2]), rb(table[:, None, rot // 2:])
        # stored as bf16, a padded head's rows zero past its proj_dim elements
        q, k, v = (pad_heads(a, d) for a in (rb(rotate(q, cos, sin)), rb(rotate(k, cos, sin)),
                                             v))
        kc = bf16_bits_to_f32(x["k_cache"]).astype(np.float64)
        vc = bf16_bits_to_f32(x["v_cache"]).astype(np.float64)
        out = np.empty((num_seqs, g.hq, d))
        for b, n in enumerate(kv_lens):
            blk, off = tables[b, (n - 1) // g.block_size], (n - 1) % g.block_size
            if slots[b] >= 0:  # padding writes nothing and attends over the cache as it is
                kc[blk, :, off], vc[blk, :, off] = k[b], v[b]
            seen = range(max(0, n - window) if window else 0, n)
            keys = np.stack([kc[tables[b, p // g.block_size], :, p % g.block_size]
                             for p in seen])              # [keys seen, hkv, D]
            vals = np.stack([vc[tables[b, p // g.block_size], :, p % g.block_size]
                             for p in seen])
            for h in range(g.hq):
                kvh = h // (g.hq // g.hkv)
                s = keys[:, kvh] @ q[b, h] * g.scale
                e = np.exp(s - s.max())
                total = e.sum()
                if sinks:
                    total += np.exp(float(bf16_bits_to_f32(x["sinks"][h])) - s.max())
                out[b, h] = e @ vals[:, kvh] / total
        if gated:  # transformers' bf16 ops: bf16(bf16(o) * bf16(sigmoid(gate)))
            out = rb(rb(out) * rb(1.0 / (1.0 + np.exp(-gate))))
        return {"out": out[..., :pd], "k_cache": kc, "v_cache": vc,
                "counters": np.zeros((num_seqs, 2 * g.hq))}

    cache_shape = inputs["k_cache"].shape
    owned = ~np.isnan(bf16_bits_to_f32(inputs["k_cache"]))
    outputs = {"out": OutputSpec(DType.BF16, (num_seqs, g.hq, pd), ATTN_TOL),
               "k_cache": OutputSpec(DType.BF16, cache_shape),
               "v_cache": OutputSpec(DType.BF16, cache_shape, tol=(0.0, 0.0)),
               "counters": OutputSpec(DType.I32, (num_seqs, 2 * g.hq))}
    module = ("attention_long" if long else
              "attention_twins" if traced or twin else "attention")
    return KernelCase(name, module, inputs, outputs, run, oracle,
                      {"k_cache": owned, "v_cache": owned}, graph=graph)


@kernel_cases("attention")
def decode_rope_cases(rng: np.random.Generator) -> list[KernelCase]:
    qwen3_06b, qwen3_8b = Geometry(16, 8, 128, 16), Geometry(32, 8, 128, 16)
    return [
        # Qwen3-0.6B at batch 1: context 512 on 33 splits (16 active), and a first token
        decode_rope_case(rng, "decode_rope D128 gqa2 ctx512 splits33", qwen3_06b, [512], 33,
                         graph=True),
        decode_rope_case(rng, "decode_rope D128 gqa2 ctx1 splits33", qwen3_06b, [1], 33),
        # the step's key in a second load round of a long split, a 1-split sequence, and a
        # padding row (slot -1); Qwen3-8B's group of 4
        decode_rope_case(rng, "decode_rope D128 gqa4 splits2 pad", qwen3_8b, [300, 20, 45], 2,
                         pad_last=True),
        # no q/k norm (Llama), D 64, group of 3; the key at a block boundary (kv_len 33)
        decode_rope_case(rng, "decode_rope D64 gqa3 no-norm", Geometry(9, 3, 64, 16),
                         [33, 64, 97], 4, normed=False),
        # groups above 4 heads (2 head-slice blocks, only the first appends k/v), D 256, odd
        # block size
        decode_rope_case(rng, "decode_rope D256 gqa8 bs7", Geometry(16, 2, 256, 7), [70, 5], 3),
        # 4 slices of 4 heads; Qwen3-30B-A3B's group of 8 at context 512 with a padding row
        decode_rope_case(rng, "decode_rope D128 gqa16", Geometry(32, 2, 128, 16), [130], 8),
        decode_rope_case(rng, "decode_rope D128 gqa8 ctx512 pad (qwen3-30b-a3b)",
                         Geometry(32, 4, 128, 16), [512, 9], 33, pad_last=True, graph=True),
        # a group of 6: slices of 4 and 2 heads
        decode_rope_case(rng, "decode_rope D128 gqa6", Geometry(12, 2, 128, 16), [77], 4),
        # the clustered kernel past one cluster: 1,500 keys are 24 splits of 64 in 3
        # clusters (the step's key in the last block of the last), 700 keys 11 splits in 2
        # (the second with 3 keyed blocks); in a graph, which replays the tickets
        decode_rope_case(rng, "decode_rope D128 gqa4 splits33 clusters", qwen3_8b, [1500, 700],
                         33, graph=True),
        # the phase-traced twins (tools/gpu/trace_decode_attn.py), clustered and not
        *([decode_rope_case(rng, "decode_rope D128 gqa4 splits33 clusters traced", qwen3_8b,
                            [1500, 700, 1], 33, traced=True),
           decode_rope_case(rng, "decode_rope D256 gqa8 splits2 pad traced",
                            Geometry(16, 2, 256, 16), [300, 45], 2, pad_last=True,
                            traced=True)]
          if traced_twins_apply() else []),
        # the batch-64 regime: one split of 1,536 keys (48 rounds; the step's key in the
        # last) with the loop's L2 prefetch and on its one-round twin, in a graph
        decode_rope_case(rng, "decode_rope D128 gqa4 splits1 rounds48", qwen3_8b,
                         [1536, 90, 1], 1, graph=True),
        decode_rope_case(rng, "decode_rope D128 gqa4 splits1 rounds48 ahead1", qwen3_8b,
                         [1536, 90, 1], 1, twin="ahead1"),
        # the clustered kernel split-major: Qwen3-30B-A3B's 64-split grid at 512 keys and
        # two sequences past one cluster, in a graph
        decode_rope_case(rng, "decode_rope D128 gqa8 ctx512 split_major",
                         Geometry(32, 4, 128, 16), [512, 9], 64, twin="split_major",
                         graph=True),
        decode_rope_case(rng, "decode_rope D128 gqa4 splits33 clusters split_major", qwen3_8b,
                         [1500, 700], 33, twin="split_major"),
        # the clustered kernel's push merge at D 64 (no norm; a shortest split is one round,
        # 600 keys are splits of 75) and at D 256 (its 64-key splits run the loop)
        decode_rope_case(rng, "decode_rope D64 gqa3 splits8 cluster", Geometry(9, 3, 64, 16),
                         [100, 600, 1], 8, normed=False),
        decode_rope_case(rng, "decode_rope D256 gqa8 splits16 cluster",
                         Geometry(16, 2, 256, 16), [300, 700, 40], 16),
        # the session-7 pull merge (ATLAS_DECODE_ATTN_B1_CHAIN=0): past one cluster, one
        # cluster, the first token
        decode_rope_case(rng, "decode_rope D128 gqa4 splits33 clusters pull", qwen3_8b,
                         [1500, 700, 512, 1], 33, twin="pull"),
    ]
