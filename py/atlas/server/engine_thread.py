"""The engine core on its own thread: `EngineCore.step`, forever.

The asyncio loop never blocks on the model and the model never waits for the event loop.
Requests and aborts arrive through a command queue drained between steps; outputs of a step
leave in one batch through `on_outputs` (the async bridge hops them onto the loop). All the
scheduling lives in `atlas.engine`; this module only feeds it and keeps it alive.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable

import structlog

from ..engine.core import EngineCore
from ..engine.request import EngineOutput, EngineRequest, FinishReason
from .metrics import ServerMetrics

OutputSink = Callable[[list[EngineOutput]], None]

_log = structlog.get_logger("atlas.engine")


class EngineThread:
    def __init__(self, core: EngineCore, on_outputs: OutputSink,
                 metrics: ServerMetrics | None = None) -> None:
        self.core = core
        self._on_outputs = on_outputs
        self._metrics = metrics
        self._commands: queue.SimpleQueue[tuple] = queue.SimpleQueue()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="atlas-engine", daemon=True)
        if metrics is not None:  # the counters exist (at zero) before the first step
            metrics.record_engine_counters(core.counters())

    # --- called from any thread ------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping = True
        self._commands.put(("wake",))
        self._thread.join(timeout)

    def submit(self, seq_id: int, request: EngineRequest) -> None:
        self._commands.put(("add", seq_id, request, self.core.clock()))

    def abort(self, seq_id: int, reason: str = FinishReason.ABORT) -> None:
        self._commands.put(("abort", seq_id, reason))

    # --- the engine thread -----------------------------------------------------------------

    def _run(self) -> None:
        # the CUDA backend makes its context current on a thread's first driver call, so
        # the executor needs no binding step here
        while not self._stopping:
            try:
                outputs = self._drain_commands(block=not self.core.has_work)
                if self.core.has_work:
                    outputs.extend(self._step())
            except Exception:  # a bug here must not leave every client waiting forever
                _log.exception("engine loop failed; ending every request")
                outputs = self.core.fail_all()
            if outputs:
                self._on_outputs(outputs)

    def _drain_commands(self, block: bool) -> list[EngineOutput]:
        outputs: list[EngineOutput] = []
        try:
            command = self._commands.get(timeout=0.5) if block else self._commands.get_nowait()
        except queue.Empty:
            return outputs
        while True:
            kind = command[0]
            if kind == "add":
                _, seq_id, request, when = command
                try:
                    self.core.add(seq_id, request, when)
                except ValueError as exc:
                    _log.warning("request rejected by scheduler", seq_id=seq_id, error=str(exc))
                    outputs.append(EngineOutput(seq_id, (), FinishReason.ERROR,
                                                len(request.prompt_ids), 0))
            elif kind == "abort":
                out = self.core.abort(command[1], command[2])
                if out is not None:
                    outputs.append(out)
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return outputs

    def _step(self) -> list[EngineOutput]:
        start = time.perf_counter()
        report = self.core.step()
        if report.error is not None:  # the model failed: that batch ended, keep serving
            _log.error("engine step failed", batch=report.num_chunks, exc_info=report.error)
            return report.outputs
        if not report.made_progress:
            time.sleep(0.001)  # everything waits on blocks held by nobody running
            return report.outputs
        if report.num_chunks == 0:
            return report.outputs
        if self._metrics is not None:
            scheduler = self.core.scheduler
            self._metrics.record_step(
                generated=report.num_generated, seconds=time.perf_counter() - start,
                kv_utilization=scheduler.kv_utilization, running=len(scheduler.running),
                waiting=len(scheduler.waiting), preemptions=scheduler.num_preemptions,
                state_slots=self.core.executor.state_slot_usage())
            self._metrics.record_engine_counters(self.core.counters())
        return report.outputs
