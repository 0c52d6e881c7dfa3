"""The asyncio face of the engine thread: `async for out in engine.generate(request)`.

Outputs cross from the engine thread with one `call_soon_threadsafe` per step and are
routed to a per-request queue. Leaving the iteration early (client disconnect, a stop
string, a cancelled task) aborts the sequence, which frees its KV blocks.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import AsyncIterator, Callable

from ..engine.request import EngineOutput, EngineRequest
from ..engine.scheduler import Scheduler
from .engine_thread import EngineThread, OutputSink


class AsyncEngine:
    def __init__(self, engine_factory: Callable[[OutputSink], EngineThread],
                 loop: asyncio.AbstractEventLoop) -> None:
        """`engine_factory(on_outputs)` builds the EngineThread around our output sink."""
        self._loop = loop
        self._queues: dict[int, asyncio.Queue[EngineOutput]] = {}
        self._ids = itertools.count(1)
        self.thread: EngineThread = engine_factory(self._from_thread)

    @property
    def scheduler(self) -> Scheduler:
        return self.thread.core.scheduler

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.thread.stop()

    async def generate(self, request: EngineRequest) -> AsyncIterator[EngineOutput]:
        seq_id = next(self._ids)
        outputs: asyncio.Queue[EngineOutput] = asyncio.Queue()
        self._queues[seq_id] = outputs
        finished = False
        try:
            self.thread.submit(seq_id, request)
            while not finished:
                out = await outputs.get()
                finished = out.finish_reason is not None
                yield out
        finally:
            self._queues.pop(seq_id, None)
            if not finished:
                self.thread.abort(seq_id)

    def _from_thread(self, outputs: list[EngineOutput]) -> None:
        try:
            self._loop.call_soon_threadsafe(self._route, outputs)
        except RuntimeError:
            pass  # the loop closed during shutdown: nobody is waiting for these outputs

    def _route(self, outputs: list[EngineOutput]) -> None:
        for out in outputs:
            target = self._queues.get(out.seq_id)
            if target is not None:
                target.put_nowait(out)
