"""Bazel's entry into `atlas.kernels.build`: build one leaf's PTX set into one file.

The ptx_set rule (ptx.bzl) runs `ptxset_tool --target hw/model/quant --out-file F` with the
execution root as working directory; the code is the same that `atlas kernels build` runs.
"""

import sys

from atlas.kernels.build import main

if __name__ == "__main__":
    sys.exit(main())
