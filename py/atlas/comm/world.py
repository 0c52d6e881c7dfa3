"""Who a worker is in its group, and the rendezvous that turns that into a `CommBackend`.

`atlas serve --tensor-parallel-size N` gives each worker process its `WorldSpec`; the same
fields (`--rank`, `--world-size`, `--master-addr`, `--master-port`) let workers on several
hosts form one group.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..runtime.gpu import GpuBackend
from .backend import CommBackend
from .host import HostComm
from .single import SingleComm
from .transport import Star


@dataclass(frozen=True, slots=True)
class WorldSpec:
    rank: int = 0
    world_size: int = 1
    master_addr: str = "127.0.0.1"
    master_port: int = 29511
    timeout_s: float = 120.0
    #: how long rank 0 waits for a peer's part of one host exchange (a step's command, a
    #: host collective) before the group fails: a hung worker, not a dead one
    op_timeout_s: float = 600.0
    #: CUDA device ordinal of this rank; -1: the rank (one host, one GPU per rank). A group
    #: over several hosts pins each process's GPU with CUDA_VISIBLE_DEVICES and uses 0.
    device: int = -1

    @property
    def cuda_device(self) -> int:
        return self.rank if self.device < 0 else self.device

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} outside a world of {self.world_size}")


#: bf16 all-reduces up to this many bytes take the one-shot peer-memory kernel instead of
#: NCCL on the CUDA backend (0, the default: never, until bench_tp.py allreduce shows where
#: it wins); every rank of a group must set the same value
ONESHOT_ENV = "ATLAS_ONESHOT_ALLREDUCE_BYTES"
#: "host": the host collectives on any backend, CUDA included (a checking aid: ranks that
#: share one GPU, which NCCL refuses; not capturable, so such ranks decode eagerly)
TRANSPORT_ENV = "ATLAS_COMM"


def connect_world(spec: WorldSpec, gpu: GpuBackend) -> CommBackend:
    """The group's backend for this rank: NCCL on the CUDA backend, the host collectives on
    any other (or everywhere, with ATLAS_COMM=host); a world of one needs no rendezvous."""
    if spec.world_size == 1:
        return SingleComm(gpu)
    star = Star.connect(spec.rank, spec.world_size, spec.master_addr, spec.master_port,
                        spec.timeout_s, spec.op_timeout_s)
    if gpu.name == "cuda" and os.environ.get(TRANSPORT_ENV, "nccl") != "host":
        from .nccl import NcclComm
        oneshot = None
        limit = int(os.environ.get(ONESHOT_ENV, "0"))
        if limit > 0:
            from .oneshot import OneShotAllReduce
            oneshot = OneShotAllReduce(gpu, star, max(8, limit // 2 // 8 * 8))
        return NcclComm(star, oneshot=oneshot)
    return HostComm(gpu, star)
