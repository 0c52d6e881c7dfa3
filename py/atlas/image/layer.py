"""Reproducible layer tars: sorted entries, one timestamp, fixed owners, no device nodes.

Two sources feed layers: entries built in memory (`LayerEntries`: Atlas's files, unpacked
wheels) and an existing tar (mmdebstrap's root filesystem), which is re-written member by
member in sorted order. Either way every member passes through `_normalized`, so the bytes
depend only on names, contents, modes and owners, never on when or where the build ran.
Hard links become regular files (a sorted order cannot promise the link target comes first)
and device nodes are dropped (the container runtime provides /dev).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import BinaryIO, Iterable

_DIR_MODE = 0o755


class LayerError(ValueError):
    """Two sources disagree about one path, or a path is not a plain relative name."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One member of a layer: a regular file (data), a directory, or a symlink (link)."""

    path: str
    kind: str  # "file" | "dir" | "symlink"
    mode: int = 0o644
    data: bytes = b""
    link: str = ""


def clean_path(path: str) -> str:
    """`path` as a layer member name (relative, POSIX, no `.`/`..`); LayerError otherwise."""
    parts = [p for p in PurePosixPath(path.lstrip("/")).parts if p != "."]
    if not parts or ".." in parts:
        raise LayerError(f"not a path inside the image: {path!r}")
    return "/".join(parts)


class LayerEntries:
    """The members of one layer, by path; parent directories are implied."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}

    def add_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self._put(Entry(clean_path(path), "file", 0o755 if mode & 0o111 else 0o644, data))

    def add_symlink(self, path: str, target: str) -> None:
        self._put(Entry(clean_path(path), "symlink", 0o777, link=target))

    def add_dir(self, path: str) -> None:
        self._put(Entry(clean_path(path), "dir", _DIR_MODE))

    def _put(self, entry: Entry) -> None:
        old = self._entries.get(entry.path)
        if old is not None and old != entry:
            raise LayerError(f"{entry.path} is added twice with different contents")
        self._entries[entry.path] = entry

    def paths(self) -> list[str]:
        return sorted(self._entries)

    def entries(self) -> list[Entry]:
        """Every member including implied parent directories, sorted by path."""
        every = dict(self._entries)
        for path in self._entries:
            parent = PurePosixPath(path).parent
            while str(parent) != ".":
                every.setdefault(str(parent), Entry(str(parent), "dir", _DIR_MODE))
                parent = parent.parent
        return [every[p] for p in sorted(every)]


def _normalized(info: tarfile.TarInfo, epoch: int) -> tarfile.TarInfo:
    """A copy of `info` whose bytes carry nothing of the build's time or machine."""
    out = tarfile.TarInfo(info.name)
    out.type, out.mode, out.linkname = info.type, info.mode & 0o7777, info.linkname
    out.uid, out.gid, out.uname, out.gname = info.uid, info.gid, info.uname, info.gname
    out.size = info.size if info.isreg() else 0
    out.mtime = min(int(info.mtime), epoch)
    out.pax_headers = {}
    return out


def _tar_info(entry: Entry, epoch: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(entry.path)
    info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE,
                 "symlink": tarfile.SYMTYPE}[entry.kind]
    info.mode, info.linkname, info.size = entry.mode, entry.link, len(entry.data)
    info.uname = info.gname = "root"
    info.mtime = epoch
    return info


def write_entries(entries: LayerEntries, out: BinaryIO, epoch: int) -> None:
    """Write `entries` as an uncompressed tar stream to `out`."""
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries.entries():
            info = _tar_info(entry, epoch)
            tar.addfile(info, io.BytesIO(entry.data) if entry.kind == "file" else None)


def _member_name(name: str) -> str | None:
    parts = [p for p in PurePosixPath(name).parts if p not in (".", "/")]
    return "/".join(parts) or None


def rewrite_tar(src: BinaryIO, out: BinaryIO, epoch: int,
                drop: Iterable[str] = ("dev/",)) -> None:
    """Copy the tar `src` (seekable) into `out` in sorted order, normalized.

    Members under a `drop` prefix are left out (their directory stays), as are device nodes
    and FIFOs anywhere; hard links are stored as copies of their target's bytes.
    """
    prefixes = tuple(drop)
    with tarfile.open(fileobj=src, mode="r:") as source:
        members: dict[str, tarfile.TarInfo] = {}
        for member in source.getmembers():
            name = _member_name(member.name)
            if name is None or member.ischr() or member.isblk() or member.isfifo():
                continue
            if any(name.startswith(p) for p in prefixes):
                continue
            member.name = name
            members[name] = member
        with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(members):
                member = members[name]
                if member.islnk():
                    target = members.get(_member_name(member.linkname) or "")
                    if target is None or not target.isreg():
                        raise LayerError(f"hard link {name} -> {member.linkname}: no such "
                                         "regular file in the tar")
                    info = _normalized(target, epoch)
                    info.name, info.mode = name, member.mode & 0o7777
                    tar.addfile(info, source.extractfile(target))
                    continue
                info = _normalized(member, epoch)
                tar.addfile(info, source.extractfile(member) if member.isreg() else None)


class HashingWriter(io.RawIOBase):
    """A write-only stream that forwards to `sink` and keeps sha256 and size of the bytes."""

    def __init__(self, sink: BinaryIO) -> None:
        super().__init__()
        self._sink = sink
        self._hash = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        view = memoryview(data)
        self._hash.update(view)
        self._sink.write(view)
        self.size += len(view)
        return len(view)

    @property
    def digest(self) -> str:
        return "sha256:" + self._hash.hexdigest()
