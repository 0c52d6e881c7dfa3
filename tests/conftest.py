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
