"""Check cases for the Hopper wgmma prefill attention (module attention_sm90, head_dim 128).

cases/attention.prefill_case (scrambled paged cache with NaN in every unowned slot, the
float64 causal oracle) forced onto the wgmma kernel: first and chunked prefill, a 1-query
chunk, query tiles that end inside a 64-row wgmma tile and chunks spanning several of them,
histories ending inside a 64-key tile and spanning many, block sizes 7 and 16 (pages that
straddle the key tiles), MHA and GQA 2, 4 and 8.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..gpu import DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, kernel_cases
from ..ops import KernelCache, attention
from .attention import Geometry, prefill_case


def sm90_prefill_case(rng: np.random.Generator, name: str, g: Geometry, q_lens: list[int],
                      kv_lens: list[int]) -> KernelCase:
    """cases/attention.prefill_case launched with `sm90=True`."""
    case = prefill_case(rng, name, g, q_lens, kv_lens)
    num_seqs, max_blocks = len(q_lens), case.inputs["block_tables"].shape[1]

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        attention.prefill_attention(
            KernelCache(backend), stream, p["q"], p["k_cache"], p["v_cache"],
            p["block_tables"], p["cu_q"], p["kv_lens"], p["out"], num_seqs, g.hq, g.hkv,
            g.head_dim, g.block_size, max_blocks, g.scale, max(q_lens), sm90=True)

    return dataclasses.replace(case, module="attention_sm90", run=run)


#: (name, geometry, q_lens, kv_lens)
SM90_PREFILL_SHAPES = [
    ("prefill sm90 gqa4 bs16 mixed", Geometry(8, 2, 128, 16), [5, 70, 1], [5, 100, 37]),
    ("prefill sm90 mha bs7 three tiles", Geometry(4, 4, 128, 7), [130], [130]),
    ("prefill sm90 qwen3-8b heads", Geometry(32, 8, 128, 16), [96], [96]),
    ("prefill sm90 gqa2 bs16 deep history", Geometry(4, 2, 128, 16), [64, 9], [1000, 700]),
    ("prefill sm90 gqa8 bs16 two seqs", Geometry(16, 2, 128, 16), [100, 3], [300, 3]),
]


@kernel_cases("attention_sm90")
def sm90_prefill_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [sm90_prefill_case(rng, *shape) for shape in SM90_PREFILL_SHAPES]
