"""Fill the driver's JIT cache with every PTX set of the build, for a fresh GPU machine.

A fresh machine's first CUDA process compiles each module's PTX to SASS (minutes for all
sets); later processes load the SASS from the driver's cache. Started in the background at the
beginning of a device call, this does that compile while the first stage is still writing its
checkpoint, so no timed stage pays it:

    python3 tools/gpu/warm_jit.py &
"""

from __future__ import annotations

import sys
import time

from atlas.kernels.registry import load_registry
from atlas.runtime.cuda import CudaBackend


def main() -> int:
    registry = load_registry()
    backend = CudaBackend()
    seen: set[str] = set()
    for target in registry.targets():
        ptx_set = registry.select_target(target.hw, target.model, target.quant)
        # Sets share most modules' PTX bytes; one load per distinct image fills the cache.
        images = {}
        for name, module in ptx_set.modules.items():
            image = module.image()
            digest = f"{name}:{hash(image)}"
            if digest not in seen:
                seen.add(digest)
                images[f"{target.name}/{name}"] = image
        start = time.perf_counter()
        backend.load_modules(images)
        print(f"warm_jit: {target.name}: {len(images)} modules in "
              f"{time.perf_counter() - start:.1f} s", flush=True)
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
