"""The engine loop on its own thread: schedule -> execute -> commit, forever.

The asyncio loop never blocks on the model and the model never waits for the event loop.
Requests and aborts arrive through a command queue drained between steps; outputs of a step
leave in one batch through `on_outputs` (the async bridge hops them onto the loop).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable

import structlog

from ..model.batch import StepExecutor
from .metrics import ServerMetrics
from .scheduler import FinishReason, Scheduler, SeqOutput, SeqRequest

OutputSink = Callable[[list[SeqOutput]], None]

_log = structlog.get_logger("atlas.engine")


class EngineThread:
    def __init__(self, scheduler: Scheduler, executor: StepExecutor, on_outputs: OutputSink,
                 metrics: ServerMetrics | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.scheduler = scheduler
        self.executor = executor
        self._on_outputs = on_outputs
        self._metrics = metrics
        self._clock = clock
        self._commands: queue.SimpleQueue[tuple] = queue.SimpleQueue()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="atlas-engine", daemon=True)

    # --- called from any thread ------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping = True
        self._commands.put(("wake",))
        self._thread.join(timeout)

    def submit(self, seq_id: int, request: SeqRequest) -> None:
        self._commands.put(("add", seq_id, request, self._clock()))

    def abort(self, seq_id: int, reason: str = FinishReason.ABORT) -> None:
        self._commands.put(("abort", seq_id, reason))

    # --- the engine thread -----------------------------------------------------------------

    def _run(self) -> None:
        # the CUDA backend makes its context current on a thread's first driver call, so
        # the executor needs no binding step here
        while not self._stopping:
            try:
                outputs = self._drain_commands(block=not self.scheduler.has_work)
                if self.scheduler.has_work:
                    outputs.extend(self._step())
                self._release()
            except Exception:  # a bug here must not leave every client waiting forever
                _log.exception("engine loop failed; ending every request")
                outputs = self.scheduler.fail_all()
                self._release()
            if outputs:
                self._on_outputs(outputs)

    def _drain_commands(self, block: bool) -> list[SeqOutput]:
        outputs: list[SeqOutput] = []
        try:
            command = self._commands.get(timeout=0.5) if block else self._commands.get_nowait()
        except queue.Empty:
            return outputs
        while True:
            kind = command[0]
            if kind == "add":
                _, seq_id, request, when = command
                try:
                    self.scheduler.add(seq_id, request, when)
                except ValueError as exc:
                    _log.warning("request rejected by scheduler", seq_id=seq_id, error=str(exc))
                    outputs.append(SeqOutput(seq_id, (), FinishReason.ERROR,
                                             len(request.prompt_ids), 0))
            elif kind == "abort":
                out = self.scheduler.abort(command[1], command[2])
                if out is not None:
                    outputs.append(out)
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return outputs

    def _step(self) -> list[SeqOutput]:
        start = self._clock()
        plan = self.scheduler.schedule(start)
        self._release()
        outputs = list(plan.finished)
        if plan.is_empty:
            if not outputs:
                time.sleep(0.001)  # everything waits on blocks held by nobody running
            return outputs
        try:
            sampled = self.executor.execute(plan.steps)
        except Exception:  # the model failed: end the batch, keep serving
            _log.exception("engine step failed", batch=len(plan.steps))
            outputs.extend(self.scheduler.fail_running())
            return outputs
        now = self._clock()
        produced = self.scheduler.commit(plan, sampled, now)
        outputs.extend(produced)
        if self._metrics is not None:
            self._metrics.record_step(
                generated=sum(len(o.new_token_ids) for o in produced), seconds=now - start,
                kv_utilization=self.scheduler.kv_utilization,
                running=len(self.scheduler.running), waiting=len(self.scheduler.waiting),
                preemptions=self.scheduler.num_preemptions)
        return outputs

    def _release(self) -> None:
        for seq_id in self.scheduler.take_released():
            self.executor.release(seq_id)
