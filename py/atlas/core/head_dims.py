"""The attention head dims the kernels serve: compiled ones, and those computed padded.

Here, below the runtime, because the decode-traffic model (bench/decode_bytes.py) counts the
cache rows the kernels read as well as the ops that size them (runtime/ops/attention.py).
"""

from __future__ import annotations

#: head dimensions the kernels are compiled for
HEAD_DIMS = (64, 128, 256)
#: head dimensions served padded to D = 128 (`padded_head_dim`): multiples of 16 between the
#: compiled 64 and 128
PADDED_HEAD_DIMS = (80, 96, 112)
#: head dimensions the prefill kernel takes attention sinks at (attention.cu: its sink
#: instantiations; gpt-oss's heads are 64)
SINK_HEAD_DIMS = (64, 128)


def padded_head_dim(head_dim: int) -> int:
    """The head dim the attention kernels compute a model's heads of `head_dim` at: itself
    where compiled (HEAD_DIMS), 128 for PADDED_HEAD_DIMS: their cache rows and rotated q rows
    hold the head's elements, then zeros (a zero adds nothing to q . k, and V's zeros make
    output elements that are never written), which costs the padding's share of K/V bytes
    (33% at 96) but no kernel of its own. Raises for any other."""
    if head_dim in HEAD_DIMS:
        return head_dim
    if head_dim in PADDED_HEAD_DIMS:
        return 128
    raise ValueError(f"attention: head_dim={head_dim} unsupported (compiled: {HEAD_DIMS}; "
                     f"padded to 128: {PADDED_HEAD_DIMS})")
