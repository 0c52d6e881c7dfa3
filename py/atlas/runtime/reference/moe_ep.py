"""Reference for moe_ep_localize_i32 (kernels/*/common/moe_ep.cu).

In place over the first `width` columns of ids [rows, stride] (the routed top-k ids of an
expert-parallel rank holding experts [first, first + count)): an id in that range becomes its
local index (id - first), any other id becomes -1, which the expert kernels skip; the columns
past `width` (a shared expert's slots) are left as they are.
"""

from __future__ import annotations

import numpy as np

from ..gpu import Dim3
from ..kernel_abi import MOE_EP_LOCALIZE
from . import HostMemory, reference


@reference(MOE_EP_LOCALIZE)
def moe_ep_localize_i32(mem: HostMemory, grid: Dim3, block: Dim3, ids: int, rows: int,
                        stride: int, width: int, first: int, count: int) -> None:
    view = mem.view(ids, np.int32, rows * stride).reshape(rows, stride)[:, :width]
    local = view.astype(np.int64) - first
    view[:] = np.where((local >= 0) & (local < count), local, -1).astype(np.int32)
