"""The Debian base layer: mmdebstrap run from `tools/image/debian.lock`, and checked against it.

Debian's mirrors keep only the newest version of each package, so a lock cannot make apt
install old versions; it makes drift visible instead. The lock names the suite, mirrors,
variant, extra packages and the build epoch, and lists every package the root filesystem
must hold at its exact version. The build reads the new root's dpkg status and refuses an
image whose package set differs from the lock (the error lists the differences, and
`atlas image lock` records the new set). Same lock + same mirror contents = same bytes:
mmdebstrap honours SOURCE_DATE_EPOCH, and the layer is re-written sorted (layer.py).
"""

from __future__ import annotations

import email.parser
import os
import subprocess
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

#: documentation, manuals and translations stay out; licenses stay in
DPKG_PATH_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*",
                      "/usr/share/locale/*")
DPKG_PATH_INCLUDES = ("/usr/share/doc/*/copyright",)


class DebianLockError(RuntimeError):
    """The lock is malformed, mmdebstrap failed, or the new root differs from the lock."""


@dataclass(frozen=True, slots=True)
class BaseSpec:
    """What the base root filesystem is made from (the lock's [base] table)."""

    suite: str
    mirrors: tuple[str, ...]  # apt source lines ("deb URL SUITE COMPONENT")
    variant: str
    include: tuple[str, ...]
    source_date_epoch: int

    def mmdebstrap_command(self, out_tar: Path) -> list[str]:
        cmd = ["mmdebstrap", f"--variant={self.variant}", "--mode=auto", "--format=tar",
               "--quiet"]
        if self.include:
            cmd.append("--include=" + ",".join(self.include))
        cmd += [f"--dpkgopt=path-exclude={p}" for p in DPKG_PATH_EXCLUDES]
        cmd += [f"--dpkgopt=path-include={p}" for p in DPKG_PATH_INCLUDES]
        return cmd + [self.suite, str(out_tar), *self.mirrors]


@dataclass(frozen=True, slots=True)
class DebianLock:
    base: BaseSpec
    packages: dict[str, str]  # name (with :arch when not amd64/all) -> version


def parse_lock(text: str, origin: str = "debian.lock") -> DebianLock:
    try:
        data = tomllib.loads(text)
        base = data["base"]
        spec = BaseSpec(suite=str(base["suite"]), mirrors=tuple(base["mirrors"]),
                        variant=str(base["variant"]), include=tuple(base["include"]),
                        source_date_epoch=int(base["source_date_epoch"]))
        packages = {str(k): str(v) for k, v in data["packages"].items()}
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as exc:
        raise DebianLockError(f"{origin} is malformed: {exc!r}") from None
    return DebianLock(spec, packages)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_lock(lock: DebianLock) -> str:
    """The lock as TOML, packages sorted; parse_lock(format_lock(x)) == x."""
    b = lock.base
    lines = ["# The Debian base of the Atlas OCI image. Written by `atlas image lock`;",
             "# `atlas image build` refuses a root filesystem whose packages differ.",
             "[base]",
             f"suite = {_quote(b.suite)}",
             "mirrors = [" + ", ".join(_quote(m) for m in b.mirrors) + "]",
             f"variant = {_quote(b.variant)}",
             "include = [" + ", ".join(_quote(p) for p in b.include) + "]",
             f"source_date_epoch = {b.source_date_epoch}",
             "", "[packages]"]
    lines += [f"{_quote(name)} = {_quote(version)}"
              for name, version in sorted(lock.packages.items())]
    return "\n".join(lines) + "\n"


def parse_dpkg_status(text: str) -> dict[str, str]:
    """Installed packages (Status: install ok installed) -> version, from var/lib/dpkg/status."""
    installed = {}
    for stanza in text.split("\n\n"):
        if not stanza.strip():
            continue
        fields = email.parser.Parser().parsestr(stanza)
        if not (fields.get("Status") or "").endswith(" installed"):
            continue
        name, arch = fields["Package"], fields.get("Architecture", "all")
        key = name if arch in ("all", "amd64") else f"{name}:{arch}"
        installed[key] = fields["Version"]
    return installed


def packages_in_tar(rootfs_tar: Path) -> dict[str, str]:
    """The package set of a root filesystem tar (mmdebstrap's output)."""
    with tarfile.open(rootfs_tar, mode="r:") as tar:
        for name in ("./var/lib/dpkg/status", "var/lib/dpkg/status"):
            try:
                member = tar.getmember(name)
            except KeyError:
                continue
            fh = tar.extractfile(member)
            assert fh is not None
            return parse_dpkg_status(fh.read().decode("utf-8"))
    raise DebianLockError(f"{rootfs_tar} has no var/lib/dpkg/status")


def lock_differences(locked: dict[str, str], installed: dict[str, str]) -> list[str]:
    """One line per package whose presence or version differs, sorted by name."""
    out = []
    for name in sorted(set(locked) | set(installed)):
        want, have = locked.get(name), installed.get(name)
        if want == have:
            continue
        if want is None:
            out.append(f"+ {name} {have} (not in the lock)")
        elif have is None:
            out.append(f"- {name} {want} (locked, not installed)")
        else:
            out.append(f"~ {name} {want} -> {have}")
    return out


def check_against_lock(lock: DebianLock, installed: dict[str, str]) -> None:
    diff = lock_differences(lock.packages, installed)
    if diff:
        raise DebianLockError(
            "the Debian mirror no longer gives the locked package set "
            f"({len(diff)} differences):\n  " + "\n  ".join(diff[:40])
            + "\nReview and record the new set with `atlas image lock`.")


def run_mmdebstrap(spec: BaseSpec, out_tar: Path, epoch: int | None = None) -> None:
    """Build the root filesystem tar with file times at most `epoch` (default: the lock's);
    DebianLockError carries mmdebstrap's own message."""
    stamp = spec.source_date_epoch if epoch is None else epoch
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(stamp)}
    try:
        done = subprocess.run(spec.mmdebstrap_command(out_tar), env=env,
                              capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise DebianLockError("mmdebstrap is not installed (apt-get install mmdebstrap)") \
            from None
    if done.returncode != 0:
        raise DebianLockError(f"mmdebstrap failed (exit {done.returncode}):\n"
                              + done.stderr.strip()[-3000:])
