"""The image's inputs and contents without running mmdebstrap: the Debian and wheel locks
(parsing, drift reports, the repository's own locks covering pyproject.toml), wheel
installation, the Atlas and kernel layers of a selection, and the CLI's errors."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from atlas.core.target import KernelTarget
from atlas.image import build, debian, wheels
from atlas.kernels.ptxset import PtxSet, artifact_name
from atlas.kernels.tree import select_targets
from atlas.image.layer import LayerEntries

REPO = Path(__file__).absolute().parents[2]

STATUS = """\
Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u9
Description: GNU C Library
 continuation line

Package: gone
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: python3
Status: install ok installed
Architecture: all
Version: 3.11.2-1+b1

Package: libfoo
Status: install ok installed
Architecture: i386
Version: 2
"""


def test_dpkg_status_lists_installed_packages_only() -> None:
    assert debian.parse_dpkg_status(STATUS) == {
        "libc6": "2.36-9+deb12u9", "python3": "3.11.2-1+b1", "libfoo:i386": "2"}


def test_debian_lock_round_trips_and_reports_drift() -> None:
    lock = debian.parse_lock((REPO / build.DEBIAN_LOCK).read_text())
    assert debian.parse_lock(debian.format_lock(lock)) == lock
    assert "python3" in lock.packages and lock.base.include[0] == "python3"
    drifted = dict(lock.packages, python3="9.9", extra="1")
    del drifted["bash"]
    assert debian.lock_differences(lock.packages, drifted) == [
        f"- bash {lock.packages['bash']} (locked, not installed)",
        "+ extra 1 (not in the lock)",
        f"~ python3 {lock.packages['python3']} -> 9.9"]
    with pytest.raises(debian.DebianLockError, match="3 differences"):
        debian.check_against_lock(lock, drifted)
    debian.check_against_lock(lock, dict(lock.packages))
    with pytest.raises(debian.DebianLockError, match="malformed"):
        debian.parse_lock("[base]\nsuite = 1\n")


def test_mmdebstrap_command_carries_the_lock() -> None:
    spec = debian.BaseSpec("bookworm", ("deb http://m/debian bookworm main",), "essential",
                           ("python3", "libstdc++6"), 1)
    cmd = spec.mmdebstrap_command(Path("/t/r.tar"))
    assert cmd[0] == "mmdebstrap" and "--variant=essential" in cmd
    assert "--include=python3,libstdc++6" in cmd
    assert "--dpkgopt=path-exclude=/usr/share/doc/*" in cmd
    assert cmd[-3:] == ["bookworm", "/t/r.tar", "deb http://m/debian bookworm main"]


def _pyproject_names() -> set[str]:
    with (REPO / "pyproject.toml").open("rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    return {wheels.canonical_name(re.match(r"[A-Za-z0-9._-]+", d).group(0)) for d in deps}


def test_the_wheel_lock_covers_pyproject_and_pins_one_hashed_wheel_each() -> None:
    pinned = wheels.parse_lock((REPO / build.WHEEL_LOCK).read_text())
    names = {wheels.canonical_name(w.name) for w in pinned}
    assert _pyproject_names() | {"pip"} <= names
    for wheel in pinned:
        assert wheel.filename.endswith(".whl") and len(wheel.sha256) == 64
        tags = wheel.filename[:-4].split("-")[-3:]
        assert tags[0] in ("py3", "cp311", "cp310", "cp38", "py2.py3"), wheel.filename
        assert tags[2] == "any" or "x86_64" in tags[2], wheel.filename


def test_wheel_lock_format_errors_name_the_line() -> None:
    good = "a==1 --hash=sha256:" + "0" * 64 + "  # a-1-py3-none-any.whl"
    assert wheels.parse_lock(f"# c\n\n{good}\n")[0].filename == "a-1-py3-none-any.whl"
    with pytest.raises(wheels.WheelLockError, match=r"lock:2: expected"):
        wheels.parse_lock(f"{good}\nb>=2\n", "lock")
    with pytest.raises(wheels.WheelLockError, match="pinned twice"):
        wheels.parse_lock(f"{good}\n{good.replace('a==1', 'A==1')}\n")


def _wheel(tmp_path: Path) -> Path:
    path = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("demo/__init__.py", "X = 1\n")
        so = zipfile.ZipInfo("demo/_fast.so")
        so.external_attr = 0o755 << 16
        zf.writestr(so, b"\x7fELF")
        zf.writestr("demo-1.0.data/scripts/demo", "#!python\nimport demo\n")
        zf.writestr("demo-1.0.data/platlib/demo_ext.py", "")
        zf.writestr("demo-1.0.dist-info/RECORD", "")
    return path


def test_a_wheel_unpacks_as_pip_would_install_it(tmp_path: Path) -> None:
    entries = LayerEntries()
    wheels.unpack_into(_wheel(tmp_path), entries)
    site = wheels.SITE_PACKAGES
    by_path = {e.path: e for e in entries.entries()}
    assert set(entries.paths()) == {f"{site}/demo/__init__.py", f"{site}/demo/_fast.so",
                                    f"{site}/demo_ext.py", f"{site}/demo-1.0.dist-info/RECORD",
                                    "usr/local/bin/demo"}
    assert by_path[f"{site}/demo/_fast.so"].mode == 0o755
    assert by_path["usr/local/bin/demo"].data == b"#!/usr/bin/python3\nimport demo\n"
    assert site == "usr/local/lib/python3.11/dist-packages"  # on Debian python3's sys.path


def test_a_wheel_whose_hash_differs_from_the_lock_is_refused(tmp_path: Path) -> None:
    path = _wheel(tmp_path)
    pin = wheels.PinnedWheel("demo", "1.0", "0" * 64, path.name)
    with pytest.raises(wheels.WheelLockError, match="sha256 differs from the lock"):
        wheels.fetch([pin], tmp_path, tmp_path / "unused.lock")
    good = wheels.PinnedWheel("demo", "1.0", wheels.sha256_file(path), path.name)
    assert wheels.fetch([good], tmp_path, tmp_path / "unused.lock") == [path]


def test_atlas_layer_is_the_sources_the_pth_and_the_command() -> None:
    entries = build.atlas_entries(REPO)
    paths = set(entries.paths())
    assert "opt/atlas/py/atlas/__init__.py" in paths
    assert "opt/atlas/py/atlas_cli/cmd_serve.py" in paths
    assert any(p.startswith("opt/atlas/bench/suites/") for p in paths)
    assert not any("__pycache__" in p or p.endswith(".pyc") for p in paths)
    data = {e.path: e.data for e in entries.entries()}
    assert data[f"{wheels.SITE_PACKAGES}/atlas.pth"] == b"/opt/atlas/py\n"
    assert data["usr/local/bin/atlas"].startswith(b"#!/usr/bin/python3\n")


def test_kernel_layer_holds_only_the_selected_sets(tmp_path: Path) -> None:
    (target,) = select_targets(REPO, "hopper", "smollm2-135m", "bf16")
    entries, compiler = build.kernel_entries(REPO, [target], skip_ptx=True, cache_dir=tmp_path)
    assert compiler == "skipped"
    assert entries.paths() == [f"opt/atlas/build/kernels/{artifact_name(target)}"]
    (ptx_set,) = [PtxSet.from_json(e.data) for e in entries.entries() if e.kind == "file"]
    assert "smollm2-135m" in {m.model for m in ptx_set.models}  # it carries the MODEL.toml


def test_run_config_serves_on_all_interfaces_inside_the_container() -> None:
    cfg = build.run_config([KernelTarget("hopper", "smollm2-135m", "bf16")], "skipped")
    assert cfg.entrypoint == ["/usr/local/bin/atlas", "serve"]
    assert cfg.cmd == ["--bind", "0.0.0.0"] and cfg.exposed_ports == ["8888/tcp"]
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in cfg.env
    assert cfg.labels["io.atlas.targets"] == "hopper/smollm2-135m/bf16"


def test_cli_refuses_a_selection_matching_no_leaf(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "atlas_cli.main", "image", "build", "--out", str(tmp_path / "o"),
         "--target-model", "no-such-model"], cwd=REPO, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "py")}, check=False)
    assert done.returncode == 1
    assert "no kernel leaf matches */no-such-model/*" in done.stderr
    assert not (tmp_path / "o").exists()


def test_an_out_dir_that_is_not_a_layout_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not an OCI layout"):
        build._prepare_out(tmp_path)
    assert (tmp_path / "keep.txt").read_text() == "mine"
