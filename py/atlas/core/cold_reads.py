"""Timing memory-bound kernels cold: a kernel timed back to back on one buffer reads it from
L2 once it fits there (60 MiB on an H200), where a decode step reads every weight from DRAM
(the rest of the step's bytes pass in between). Timers therefore cycle through copies of
their input. Shared by the decode GEMM tuner (runtime) and the benchmarks (bench)."""

from __future__ import annotations


def rotation_copies(set_bytes: int, rotate_bytes: int, max_copies: int) -> int:
    """Input sets to cycle through so that `rotate_bytes` pass between two uses of one set
    (past the L2 cache), but never more than `max_copies`."""
    if set_bytes <= 0 or rotate_bytes <= 0 or max_copies < 1:
        raise ValueError(f"need positive sizes, got set={set_bytes} rotate={rotate_bytes} "
                         f"max={max_copies}")
    return max(1, min(max_copies, -(-rotate_bytes // set_bytes)))
