"""Python dependencies from wheels pinned by `tools/image/requirements.lock`.

The lock is pip's hash-checking format, one wheel per line:
`name==version --hash=sha256:HEX  # wheel file name`, for CPython 3.11 on manylinux x86_64
(Debian bookworm's python3). `fetch` lets pip download exactly those files (pip honours its
own index settings, so a mirror or PIP_FIND_LINKS works offline) into a cache and verifies
every hash again itself; `unpack_into` installs a wheel the way pip would for these wheels
(purelib/platlib into site-packages, scripts into bin) without running anything from it.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .layer import LayerEntries

PYTHON_VERSION = "3.11"
ABI = "cp311"
#: glibc of Debian bookworm is 2.36; every manylinux tag up to it runs there
PLATFORMS = tuple(f"manylinux_2_{minor}_x86_64" for minor in range(36, 16, -1)) + (
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64")
SITE_PACKAGES = f"usr/local/lib/python{PYTHON_VERSION}/dist-packages"
SCRIPT_DIR = "usr/local/bin"
INTERPRETER = "/usr/bin/python3"

_LINE = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>\S+)\s+--hash=sha256:"
                   r"(?P<sha>[0-9a-f]{64})\s+#\s*(?P<file>\S+\.whl)\s*$")


class WheelLockError(RuntimeError):
    """A malformed lock, a wheel pip could not fetch, or one whose hash differs."""


@dataclass(frozen=True, slots=True)
class PinnedWheel:
    name: str
    version: str
    sha256: str
    filename: str

    def lock_line(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}  # {self.filename}"


def parse_lock(text: str, origin: str = "requirements.lock") -> list[PinnedWheel]:
    wheels = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise WheelLockError(f"{origin}:{number}: expected `name==version "
                                 f"--hash=sha256:HEX  # file.whl`, got {line!r}")
        wheels.append(PinnedWheel(match["name"], match["version"], match["sha"], match["file"]))
    names = [canonical_name(w.name) for w in wheels]
    if len(set(names)) != len(names):
        raise WheelLockError(f"{origin}: a package is pinned twice")
    return wheels


def format_lock(wheels: list[PinnedWheel], header: str) -> str:
    lines = [f"# {h}" for h in header.splitlines()]
    lines += [w.lock_line() for w in sorted(wheels, key=lambda w: canonical_name(w.name))]
    return "\n".join(lines) + "\n"


def canonical_name(name: str) -> str:
    """PEP 503 normalization: `Jinja2` and `jinja2`, `typing_extensions` and `typing-extensions`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_target_args() -> list[str]:
    """pip options selecting wheels for the image's interpreter rather than this one."""
    args = ["--only-binary=:all:", f"--python-version={PYTHON_VERSION}",
            "--implementation=cp", f"--abi={ABI}"]
    return args + [f"--platform={p}" for p in PLATFORMS]


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(wheels: list[PinnedWheel], cache: Path, lock_path: Path) -> list[Path]:
    """The locked wheel files, from `cache` or downloaded by pip into it; hashes checked."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [w for w in wheels if not (cache / w.filename).is_file()]
    if missing:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
               "--disable-pip-version-check", "--require-hashes", "--dest", str(cache),
               *pip_target_args(), "-r", str(lock_path)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise WheelLockError(f"pip could not fetch the locked wheels (exit "
                                 f"{done.returncode}):\n{done.stderr.strip()[-3000:]}")
    paths = []
    for wheel in wheels:
        path = cache / wheel.filename
        if not path.is_file():
            raise WheelLockError(f"{wheel.filename} (locked for {wheel.name}) was not fetched")
        if sha256_file(path) != wheel.sha256:
            raise WheelLockError(f"{path}: sha256 differs from the lock")
        paths.append(path)
    return paths


def _script(data: bytes) -> bytes:
    """A wheel script with its `#!python` placeholder pointed at the image's interpreter."""
    first, sep, rest = data.partition(b"\n")
    if first.startswith(b"#!python"):
        return f"#!{INTERPRETER}".encode() + first[len(b"#!python"):] + sep + rest
    return data


def unpack_into(wheel: Path, entries: LayerEntries) -> None:
    """Add one wheel's installed files to `entries` (purelib/platlib/scripts/data)."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            data = zf.read(info)
            mode = (info.external_attr >> 16) & 0o777 or 0o644
            parts = info.filename.split("/")
            if parts[0].endswith(".data") and len(parts) > 2:
                scheme, rest = parts[1], "/".join(parts[2:])
                if scheme in ("purelib", "platlib"):
                    entries.add_file(f"{SITE_PACKAGES}/{rest}", data, mode)
                elif scheme == "scripts":
                    entries.add_file(f"{SCRIPT_DIR}/{rest}", _script(data), 0o755)
                elif scheme == "data":
                    entries.add_file(f"usr/local/{rest}", data, mode)
                elif scheme == "headers":
                    entries.add_file(f"usr/local/include/python{PYTHON_VERSION}/{rest}",
                                     data, mode)
                else:
                    raise WheelLockError(f"{wheel.name}: unknown install scheme {scheme!r}")
            else:
                entries.add_file(f"{SITE_PACKAGES}/{info.filename}", data, mode)
