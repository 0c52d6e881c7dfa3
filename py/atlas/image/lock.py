"""`atlas image lock`: record what the image is built from.

The wheel lock is pip's resolution of pyproject.toml's dependencies (plus pip itself, so
the image can import the default model on first use) for the image's interpreter, each
package held to the version installed where this runs when there is one: the image carries
the versions the test suite ran with. The Debian lock is the package set mmdebstrap installs
from the mirrors today, under the [base] settings already in the lock.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from . import debian, wheels

EXTRA_WHEELS = ("pip",)
WHEEL_LOCK_HEADER = """\
The Python wheels of the Atlas OCI image: CPython 3.11, manylinux x86_64 (Debian bookworm).
Written by `atlas image lock`; `atlas image build` installs exactly these files."""


def project_dependencies(repo_root: Path) -> list[str]:
    with (repo_root / "pyproject.toml").open("rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def _installed_pins(names: list[str]) -> list[str]:
    pins = []
    for name in names:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return pins


def resolve_wheels(requirements: list[str]) -> list[wheels.PinnedWheel]:
    """pip's resolution for the image interpreter, as pinned wheels (from pip's report)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        constraints = Path(tmp) / "constraints.txt"
        report_names = _resolve(requirements, report, constraints, [])
        constraints.write_text("\n".join(_installed_pins(report_names)) + "\n")
        _resolve(requirements, report, constraints, ["-c", str(constraints)])
        items = json.loads(report.read_text())["install"]
    pinned = []
    for item in items:
        info = item["download_info"]
        sha = info.get("archive_info", {}).get("hashes", {}).get("sha256")
        filename = info["url"].rsplit("/", 1)[-1]
        if sha is None or not filename.endswith(".whl"):
            raise wheels.WheelLockError(f"{item['metadata']['name']}: pip chose {filename} "
                                        "without a sha256")
        pinned.append(wheels.PinnedWheel(item["metadata"]["name"],
                                         item["metadata"]["version"], sha, filename))
    return pinned


def _resolve(requirements: list[str], report: Path, constraints: Path,
             extra: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
           "--disable-pip-version-check", "--report", str(report),
           "--target", str(report.parent / "target"), *wheels.pip_target_args(), *extra,
           *requirements]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise wheels.WheelLockError(f"pip could not resolve the image's dependencies:\n"
                                    f"{done.stderr.strip()[-3000:]}")
    return [i["metadata"]["name"] for i in json.loads(report.read_text())["install"]]


def write_wheel_lock(repo_root: Path, lock_path: Path) -> list[wheels.PinnedWheel]:
    pinned = resolve_wheels(project_dependencies(repo_root) + list(EXTRA_WHEELS))
    lock_path.write_text(wheels.format_lock(pinned, WHEEL_LOCK_HEADER), encoding="utf-8")
    return pinned


def write_debian_lock(lock_path: Path) -> debian.DebianLock:
    """Run mmdebstrap with the lock's [base] settings and record its package set."""
    old = debian.parse_lock(lock_path.read_text(encoding="utf-8"), str(lock_path))
    with tempfile.TemporaryDirectory() as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        debian.run_mmdebstrap(old.base, rootfs)
        new = debian.DebianLock(old.base, debian.packages_in_tar(rootfs))
    lock_path.write_text(debian.format_lock(new), encoding="utf-8")
    return new
