"""The tensor-parallel `StepExecutor`: one engine core drives every rank.

Rank 0 (the server or `atlas generate` process) wraps its own `ModelRunner` in a
`TensorParallelExecutor`: each `execute`/`release` is first broadcast to the worker ranks,
then run locally. Every rank runs the same forward on its shard, the collectives inside it
keep them in lockstep, and every rank samples the same ids from the same all-gathered
logits, so rank 0's tokens are the answer and nothing flows back. A worker runs
`serve_worker` until rank 0 says stop; a worker that dies closes its socket, and rank 0's
next collective raises `CommError` naming it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

from ..comm import CommBackend, CommError
from .batch import SeqChunk
from .runner import ModelRunner


_EXECUTE, _RELEASE, _STOP = "execute", "release", "stop"


def runner_comm(runner: ModelRunner) -> CommBackend:
    """The group a tensor- or expert-parallel runner was loaded into."""
    if runner.comm is None:
        raise ValueError("the runner was loaded without a parallel world")
    return runner.comm


class TensorParallelExecutor:
    """Rank 0's executor; every other attribute is its runner's (limits, info, cfg...).

    `on_failure(message)` is called once when the group breaks (a `CommError`: a peer went
    away, here or on another host), before the error propagates to the engine, so the
    server can shut down instead of serving from a group that can no longer step.
    """

    def __init__(self, runner: ModelRunner,
                 on_failure: Callable[[str], None] | None = None) -> None:
        self._runner = runner
        self._comm = runner_comm(runner)
        self._closed = False
        self.on_failure = on_failure
        self.failed: str | None = None
        if self._comm.rank != 0:
            raise ValueError(f"rank {self._comm.rank} is a worker; only rank 0 drives steps")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    @property
    def world_size(self) -> int:
        return self._comm.world_size

    def execute(self, chunks: Sequence[SeqChunk]) -> list[int | None]:
        with self._group_call():
            self._comm.broadcast_object((_EXECUTE, list(chunks)))
            return self._runner.execute(chunks)

    def release(self, seq_id: int) -> None:
        if self.failed is not None:  # the engine ends the failed batch's sequences: there
            self._runner.release(seq_id)  # is no group left to tell, only local state
            return
        with self._group_call():
            self._comm.broadcast_object((_RELEASE, seq_id))
            self._runner.release(seq_id)

    def close(self) -> None:
        """Tell the workers to exit (unless the group already broke) and drop the
        transport; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.failed is None:
                self._comm.broadcast_object((_STOP, None))
        finally:
            self._comm.close()

    @contextlib.contextmanager
    def _group_call(self) -> Iterator[None]:
        if self.failed is not None:
            raise CommError(self.failed)
        try:
            yield
        except CommError as exc:
            self.failed = f"parallel group failed: {exc}"
            if self.on_failure is not None:
                self.on_failure(self.failed)
            raise


def serve_worker(runner: ModelRunner) -> None:
    """A worker rank's loop: replay rank 0's calls until it says stop (or goes away, which
    raises CommError out of here and ends the process)."""
    comm = runner_comm(runner)
    try:
        while True:
            kind, arg = comm.broadcast_object()  # type: ignore[misc]
            if kind == _EXECUTE:
                runner.execute(arg)
            elif kind == _RELEASE:
                runner.release(arg)
            elif kind == _STOP:
                return
            else:
                raise ValueError(f"rank {comm.rank}: unknown command {kind!r} from rank 0")
    finally:
        comm.close()
