"""flake.nix and flake.lock: nixpkgs is pinned to one revision with its content hash, and the
flake's Python package list is pyproject.toml's dependencies. The evaluation tests run Nix
(Debian's nix-bin, flakes enabled, offline): `nix flake show` and the `lib` outputs, which
need no nixpkgs (building any package fetches it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from atlas.image import wheels

REPO = Path(__file__).absolute().parents[2]
needs_nix = pytest.mark.skipif(shutil.which("nix") is None,
                               reason="nix not installed (apt-get install nix-bin)")


def test_the_lock_pins_the_input_the_flake_names() -> None:
    url = re.search(r'inputs\.nixpkgs\.url = "github:(\w+)/(\w+)/([\w.-]+)";',
                    (REPO / "flake.nix").read_text())
    assert url is not None
    lock = json.loads((REPO / "flake.lock").read_text())
    assert lock["version"] == 7 and lock["nodes"]["root"]["inputs"] == {"nixpkgs": "nixpkgs"}
    node = lock["nodes"]["nixpkgs"]
    assert node["original"] == {"type": "github", "owner": url[1], "repo": url[2],
                                "ref": url[3]}
    locked = node["locked"]
    assert (locked["type"], locked["owner"], locked["repo"]) == ("github", url[1], url[2])
    assert re.fullmatch(r"[0-9a-f]{40}", locked["rev"])
    assert re.fullmatch(r"sha256-[A-Za-z0-9+/]{43}=", locked["narHash"])
    assert isinstance(locked["lastModified"], int)


def _nix_json(*args: str) -> object:
    """`nix <args> --offline --json` in the repository, flakes on, no substituters."""
    env = {**os.environ, "NIX_CONFIG": "experimental-features = nix-command flakes\n"
           "sandbox = false\nsubstituters =\n"}
    done = subprocess.run(["nix", *args, "--offline", "--json"], cwd=REPO, env=env,
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def _nix_eval(attr: str) -> object:
    return _nix_json("eval", f".#{attr}")


@needs_nix
def test_flake_show_lists_every_output_without_nixpkgs() -> None:
    shown = _nix_json("flake", "show")
    packages = shown["packages"]["x86_64-linux"]
    assert {name: p["name"] for name, p in packages.items()} == {
        "atlas": "atlas-0.1.0", "default": "atlas-0.1.0", "oci": "stream-atlas",
        "ptx-sets": "atlas-ptx-sets-0.1.0"}
    assert shown["apps"]["x86_64-linux"]["atlas"] == {"type": "app"}
    assert shown["devShells"]["x86_64-linux"]["default"]["type"] == "derivation"


@needs_nix
def test_the_flake_python_packages_are_pyproject_dependencies() -> None:
    with (REPO / "pyproject.toml").open("rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    names = [re.match(r"[A-Za-z0-9._-]+", d).group(0) for d in deps]
    assert _nix_eval("lib.pythonDependencies") == names


@needs_nix
def test_the_flake_reads_the_image_wheel_lock() -> None:
    pinned = wheels.parse_lock((REPO / "tools/image/requirements.lock").read_text())
    assert _nix_eval("lib.wheelLock") == {
        w.name: {"version": w.version, "sha256": w.sha256, "file": w.filename} for w in pinned}
