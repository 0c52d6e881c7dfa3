"""The OCI image layout, written and read without a container daemon.

A layout directory holds `oci-layout`, `index.json` and content-addressed `blobs/sha256/*`:
the layer tars, the image config (entry point, environment, the layers' diff ids) and the
manifest that names them. JSON is written with sorted keys and no whitespace and the
creation time is the build's epoch, so the manifest digest is a function of the contents.
Layers are stored uncompressed by default: gzip output depends on the zlib build, and the
digest must not (registries and `skopeo copy --dest-compress` compress on the way out).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tarfile
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, BinaryIO

from .layer import HashingWriter

OCI_LAYOUT = {"imageLayoutVersion": "1.0.0"}
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
MEDIA_LAYER_GZIP = MEDIA_LAYER + "+gzip"
REF_NAME = "org.opencontainers.image.ref.name"


class ImageFormatError(ValueError):
    """A layout directory that is not a well-formed OCI image (or whose blobs are corrupt)."""


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def iso_time(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Descriptor:
    media_type: str
    digest: str
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclass(frozen=True, slots=True)
class Layer:
    """A written layer: its blob, the digest of its uncompressed tar, and what made it."""

    blob: Descriptor
    diff_id: str
    created_by: str


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The part of the image config a runtime executes."""

    entrypoint: list[str]
    cmd: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)
    working_dir: str = "/"
    exposed_ports: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"Entrypoint": self.entrypoint, "Cmd": self.cmd, "Env": self.env,
                "WorkingDir": self.working_dir, "Labels": self.labels,
                "ExposedPorts": {port: {} for port in self.exposed_ports}}


class LayoutWriter:
    """Writes blobs into a layout directory; `finish` writes the config, manifest and index."""

    def __init__(self, out_dir: Path, epoch: int, *, compress: bool = False) -> None:
        self.out_dir = out_dir
        self.blobs = out_dir / "blobs" / "sha256"
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.epoch = epoch
        self.compress = compress
        self.layers: list[Layer] = []

    def add_layer(self, write_tar: Callable[[BinaryIO], None], created_by: str) -> Layer:
        """Store the tar that `write_tar(stream)` writes as the next layer."""
        with tempfile.NamedTemporaryFile(dir=self.blobs, prefix=".layer-", delete=False) as tmp:
            try:
                blob = HashingWriter(tmp)  # type: ignore[arg-type]
                if self.compress:
                    with gzip.GzipFile(fileobj=blob, mode="wb", mtime=0,  # type: ignore[arg-type]
                                       compresslevel=6) as gz:
                        diff = HashingWriter(gz)  # type: ignore[arg-type]
                        write_tar(diff)  # type: ignore[arg-type]
                    diff_id = diff.digest
                else:
                    write_tar(blob)  # type: ignore[arg-type]
                    diff_id = blob.digest
            except BaseException:
                os.unlink(tmp.name)
                raise
        os.replace(tmp.name, self.blobs / blob.digest.split(":", 1)[1])
        layer = Layer(Descriptor(MEDIA_LAYER_GZIP if self.compress else MEDIA_LAYER,
                                 blob.digest, blob.size), diff_id, created_by)
        self.layers.append(layer)
        return layer

    def _put_json(self, value: Any, media_type: str) -> Descriptor:
        data = canonical_json(value)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        (self.blobs / digest.split(":", 1)[1]).write_bytes(data)
        return Descriptor(media_type, digest, len(data))

    def finish(self, run: RunConfig, ref_name: str,
               annotations: dict[str, str] | None = None) -> Descriptor:
        """Write config, manifest, index.json and oci-layout; the manifest's descriptor."""
        created = iso_time(self.epoch)
        config = {
            "architecture": "amd64", "os": "linux", "created": created,
            "config": run.to_json(),
            "rootfs": {"type": "layers", "diff_ids": [l.diff_id for l in self.layers]},
            "history": [{"created": created, "created_by": l.created_by} for l in self.layers],
        }
        config_desc = self._put_json(config, MEDIA_CONFIG)
        manifest = {"schemaVersion": 2, "mediaType": MEDIA_MANIFEST,
                    "config": config_desc.to_json(),
                    "layers": [l.blob.to_json() for l in self.layers],
                    "annotations": dict(annotations or {})}
        manifest_desc = self._put_json(manifest, MEDIA_MANIFEST)
        index = {"schemaVersion": 2, "mediaType": MEDIA_INDEX,
                 "manifests": [{**manifest_desc.to_json(),
                                "annotations": {REF_NAME: ref_name}}]}
        (self.out_dir / "index.json").write_bytes(canonical_json(index))
        (self.out_dir / "oci-layout").write_bytes(canonical_json(OCI_LAYOUT))
        return manifest_desc


