"""Launch and watch tensor- and expert-parallel worker processes for `atlas serve` /
`atlas generate`.

`--tensor-parallel-size N` (a dense model: heads, MLP and vocabulary split) or
`--expert-parallel-size N` (a mixture of experts: the experts split, the rest replicated) on
one host: this process is rank 0 (it runs the engine and its own shard) and spawns ranks
1..N-1 (multiprocessing spawn: CUDA cannot survive a fork; rank r uses CUDA device r).
`--rank R --world-size W --master-addr A --master-port P` runs one rank of a group spread
over hosts: rank 0 serves, every other rank only works, and each
process uses CUDA device 0 of what CUDA_VISIBLE_DEVICES shows it.
A worker that exits early is reported by a `WorkerWatch` with its rank and exit code, so
the server shuts down with that message instead of waiting on a dead peer.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import multiprocessing.connection
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import click

if TYPE_CHECKING:  # imported lazily: `atlas ... --help` must not load numpy
    from atlas.comm import WorldSpec

_log = logging.getLogger("atlas.tp")


@dataclass(frozen=True)
class ParallelOptions:
    """The CLI's parallel flags, checked once."""

    tensor_parallel_size: int = 1
    rank: int | None = None
    world_size: int | None = None
    master_addr: str = "127.0.0.1"
    master_port: int = 29511
    expert_parallel_size: int = 1

    @property
    def expert_parallel(self) -> bool:
        """The group splits experts (and replicates the rest) rather than heads and MLPs."""
        return self.expert_parallel_size > 1

    @property
    def local_size(self) -> int:
        """Ranks of the single-host form (this process and the workers it spawns)."""
        return max(self.tensor_parallel_size, self.expert_parallel_size)

    @property
    def tensor_parallel(self) -> bool:
        """The group splits heads, MLPs and vocabulary (also with experts sharded)."""
        return self.tensor_parallel_size > 1 or not self.expert_parallel

    @property
    def label(self) -> str:
        if self.expert_parallel:
            return ("tensor+expert-parallel" if self.tensor_parallel_size > 1
                    else "expert-parallel")
        return "tensor-parallel"

    def world(self) -> WorldSpec:
        """This process's place in the group."""
        from atlas.comm import WorldSpec
        if self.world_size is None:
            return WorldSpec(0, self.local_size, self.master_addr, self.master_port)
        # several hosts: each process sees its GPU as device 0 (CUDA_VISIBLE_DEVICES)
        return WorldSpec(self.rank or 0, self.world_size, self.master_addr, self.master_port,
                         device=0)

    @property
    def local_workers(self) -> list[int]:
        """Ranks this process spawns (only the single-host form spawns)."""
        return list(range(1, self.local_size)) if self.world_size is None else []

    @classmethod
    def from_cli(cls, p: dict[str, Any]) -> "ParallelOptions":
        tp, rank, world = p["tensor_parallel_size"], p["rank"], p["world_size"]
        ep = p["expert_parallel_size"]
        if tp > 1 and ep > 1 and tp != ep:
            raise click.UsageError("--tensor-parallel-size and --expert-parallel-size split "
                                   "over the same ranks: give them the same size")
        if (rank is None) != (world is None):
            raise click.UsageError("--rank and --world-size go together")
        if world is not None:
            for flag, size in (("--tensor-parallel-size", tp), ("--expert-parallel-size", ep)):
                if size != 1 and size != world:
                    raise click.UsageError(f"{flag} and --world-size disagree")
            if not 0 <= rank < world:
                raise click.UsageError(f"--rank {rank} outside --world-size {world}")
        return cls(tp, rank, world, p["master_addr"], p["master_port"], ep)

    def load_kwargs(self) -> dict[str, Any]:
        """What every rank passes to load_runner for the group's kind of split."""
        return {"expert_parallel": self.expert_parallel,
                "tensor_parallel": self.tensor_parallel}


def parallel_flags(fn: Callable) -> Callable:
    """The click options every command that loads a model for serving shares."""
    for opt in reversed([
        click.option("--tensor-parallel-size", type=click.IntRange(1), default=1,
                     show_default=True, help="Ranks on this host (one per GPU) splitting a "
                     "dense model's heads, MLPs and vocabulary."),
        click.option("--expert-parallel-size", type=click.IntRange(1), default=1,
                     show_default=True, help="Ranks on this host (one per GPU) splitting a "
                     "mixture-of-experts model's experts (the rest replicated)."),
        click.option("--rank", type=click.IntRange(0), default=None,
                     help="This process's rank in a multi-host group."),
        click.option("--world-size", type=click.IntRange(1), default=None,
                     help="Ranks in a multi-host group."),
        click.option("--master-addr", default="127.0.0.1", show_default=True,
                     help="Rank 0's address for the rendezvous."),
        click.option("--master-port", type=click.IntRange(1, 65535), default=29511,
                     show_default=True, help="Rank 0's rendezvous port.")]):
        fn = opt(fn)
    return fn


