"""Launch builders: one function per kernel, computing grid/block from the arguments.

`KernelCache` resolves each kernel once per backend. Model layers call these functions;
they never assemble raw argument lists themselves.
"""

from __future__ import annotations

from ..gpu import GpuBackend, KernelLaunch, KernelSig
from .routes import KernelRoutes


class KernelCache:
    """Per-backend cache of resolved kernels (one `backend.kernel` lookup per signature), with
    what the launch builders size and route by: the device's facts (SM count, shared memory)
    and the kernel-path switches, both fixed when the cache is built (with the runner)."""

    def __init__(self, backend: GpuBackend, routes: KernelRoutes | None = None) -> None:
        self.backend = backend
        self.facts = backend.device_facts()
        self.routes = KernelRoutes.from_env() if routes is None else routes
        self._launches: dict[KernelSig, KernelLaunch] = {}
        self._shared_opt_in: dict[KernelSig, int] = {}
        self._most_shared: set[KernelSig] = set()

    def get(self, sig: KernelSig) -> KernelLaunch:
        launch = self._launches.get(sig)
        if launch is None:
            launch = self._launches[sig] = KernelLaunch(self.backend, sig)
        return launch

    def get_with_shared(self, sig: KernelSig, nbytes: int,
                        most_shared: bool = False) -> KernelLaunch:
        """`get` for a kernel launched with `nbytes` of dynamic shared memory: the backend's
        opt-in (needed above 48 KiB) is made once per signature, not on every launch.
        `most_shared`: also ask for SMs configured with the most shared memory
        (GpuBackend.prefer_shared_memory), once per signature."""
        launch = self.get(sig)
        if self._shared_opt_in.get(sig, -1) < nbytes:
            self.backend.set_max_dynamic_shared(launch.handle, nbytes)
            self._shared_opt_in[sig] = nbytes
        if most_shared and sig not in self._most_shared:
            self.backend.prefer_shared_memory(launch.handle)
            self._most_shared.add(sig)
        return launch
