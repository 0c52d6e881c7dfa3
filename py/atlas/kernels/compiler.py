"""ComputeTarget: the compiler driver for one GPU vendor.

HARDWARE.toml names a vendor; `resolve_compute_target` returns the driver that turns that
vendor's kernel sources into loadable modules. NVIDIA is the one Atlas ships (nvcc -> PTX).
The other vendors the `Vendor` enum lists are refused at resolution with a clear error, so a
tree that names them fails before any work starts rather than half-way through a build.
"""

from __future__ import annotations

import abc
import fcntl
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Mapping

from atlas.core.vendor import Vendor


#: Where `compile_closure` lays a module's sources out before compiling them. Fixed, and the
#: same on every machine (not $TMPDIR, which Bazel and users vary), because nvcc salts symbol
#: names with the source's absolute path: compiled from here, a module's PTX depends on its
#: bytes alone, whichever checkout or sandbox they came from.
FIXED_SOURCE_ROOT = Path("/tmp/atlas-kernel-src")


class CompilerError(RuntimeError):
    """The compiler is missing, or rejected a source file (its output is in the message)."""


class ComputeTarget(abc.ABC):
    """One vendor's kernel compiler."""

    vendor: Vendor
    source_extension: str
    output_extension: str
    output_is_text: bool

    @abc.abstractmethod
    def find_compiler(self) -> Path:
        """Path of the compiler executable; CompilerError when it is not installed."""

    @abc.abstractmethod
    def version(self) -> str:
        """A string that changes whenever the compiler (and so its bundled headers) does."""

    @abc.abstractmethod
    def compile(self, src: Path, out: Path, arch: str, flags: list[str],
                seed: str | None = None) -> None:
        """Compile one source file to one module file; CompilerError on failure. `seed`
        replaces whatever the compiler would otherwise randomize (symbol-name salts), so
        equal inputs give equal bytes; pass something unique per source file."""

    def compile_to_bytes(self, src: Path, arch: str, flags: list[str],
                         seed: str | None = None) -> bytes:
        """Compile and return the module's bytes (a scratch directory holds the output)."""
        with tempfile.TemporaryDirectory(prefix="atlas-kernel-") as tmp:
            out = Path(tmp) / f"{src.stem}{self.output_extension}"
            self.compile(src, out, arch, flags, seed)
            return out.read_bytes()

    def compile_closure(self, closure: Mapping[str, bytes], source: str, key: str, arch: str,
                        flags: list[str]) -> bytes:
        """Compile `source` from its include closure (repo-relative path -> bytes) laid out
        under FIXED_SOURCE_ROOT/<key>/, so the output depends on the bytes, never on where
        the checkout is. `key` names the layout (a digest of the files it holds); a lock
        file serializes compiles of one layout (within a process and across processes), so
        none reads a half-written tree."""
        root = FIXED_SOURCE_ROOT / key
        FIXED_SOURCE_ROOT.mkdir(parents=True, exist_ok=True)
        with open(FIXED_SOURCE_ROOT / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                shutil.rmtree(root, ignore_errors=True)
                for rel, data in closure.items():
                    path = root / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
                return self.compile_to_bytes(root / source, arch, flags, seed=source)
            finally:
                shutil.rmtree(root, ignore_errors=True)


class NvidiaTarget(ComputeTarget):
    """nvcc -ptx: PTX text, loaded at startup with cuModuleLoadData (JIT to the exact GPU).

    nvcc salts the names of internal-linkage symbols (anonymous namespaces, function-local
    __shared__ arrays) with a random number and a hash of the source's real absolute path
    (not the path given, not the working directory: measured with nvcc 13.0).
    `-frandom-seed` fixes the first; `compile_closure` fixes the second by compiling from
    FIXED_SOURCE_ROOT, so PTX bytes are equal in any two checkouts and in Bazel's sandbox.
    """

    vendor = Vendor.NVIDIA
    source_extension = ".cu"
    output_extension = ".ptx"
    output_is_text = True

    def __init__(self, nvcc: str = "nvcc") -> None:
        self._nvcc = nvcc

    def find_compiler(self) -> Path:
        found = shutil.which(self._nvcc)
        if found is None:
            raise CompilerError(f"{self._nvcc} not found on PATH; install the CUDA toolkit, "
                                f"or set ATLAS_SKIP_BUILD=1 to emit PTX sets with no modules")
        return Path(found)

    def version(self) -> str:
        return _nvcc_version(str(self.find_compiler()))

    def compile(self, src: Path, out: Path, arch: str, flags: list[str],
                seed: str | None = None) -> None:
        salt = [] if seed is None else [f"-frandom-seed={seed}"]
        cmd = [str(self.find_compiler()), "-ptx", f"-arch={arch}", *flags, *salt, str(src),
               "-o", str(out)]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise CompilerError(f"nvcc failed on {src} (exit {result.returncode}):\n"
                                f"{' '.join(cmd)}\n{result.stderr.strip()}")


@functools.cache
def _nvcc_version(nvcc: str) -> str:
    """`nvcc --version`'s release and build lines, e.g.
    "Cuda compilation tools, release 13.0, V13.0.88; Build cuda_13.0.r13.0/compiler.36424714_0"."""
    result = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    lines = [ln.strip() for ln in result.stdout.splitlines()
             if ln.startswith(("Cuda compilation tools", "Build "))]
    if result.returncode != 0 or not lines:
        raise CompilerError(f"{nvcc} --version failed: {result.stdout}{result.stderr}")
    return "; ".join(lines)


def resolve_compute_target(vendor: Vendor) -> ComputeTarget:
    """The compiler driver for `vendor`. Only NVIDIA has one; the others are refused here."""
    if vendor is Vendor.NVIDIA:
        return NvidiaTarget()
    raise CompilerError(f"kernel compilation is not implemented for vendor {vendor.value!r}; "
                        f"Atlas builds kernels for: {Vendor.NVIDIA.value}")
