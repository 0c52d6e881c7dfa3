"""Launch builder for a captured decode step's own input copy (step_io.cu).

A decode graph that stages its inputs and publishes its sampled ids itself (the sampler's
finishing blocks: ops/sampling.sample's `publish`) leaves nothing on the stream between two
steps' graphs (the three copies they replace cost ~20 us a step in engine hand-offs: gpu133).
The source of the stage and the target of the publish are the host's page-locked buffers,
mapped into the device's address space.
"""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import STEP_STAGE_INPUTS
from . import KernelCache

#: step_io.cu kStageThreads: the stage is one block
STAGE_THREADS = 1024


def available(kc: KernelCache) -> bool:
    """Whether the backend's loaded kernels include step_io."""
    return STEP_STAGE_INPUTS.module in kc.backend.module_names


def stage_inputs(kc: KernelCache, stream: Stream, src: DevicePtr, dst: DevicePtr, tokens: int,
                 tok_stride: int, tail_at: int, tail_words: int, sampled: DevicePtr,
                 ack: DevicePtr, seq_word: int) -> None:
    """Copy a step's int32 inputs from `src` to `dst`: the three token spans (ids, positions,
    KV slots: `tokens` words each, `tok_stride` apart) and the tail [tail_at, + tail_words);
    a negative id -1 - r is replaced by sampled[r] (a carried token). Then ack[0] =
    src[seq_word], a word of the tail: the host may rewrite src."""
    if tokens > tok_stride or tail_at < 3 * tok_stride:
        raise ValueError(f"stage_inputs: {tokens} tokens a span of {tok_stride}, tail at "
                         f"{tail_at}: the spans overlap")
    if not tail_at <= seq_word < tail_at + tail_words:
        raise ValueError(f"stage_inputs: the step number's word {seq_word} is not staged")
    kc.get(STEP_STAGE_INPUTS)(stream, 1, STAGE_THREADS, 0, src, dst, tokens, tok_stride,
                              tail_at, tail_words, sampled, ack, seq_word)

