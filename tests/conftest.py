"""Suite-wide pytest wiring: tests marked `gpu` run only where a CUDA device is usable.

The probe (load the driver, count devices) runs once per session and only when a collected
test carries the marker, so CPU-only runs never touch the driver at all.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    from atlas.runtime.backend_select import cuda_available

    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (none usable: no driver or no GPU)")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture
def hopper_ptx_backend():
    """(PTX set, CudaBackend with that set loaded) for the first built hopper target; the
    backend is closed afterwards. For `gpu` tests that run real kernels from a built set."""
    from atlas.kernels.registry import KernelsNotFound, load_registry
    from atlas.runtime.cuda import CudaBackend

    try:
        registry = load_registry()
    except KernelsNotFound as exc:
        pytest.skip(f"no PTX sets built: {exc}")
    targets = [t for t in registry.targets() if t.hw == "hopper"]
    if not targets:
        pytest.skip("no hopper PTX set built")
    ptx_set = registry.select_target(targets[0].hw, targets[0].model, targets[0].quant)
    backend = CudaBackend(modules={n: m.image() for n, m in ptx_set.modules.items()})
    try:
        yield ptx_set, backend
    finally:
        backend.close()


@pytest.fixture(scope="session")
def skip_built_kernels(tmp_path_factory: pytest.TempPathFactory):
    """The repository's PTX sets built with ATLAS_SKIP_BUILD (no nvcc, no PTX, every set's
    MODEL.toml data) into a fresh directory: what tests of serving behavior read, so they do
    not depend on whether `atlas kernels build` ran. Use with `monkeypatch.setenv(
    "ATLAS_KERNELS_DIR", str(skip_built_kernels))`."""
    from pathlib import Path

    from atlas.kernels.build import build_into
    from atlas.kernels.tree import list_targets

    repo = Path(__file__).absolute().parents[1]
    out = tmp_path_factory.mktemp("ptxsets")
    build_into(repo, out, list_targets(repo), skip=True)
    return out
