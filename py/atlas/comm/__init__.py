"""Collectives between the ranks of a tensor- or expert-parallel group.

`CommBackend` is the one interface (all-reduce, all-gather, reduce-scatter, all-to-all with
counts, broadcast, barrier) that model code calls; three implementations stand behind it:
`SingleComm` (one rank: every collective is the identity), `HostComm` (processes on the
CPU exchanging bytes over TCP, so every parallel path runs in CI on the host GPU backend)
and `NcclComm` (the NCCL library, on the engine's CUDA streams, capturable in graphs).
`connect_world` performs the TCP rendezvous and builds the backend a worker asked for.
"""

from .backend import CommBackend, CommError, ReduceOp
from .host import HostComm
from .single import SingleComm
from .world import WorldSpec, connect_world

__all__ = ["CommBackend", "CommError", "ReduceOp", "HostComm", "SingleComm", "WorldSpec",
           "connect_world"]
