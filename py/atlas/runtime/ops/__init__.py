"""Launch builders: one function per kernel, computing grid/block from the arguments.

`KernelCache` resolves each kernel once per backend. Model layers call these functions;
they never assemble raw argument lists themselves.
"""

from __future__ import annotations

from ..gpu import GpuBackend, KernelLaunch, KernelSig


class KernelCache:
    """Per-backend cache of resolved kernels (one `backend.kernel` lookup per signature)."""

    def __init__(self, backend: GpuBackend) -> None:
        self.backend = backend
        self._launches: dict[KernelSig, KernelLaunch] = {}

    def get(self, sig: KernelSig) -> KernelLaunch:
        launch = self._launches.get(sig)
        if launch is None:
            launch = self._launches[sig] = KernelLaunch(self.backend, sig)
        return launch
