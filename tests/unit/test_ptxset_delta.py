"""tools/gpu/ptxset_delta.py: a variant PTX set shipped as a delta rebuilds to exactly the
variant, and the cubin list names every module of the sets it is given."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu" / "ptxset_delta.py"
spec = importlib.util.spec_from_file_location("ptxset_delta", SCRIPT)
delta = importlib.util.module_from_spec(spec)
spec.loader.exec_module(delta)


def ptx_set(flags: list[str], ptx: dict[str, str]) -> dict:
    return {"arch": "sm_90a", "flags": flags, "closure_hash": hashlib.sha256(
        " ".join(flags).encode()).hexdigest(), "modules": {
            name: {"ptx": text, "sha256": hashlib.sha256(text.encode()).hexdigest(),
                   "source": f"kernels/hw/common/{name}.cu"} for name, text in ptx.items()}}


DEFAULT = ptx_set(["-O3"], {"a": "plain a", "b": "plain b", "c": "plain c"})
VARIANT = ptx_set(["-O3", "-DX=1"], {"a": "plain a", "b": "hinted b", "c": "plain c"})


def test_split_keeps_only_the_changed_modules_and_merge_restores_the_variant() -> None:
    part = delta.split(DEFAULT, VARIANT)
    assert list(part["modules"]) == ["b"]
    assert part["flags"] == VARIANT["flags"] and part["closure_hash"] == VARIANT["closure_hash"]
    assert delta.merge(DEFAULT, part) == VARIANT


def test_cubin_names_cover_both_sets_once() -> None:
    names = delta.cubin_names([DEFAULT, VARIANT])
    texts = {"plain a", "plain b", "plain c", "hinted b"}
    assert names == sorted(hashlib.sha256(t.encode()).hexdigest() + ".cubin" for t in texts)


def test_cli_round_trip_and_missing_default(tmp_path: Path) -> None:
    base, var, out, back = (tmp_path / n for n in ("base", "var", "out", "back"))
    for d, s in ((base, DEFAULT), (var, VARIANT)):
        d.mkdir()
        (d / "hw__common__bf16.ptxset.json").write_text(json.dumps(s))
    run = [sys.executable, str(SCRIPT)]
    subprocess.run([*run, "split", str(base), str(var), str(out)], check=True,
                   capture_output=True)
    subprocess.run([*run, "merge", str(base), str(out), str(back)], check=True,
                   capture_output=True)
    assert json.loads((back / "hw__common__bf16.ptxset.json").read_text()) == VARIANT
    (base / "hw__common__bf16.ptxset.json").unlink()
    bad = subprocess.run([*run, "merge", str(base), str(out), str(back)], capture_output=True,
                         text=True)
    assert bad.returncode != 0 and "hw__common__bf16.ptxset.json missing" in bad.stderr
