"""A wheel carries the PTX sets, and with them every model's MODEL.toml: an installed wheel
serves the default model with its tool parser and presets without a source checkout.

Builds a real wheel (setup.py's build_py hook) from a copy of the tree with ATLAS_SKIP_BUILD=1
(no nvcc: sets with model data and no PTX), then reads the sets back out of the zip.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from atlas.kernels.registry import PtxRegistry, find_kernels_dir

REPO = Path(__file__).absolute().parents[2]


def test_wheel_ships_ptx_sets_with_model_behavior(tmp_path: Path) -> None:
    src = tmp_path / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "ptxsets")
    for name in ("py", "kernels"):
        shutil.copytree(REPO / name, src / name, symlinks=True, ignore=skip)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, src / name)
    env = {"PATH": str(Path(sys.executable).parent), "ATLAS_SKIP_BUILD": "1",
           "ATLAS_PTX_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path),
           "PIP_NO_INDEX": "1"}
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps",
                           "--no-build-isolation", "-w", str(tmp_path / "dist"), "-q"],
                          cwd=src, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (tmp_path / "dist").glob("atlas-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.startswith("atlas/kernels/ptxsets/")]
        assert sorted(names) == ["atlas/kernels/ptxsets/gb10__common__bf16.ptxset.json",
                                 "atlas/kernels/ptxsets/hopper__common__bf16.ptxset.json",
                                 "atlas/kernels/ptxsets/hopper__qwen3-30b-a3b__bf16.ptxset.json",
                                 "atlas/kernels/ptxsets/hopper__qwen3.5-35b-a3b__bf16.ptxset.json"]
        zf.extractall(tmp_path / "site", members=names)
    packaged = tmp_path / "site" / "atlas" / "kernels" / "ptxsets"
    # installed: no checkout beside the package, so the packaged sets are the ones found
    assert find_kernels_dir({}, package_root=tmp_path / "nowhere", packaged=packaged) == packaged
    ptx_set, served = PtxRegistry.load(packaged).select_model("hopper", "llama", 576, "bf16")
    assert (ptx_set.target.name, served.model) == ("hopper/common/bf16", "smollm2-135m")
    assert served.spec.behavior["tool_parser"] == "none"
    assert served.spec.presets["default"].temperature == 0.0  # greedy, its MODEL.toml
    _, qwen = PtxRegistry.load(packaged).select_model("hopper", "qwen3", 4096, "bf16")
    assert qwen.model == "qwen3-8b" and qwen.spec.behavior["tool_parser"] == "hermes"