# --- reading --------------------------------------------------------------------------------

def _blob_path(layout: Path, digest: str) -> Path:
    algorithm, _, hexdigest = digest.partition(":")
    if algorithm != "sha256" or len(hexdigest) != 64:
        raise ImageFormatError(f"unsupported digest {digest!r}")
    path = layout / "blobs" / "sha256" / hexdigest
    if not path.is_file():
        raise ImageFormatError(f"{layout}: blob {digest} is missing")
    return path


def verify_blob(layout: Path, desc: dict[str, Any]) -> Path:
    """The blob's path after checking its size and sha256 against the descriptor."""
    path = _blob_path(layout, desc["digest"])
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    if "sha256:" + digest.hexdigest() != desc["digest"] or path.stat().st_size != desc["size"]:
        raise ImageFormatError(f"{layout}: blob {desc['digest']} does not match its descriptor")
    return path


@dataclass(frozen=True, slots=True)
class Image:
    """A parsed image: manifest digest, manifest, config and the layers' blob paths."""

    digest: str
    manifest: dict[str, Any]
    config: dict[str, Any]
    layer_paths: list[Path]


def read_image(layout: Path, ref_name: str | None = None) -> Image:
    """Parse and verify the image `ref_name` (or the only image) of a layout directory."""
    try:
        if json.loads((layout / "oci-layout").read_bytes()) != OCI_LAYOUT:
            raise ImageFormatError(f"{layout}/oci-layout is not version 1.0.0")
        index = json.loads((layout / "index.json").read_bytes())
    except (OSError, json.JSONDecodeError) as exc:
        raise ImageFormatError(f"{layout} is not an OCI image layout: {exc}") from None
    manifests = [m for m in index.get("manifests", [])
                 if ref_name is None or m.get("annotations", {}).get(REF_NAME) == ref_name]
    if len(manifests) != 1:
        raise ImageFormatError(f"{layout}: expected one image"
                               f"{' named ' + ref_name if ref_name else ''}, "
                               f"found {len(manifests)}")
    manifest = json.loads(verify_blob(layout, manifests[0]).read_bytes())
    config = json.loads(verify_blob(layout, manifest["config"]).read_bytes())
    layers = [verify_blob(layout, d) for d in manifest["layers"]]
    if len(layers) != len(config["rootfs"]["diff_ids"]):
        raise ImageFormatError(f"{layout}: {len(layers)} layers but "
                               f"{len(config['rootfs']['diff_ids'])} diff ids")
    return Image(manifests[0]["digest"], manifest, config, layers)


def unpack(image: Image, dest: Path) -> None:
    """Apply the layers in order into `dest`. Images written here have no whiteouts; a
    whiteout member is an error rather than silently mishandled."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in image.layer_paths:
        with tarfile.open(path, mode="r:*") as tar:
            for member in tar.getmembers():
                if os.path.basename(member.name).startswith(".wh."):
                    raise ImageFormatError(f"{path.name}: whiteout {member.name} unsupported")
            tar.extractall(dest, filter="tar")
