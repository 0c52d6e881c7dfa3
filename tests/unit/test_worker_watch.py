"""atlas_cli.tp_launch.WorkerWatch: a dead worker's exit code in the message whichever of the
watch thread and `death_report` reaps it (both wait on the same process; the one whose
waitpid loses the race used to report `exited with code None`)."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading

from atlas_cli.tp_launch import WorkerWatch


def _exit_with(code: int) -> None:
    os._exit(code)


def test_both_reporters_name_the_exit_code() -> None:
    ctx = mp.get_context("fork")
    for attempt in range(6):
        proc = ctx.Process(target=_exit_with, args=(3,), daemon=True)
        proc.start()
        seen: list[str] = []
        done = threading.Event()
        watch = WorkerWatch({1: proc}, label="tensor-parallel")
        watch.watch(lambda msg: (seen.append(msg), done.set()))
        report = watch.death_report(grace_s=5.0)
        assert done.wait(10.0), attempt
        for msg in (report, seen[0]):
            assert msg == (f"tensor-parallel worker rank 1 (pid {proc.pid}) exited with "
                           "code 3; shutting down"), (attempt, msg)


def test_no_report_while_every_worker_lives() -> None:
    ctx = mp.get_context("fork")
    stop = ctx.Event()
    proc = ctx.Process(target=stop.wait, daemon=True)
    proc.start()
    try:
        assert WorkerWatch({1: proc}).death_report(grace_s=0.1) is None
    finally:
        stop.set()
        proc.join(5.0)


def test_stop_returns_after_a_death_report_in_flight() -> None:
    """A death the watch thread saw before `stop` is reported (its log line written) by the
    time `stop` returns, so the caller's final error line comes last (a served group whose
    worker was killed printed the watch's log line after `Error: ...` now and then)."""
    ctx = mp.get_context("fork")
    proc = ctx.Process(target=_exit_with, args=(9,), daemon=True)
    proc.start()
    entered, seen = threading.Event(), []

    def slow_report(msg: str) -> None:
        entered.set()
        threading.Event().wait(0.5)  # the log call still running when stop() starts
        seen.append(msg)

    watch = WorkerWatch({1: proc}, label="expert-parallel")
    watch.watch(slow_report)
    assert entered.wait(10.0)
    watch.stop(timeout=5.0)
    assert seen == [f"expert-parallel worker rank 1 (pid {proc.pid}) exited with code 9; "
                    "shutting down"]
