"""Bazel's entry into `atlas.kernels.build`: build one leaf's PTX set into one file.

The ptx_set rule (ptx.bzl) runs `ptxset_tool --target hw/model/quant --out-file F` with the
execution root as working directory; the code is the same that `atlas kernels build` runs.
The action's PATH is Bazel's fixed strict one (.bazelrc), so it does not change when the
shell's does; the CUDA toolkit's default bin directory is put in front of it here, where nvcc
is when it is not in /usr/local/bin or /usr/bin.
"""

import os
import sys

from atlas.kernels.build import main

CUDA_BIN = "/usr/local/cuda/bin"

if __name__ == "__main__":
    os.environ["PATH"] = os.pathsep.join([CUDA_BIN, os.environ.get("PATH", "/bin:/usr/bin")])
    sys.exit(main())
