"""Every workload a suite file may name."""

from __future__ import annotations

from . import (workload_fixed, workload_prefix, workload_sweep, workload_throughput,
               workload_tool)
from .workload import Workload

WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    workload_fixed.WORKLOAD, workload_sweep.WORKLOAD, workload_prefix.WORKLOAD,
    workload_tool.WORKLOAD, workload_throughput.WORKLOAD)}