def run_worker(model_dir: Path, world: WorldSpec, load_kwargs: dict[str, Any]) -> None:
    """A worker rank: load its shard (joining the group), then replay rank 0's steps."""
    from atlas.model.load import load_runner
    from atlas.model.parallel_executor import serve_worker
    runner = load_runner(model_dir, world=world, **load_kwargs)
    serve_worker(runner)


@dataclass
class WorkerWatch:
    """Spawned workers and a thread that calls `on_death(message)` if one exits while the
    group is live."""

    procs: dict[int, mp.process.BaseProcess]
    on_death: Callable[[str], None] = lambda _msg: None
    #: how the log line names the group ("tensor-parallel", "expert-parallel")
    label: str = "tensor-parallel"
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @classmethod
    def spawn(cls, model_dir: Path, opts: ParallelOptions,
              load_kwargs: dict[str, Any]) -> "WorkerWatch":
        from atlas.comm import WorldSpec
        from atlas.core.config import ModelConfig
        from atlas.model.expert_parallel import check_expert_parallel
        from atlas.model.loaders.dense import UnsupportedModelError
        from atlas.model.parallel import check_tensor_parallel
        if opts.local_workers:  # refuse a split the model cannot take before any spawn
            try:
                cfg = ModelConfig.from_hf(model_dir)
                check_tensor_parallel(cfg, opts.tensor_parallel_size,
                                      experts_sharded=opts.expert_parallel)
                check_expert_parallel(cfg, opts.expert_parallel_size)
            except UnsupportedModelError as exc:
                raise click.ClickException(str(exc)) from None
        ctx = mp.get_context("spawn")
        procs: dict[int, mp.process.BaseProcess] = {}
        for rank in opts.local_workers:
            world = WorldSpec(rank, opts.local_size, opts.master_addr, opts.master_port)
            proc = ctx.Process(target=run_worker, args=(model_dir, world, load_kwargs),
                               name=f"atlas-tp-rank{rank}", daemon=True)
            proc.start()
            procs[rank] = proc
        return cls(procs, label=opts.label)

    def watch(self, on_death: Callable[[str], None]) -> None:
        """Start reporting deaths (after the group formed: a load failure surfaces on rank 0
        as the rendezvous or a collective failing)."""
        self.on_death = on_death
        self._thread = threading.Thread(target=self._run, name="atlas-tp-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sentinels = {p.sentinel: rank for rank, p in self.procs.items()}
        if not sentinels:
            return
        ready = multiprocessing.connection.wait(list(sentinels))
        if self._stopping.is_set():
            return
        rank = sentinels[ready[0]]  # type: ignore[index]
        self.on_death(self._death_message(rank, 5.0))

    def _death_message(self, rank: int, grace_s: float) -> str:
        """The exit message of a worker whose sentinel fired, its exit code waited for up to
        `grace_s`: the watch thread and `death_report` may both reap it, and the one whose
        waitpid loses the race returns before the other has recorded the code."""
        proc = self.procs[rank]
        deadline = time.monotonic() + grace_s
        while proc.exitcode is None and time.monotonic() < deadline:
            proc.join(0.05)
            if proc.exitcode is None:
                time.sleep(0.01)  # the other thread's waitpid owns the status
        return (f"{self.label} worker rank {rank} (pid {proc.pid}) exited with code "
                f"{proc.exitcode}; shutting down")

    def death_report(self, grace_s: float = 1.0) -> str | None:
        """The first worker that exited, as the watch reports it (None: all alive). After
        the group failed, the process that broke it may be exiting still: wait `grace_s`
        for it, so the final error names the dead rank rather than the broken socket."""
        if not self.procs:
            return None
        ready = multiprocessing.connection.wait([p.sentinel for p in self.procs.values()],
                                                grace_s)
        for rank, proc in self.procs.items():
            if proc.sentinel in ready:
                return self._death_message(rank, grace_s)
        return None

    def stop(self, timeout: float = 10.0) -> None:
        """Wait for workers told to stop; terminate any that do not exit. Then wait for the
        watch thread: once every worker is gone it returns, after reporting a death it had
        already seen, so its log line comes before the caller's final error, not after it."""
        self._stopping.set()
        for proc in self.procs.values():
            proc.join(timeout)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout)
        if self._thread is not None:
            self._thread.join(timeout)
