"""Stream-capture bookkeeping shared by the backends that record graphs in Python.

HostBackend and MockGpuBackend both capture by collecting what a stream issues between
begin and end; this is that collection, with CUDA's rules for misuse (no nested capture on a
stream, no end without a begin).
"""

from __future__ import annotations

from typing import Generic, TypeVar

from .gpu import GpuError, Stream

T = TypeVar("T")


class StreamCaptures(dict[Stream, list[T]], Generic[T]):
    """stream -> the items recorded on it since `begin`; empty when nothing is captured."""

    def begin(self, stream: Stream) -> None:
        if stream in self:
            raise GpuError(f"stream {stream} is already being captured")
        self[stream] = []

    def end(self, stream: Stream) -> list[T]:
        items = self.pop(stream, None)
        if items is None:
            raise GpuError(f"end_capture on stream {stream}, which is not being captured")
        return items
