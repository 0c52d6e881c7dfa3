"""Reproducible layer tars and the OCI layout (atlas.image.layer, atlas.image.oci): the same
contents in any order give the same bytes and digest; an existing root filesystem tar is
re-written sorted, without device nodes and with hard links as files; corrupt blobs are
refused when read."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from atlas.image.layer import LayerEntries, LayerError, clean_path, rewrite_tar, write_entries
from atlas.image.oci import ImageFormatError, LayoutWriter, RunConfig, read_image, unpack

EPOCH = 1_700_000_000


def _entries(order: list[tuple[str, bytes]]) -> LayerEntries:
    entries = LayerEntries()
    for path, data in order:
        entries.add_file(path, data, 0o755 if path.endswith(".sh") else 0o644)
    entries.add_symlink("usr/bin/tool", "../lib/run.sh")
    return entries


def _tar_bytes(entries: LayerEntries) -> bytes:
    out = io.BytesIO()
    write_entries(entries, out, EPOCH)
    return out.getvalue()


def test_entries_in_any_order_give_identical_sorted_bytes() -> None:
    files = [("usr/lib/run.sh", b"#!/bin/sh\n"), ("etc/a.conf", b"a=1\n"), ("/usr/lib/z", b"z")]
    first, second = _tar_bytes(_entries(files)), _tar_bytes(_entries(files[::-1]))
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert names == ["etc", "etc/a.conf", "usr", "usr/bin", "usr/bin/tool", "usr/lib",
                     "usr/lib/run.sh", "usr/lib/z"]  # parents implied, leading / dropped
    by_name = {m.name: m for m in members}
    assert by_name["usr/lib/run.sh"].mode == 0o755 and by_name["etc/a.conf"].mode == 0o644
    assert by_name["usr/bin/tool"].issym() and by_name["usr/bin/tool"].linkname == "../lib/run.sh"
    assert {m.mtime for m in members} == {EPOCH}
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "root", "root")}


def test_conflicting_or_escaping_paths_are_refused() -> None:
    entries = LayerEntries()
    entries.add_file("a/b", b"1")
    entries.add_file("a/b", b"1")  # the same again is harmless
    with pytest.raises(LayerError, match="a/b is added twice"):
        entries.add_file("a/b", b"2")
    for bad in ("../etc/passwd", "a/../../b", "", "/"):
        with pytest.raises(LayerError):
            clean_path(bad)


def _source_tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    buf.seek(0)
    return buf


def _info(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, mtime: int = EPOCH + 999,
          link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mtime, info.linkname, info.mode = kind, size, mtime, link, 0o644
    info.uid = info.gid = 5  # a package's own owner survives
    return info


def test_rewrite_sorts_drops_devices_and_copies_hard_links() -> None:
    members = [
        (_info("./usr/bin/zz", size=3), b"abc"),
        (_info("./dev/null", tarfile.CHRTYPE), None),
        (_info("./dev/", tarfile.DIRTYPE), None),
        (_info("./usr/bin/aa", tarfile.LNKTYPE, link="./usr/bin/zz"), None),
        (_info("./", tarfile.DIRTYPE), None),
        (_info("./etc/fifo", tarfile.FIFOTYPE), None),
        (_info("./etc/x", size=1, mtime=EPOCH - 5), b"x"),
    ]
    outputs = []
    for order in (members, members[::-1]):
        out = io.BytesIO()
        rewrite_tar(_source_tar(order), out, EPOCH)
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1]
    with tarfile.open(fileobj=io.BytesIO(outputs[0])) as tar:
        got = {m.name: (m, tar.extractfile(m).read() if m.isreg() else None)
               for m in tar.getmembers()}
        names = [m.name for m in tar.getmembers()]
    assert names == ["dev", "etc/x", "usr/bin/aa", "usr/bin/zz"]
    assert got["usr/bin/aa"][0].isreg() and got["usr/bin/aa"][1] == b"abc"
    assert got["usr/bin/zz"][0].mtime == EPOCH  # clamped
    assert got["etc/x"][0].mtime == EPOCH - 5  # older times stay
    assert got["etc/x"][0].uid == 5


def test_a_hard_link_to_nothing_is_an_error() -> None:
    src = _source_tar([(_info("a", tarfile.LNKTYPE, link="missing"), None)])
    with pytest.raises(LayerError, match="hard link a -> missing"):
        rewrite_tar(src, io.BytesIO(), EPOCH)


def _write_image(out_dir: Path, compress: bool = False) -> str:
    writer = LayoutWriter(out_dir, EPOCH, compress=compress)
    base = _entries([("etc/os-release", b"ID=test\n")])
    app = LayerEntries()
    app.add_file("opt/app/main.py", b"print('hi')\n")
    writer.add_layer(lambda out: write_entries(base, out, EPOCH), "base")
    writer.add_layer(lambda out: write_entries(app, out, EPOCH), "app")
    return writer.finish(RunConfig(entrypoint=["/opt/app/main.py"], env=["A=1"],
                                   exposed_ports=["8888/tcp"]), "latest").digest


def test_layout_digest_is_reproducible_and_reads_back(tmp_path: Path) -> None:
    digest = _write_image(tmp_path / "a")
    assert _write_image(tmp_path / "b") == digest
    image = read_image(tmp_path / "a")
    assert image.digest == digest
    assert image.config["config"]["Entrypoint"] == ["/opt/app/main.py"]
    assert image.config["config"]["ExposedPorts"] == {"8888/tcp": {}}
    assert image.config["created"] == "2023-11-14T22:13:20Z"
    assert [h["created_by"] for h in image.config["history"]] == ["base", "app"]
    for blob, diff_id in zip(image.layer_paths, image.config["rootfs"]["diff_ids"]):
        assert "sha256:" + hashlib.sha256(blob.read_bytes()).hexdigest() == diff_id
    assert json.loads((tmp_path / "a" / "oci-layout").read_text()) == {
        "imageLayoutVersion": "1.0.0"}
    unpack(image, tmp_path / "root")
    assert (tmp_path / "root" / "opt/app/main.py").read_bytes() == b"print('hi')\n"
    assert (tmp_path / "root" / "usr/bin/tool").is_symlink()


def test_gzip_layers_keep_the_uncompressed_diff_id(tmp_path: Path) -> None:
    _write_image(tmp_path / "plain")
    _write_image(tmp_path / "gz", compress=True)
    plain = read_image(tmp_path / "plain")
    packed = read_image(tmp_path / "gz")
    assert packed.config["rootfs"]["diff_ids"] == plain.config["rootfs"]["diff_ids"]
    assert packed.manifest["layers"][0]["mediaType"].endswith("tar+gzip")
    assert gzip.decompress(packed.layer_paths[0].read_bytes()) == \
        plain.layer_paths[0].read_bytes()


def test_a_corrupt_blob_is_refused(tmp_path: Path) -> None:
    _write_image(tmp_path / "img")
    layer = read_image(tmp_path / "img").layer_paths[1]
    layer.write_bytes(layer.read_bytes()[:-1] + b"!")
    with pytest.raises(ImageFormatError, match="does not match its descriptor"):
        read_image(tmp_path / "img")
    with pytest.raises(ImageFormatError, match="not an OCI image layout"):
        read_image(tmp_path / "nothing-here")
