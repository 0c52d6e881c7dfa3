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
