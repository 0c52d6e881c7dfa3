"""Packaging hook: a wheel carries the PTX sets of the selected kernel leaves.

Everything else about the package is in pyproject.toml. `build_py` additionally builds the
ATLAS_TARGET_* selection of leaves into `atlas/kernels/ptxsets/` (atlas.kernels.build.
package_sets: compiled with nvcc when present, else model-data-only sets), so an installed
wheel finds its kernels and every model's MODEL.toml behavior and presets without a source
checkout. Editable installs skip it: they read `build/kernels` of the checkout.
"""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

REPO_ROOT = Path(__file__).absolute().parent


class BuildPyWithPtxSets(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        sys.path.insert(0, str(REPO_ROOT / "py"))
        from atlas.kernels.build import package_sets

        package_sets(REPO_ROOT, Path(self.build_lib) / "atlas" / "kernels" / "ptxsets")


setup(cmdclass={"build_py": BuildPyWithPtxSets})
