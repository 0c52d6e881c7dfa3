"""CI's check of a built Atlas image (run by ci/image_check.sh, as root).

1. Two layouts built from the same inputs have the same manifest digest.
2. The image's blobs match their descriptors; unpacked, it holds exactly the PTX sets of the
   targets the same wildcards select as at build time, and no kernel tree.
3. Its entry point, run in a chroot inside new mount and PID namespaces with the model
   directory bind-mounted read-only and nothing else of the host, serves the default model:
   "What is the capital of France?" gets an answer containing "Paris".
Prints the image size and how long each step took.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from atlas.core.target import KernelTarget
from atlas.image.build import ATLAS_ROOT, PTX_DIR
from atlas.image.oci import Image, read_image, unpack
from atlas.kernels.ptxset import PTXSET_SUFFIX, artifact_name
from atlas.kernels.tree import find_repo_root, select_targets

MODELS_IN_IMAGE = "root/.atlas/models"
QUESTION = "What is the capital of France?"


def check_targets(rootfs: Path, expected: list[KernelTarget]) -> None:
    """The image holds the PTX sets of `expected` and nothing else of the kernel tree."""
    sets = sorted(p.name for p in rootfs.rglob(f"*{PTXSET_SUFFIX}"))
    want = sorted(artifact_name(t) for t in expected)
    if sets != want or not all((rootfs / PTX_DIR / name).is_file() for name in want):
        raise SystemExit(f"FAIL: PTX sets in the image {sets}, expected {want} in /{PTX_DIR}")
    if (rootfs / ATLAS_ROOT / "kernels").exists():
        raise SystemExit("FAIL: the image holds a kernel source tree")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_command(image: Image, rootfs: Path, models: Path, port: int,
                   extra: list[str]) -> list[str]:
    """unshare + chroot running the image's Entrypoint + Cmd with the image's Env only."""
    cfg = image.config["config"]
    argv = cfg["Entrypoint"] + cfg.get("Cmd", []) + ["--bind", "127.0.0.1", "--port",
                                                     str(port), *extra]
    mounts = " && ".join([
        f"mount --rbind /dev {shlex.quote(str(rootfs / 'dev'))}",
        f"mount -t proc proc {shlex.quote(str(rootfs / 'proc'))}",
        f"mount --bind {shlex.quote(str(models))} {shlex.quote(str(rootfs / MODELS_IN_IMAGE))}",
        f"mount -o remount,bind,ro {shlex.quote(str(rootfs / MODELS_IN_IMAGE))}",
    ])
    inner = (f"{mounts} && cd / && exec chroot {shlex.quote(str(rootfs))} /usr/bin/env -i "
             + " ".join(shlex.quote(e) for e in cfg["Env"]) + " "
             + " ".join(shlex.quote(a) for a in argv))
    return ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--", "sh", "-c", inner]


def _post_json(url: str, body: dict, timeout: float) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def _wait_healthy(url: str, server: subprocess.Popen, deadline: float) -> None:
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"FAIL: the image's server exited with {server.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    raise SystemExit("FAIL: the image's server did not become healthy in time")


def ask_paris(image: Image, rootfs: Path, models: Path, timeout: float) -> str:
    port = _free_port()
    (rootfs / MODELS_IN_IMAGE).mkdir(parents=True, exist_ok=True)
    cmd = _serve_command(image, rootfs, models, port,
                         ["--max-seq-len", "512", "--max-batch-size", "2"])
    server = subprocess.Popen(cmd)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_healthy(base + "/health", server, time.monotonic() + timeout)
        reply = _post_json(base + "/v1/chat/completions", {
            "model": "default", "max_tokens": 24, "temperature": 0,
            "messages": [{"role": "user", "content": QUESTION}]}, timeout)
        return reply["choices"][0]["message"]["content"]
    finally:
        _stop(server)


def _stop(server: subprocess.Popen) -> None:
    """End the namespace: unshare ignores SIGTERM while it waits, and the server is the PID
    namespace's init, to which only SIGKILL is certain to be delivered from outside; its
    death ends the namespace, its mounts, and unshare."""
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children")
    for pid in (children.read_text().split() if children.exists() else []):
        os.kill(int(pid), signal.SIGKILL)
    server.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path, help="an image layout")
    parser.add_argument("second", type=Path, help="the same image, built again")
    parser.add_argument("--target-hw", default="*")
    parser.add_argument("--target-model", default="*")
    parser.add_argument("--target-quant", default="*")
    parser.add_argument("--models", type=Path, required=True,
                        help="host directory mounted at /root/.atlas/models")
    parser.add_argument("--rootfs", type=Path, required=True, help="where to unpack")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)

    first, second = read_image(args.first), read_image(args.second)
    if first.digest != second.digest:
        raise SystemExit(f"FAIL: not reproducible: {first.digest} != {second.digest}")
    size = sum(layer["size"] for layer in first.manifest["layers"])
    print(f"reproducible: {first.digest} ({size / 1e6:.1f} MB, "
          f"{len(first.layer_paths)} layers)")
    started = time.monotonic()
    shutil.rmtree(args.rootfs, ignore_errors=True)
    unpack(first, args.rootfs)
    targets = select_targets(find_repo_root(Path(__file__).absolute()), args.target_hw,
                             args.target_model, args.target_quant)
    check_targets(args.rootfs, targets)
    print(f"unpacked in {time.monotonic() - started:.1f}s; PTX sets: "
          + " ".join(t.name for t in targets))
    started = time.monotonic()
    answer = ask_paris(first, args.rootfs, args.models.resolve(), args.timeout)
    print(f"answer in {time.monotonic() - started:.1f}s: {answer!r}")
    if "Paris" not in answer:
        raise SystemExit("FAIL: the answer does not contain 'Paris'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
