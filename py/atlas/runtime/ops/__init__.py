"""Launch builders: one function per kernel, computing grid/block from the arguments.

`KernelCache` resolves each kernel once per backend. Model layers call these functions;
they never assemble raw argument lists themselves.
"""

from __future__ import annotations

from ..gpu import DevicePtr, GpuBackend, KernelHandle, KernelLaunch, KernelSig, Stream
from .decode_gemm_tune import DecodeGemmTuner
from .routes import KernelRoutes


class KernelCache:
    """Per-backend cache of resolved kernels (one `backend.kernel` lookup per signature), with
    what the launch builders size and route by: the device's facts (SM count, shared memory)
    and the kernel-path switches, both fixed when the cache is built (with the runner); and
    the decode GEMM's tuning table (`decode_tune`, ops/decode_gemm_tune.py; None where the
    backend cannot time kernels or ATLAS_DECODE_GEMM_TUNE=0), loaded here."""

    def __init__(self, backend: GpuBackend, routes: KernelRoutes | None = None) -> None:
        self.backend = backend
        self.facts = backend.device_facts()
        self.routes = KernelRoutes.from_env() if routes is None else routes
        self._launches: dict[KernelSig, KernelLaunch] = {}
        self._shared_opt_in: dict[KernelSig, int] = {}
        self._most_shared: set[KernelSig] = set()
        self._non_portable: set[KernelSig] = set()
        self._tensor_maps: dict[tuple[int, int, int, int], bytes] = {}
        self._resident: dict[tuple[str, str, int, int, int], int | None] = {}
        self._workspaces: dict[str, tuple[DevicePtr, int]] = {}
        self.decode_tune = DecodeGemmTuner.open(backend, self.facts, self.routes)

    def get(self, sig: KernelSig) -> KernelLaunch:
        """The launch handle of `sig`, resolved once. Under routes.max_shared_carveout every
        kernel also asks, once, for SMs configured with the most shared memory (see there)."""
        launch = self._launches.get(sig)
        if launch is None:
            launch = self._launches[sig] = KernelLaunch(self.backend, sig)
            if self.routes.max_shared_carveout:
                self.backend.prefer_shared_memory(launch.handle)
                self._most_shared.add(sig)
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

    def get_large_cluster(self, sig: KernelSig, nbytes: int) -> KernelLaunch:
        """`get_with_shared` for a kernel compiled for clusters above the portable 8 blocks:
        the backend's opt-in to that size (GpuBackend.allow_non_portable_cluster), once."""
        launch = self.get_with_shared(sig, nbytes)
        if sig not in self._non_portable:
            self.backend.allow_non_portable_cluster(launch.handle)
            self._non_portable.add(sig)
        return launch

    def tensor_map(self, ptr: DevicePtr, rows: int, cols: int, box_rows: int) -> bytes:
        """The TMA tensor map of the bf16 matrix [rows][cols] at `ptr` in [box_rows][64]
        boxes (GpuBackend.tensor_map_2d), encoded on first use and kept: a map is a pure
        function of these four values, so a weight's is encoded at its first product and an
        activation buffer's once per row count, never per step (a captured graph holds the
        bytes; a buffer freed and reallocated at the same address and shape gets the same,
        still correct, map). Bounded by the distinct buffers x row counts a runner uses."""
        key = (ptr, rows, cols, box_rows)
        tmap = self._tensor_maps.get(key)
        if tmap is None:
            tmap = self._tensor_maps[key] = self.backend.tensor_map_2d(ptr, rows, cols,
                                                                       box_rows)
        return tmap

    def workspace(self, name: str, nbytes: int, stream: Stream) -> DevicePtr | None:
        """A zeroed device buffer of at least `nbytes` that kernels of one kind (`name`) share
        across launches (they run in stream order), allocated at the first request and kept
        with the cache (a larger later request replaces it); None where it would have to be
        made while `stream`, the stream of the launch that needs it, is being captured into a
        graph (nothing may be allocated there: the caller launches something else)."""
        held = self._workspaces.get(name)
        if held is not None and held[1] >= nbytes:
            return held[0]
        if self.backend.is_capturing(stream):
            return None
        self.backend.synchronize()
        if held is not None:
            self.backend.free(held[0])
        ptr = self.backend.alloc(nbytes)
        self.backend.memset(ptr, 0, nbytes)
        self.backend.synchronize()
        self._workspaces[name] = (ptr, nbytes)
        return ptr

    def resident_blocks(self, handle: KernelHandle, block: int, shared_mem: int,
                        cluster: int) -> int | None:
        """GpuBackend.resident_blocks for this launch shape, asked once and kept (the
        kernel must already be opted in to `shared_mem`)."""
        key = (handle.module, handle.func, block, shared_mem, cluster)
        if key not in self._resident:
            self._resident[key] = self.backend.resident_blocks(handle, block, shared_mem,
                                                               cluster)
        return self._resident[key]
