"""PTX-set build and registry: deterministic artifacts, ATLAS_SKIP_BUILD without nvcc,
target selection at run time, and (slow) Bazel producing the same bytes as the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from atlas.core.target import KernelTarget
from atlas.core.vendor import Vendor
from atlas.kernels.build import (ModuleBuilt, build_into, build_sets, default_cache_dir,
                                 flags_read_by)
from atlas.kernels.compiler import CompilerError, resolve_compute_target
from atlas.kernels.ptxset import PtxModule, PtxSet, artifact_name
from atlas.kernels.registry import KernelsNotFound, PtxRegistry, find_kernels_dir
from atlas.kernels.sources import closure_hash
from atlas.kernels.structure import identical_ptx_sets
from test_kernel_tree import BIG, FAM, SMALL, write, write_baseline, write_tree

REPO = Path(__file__).absolute().parents[2]
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def run_cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "atlas_cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)


def env_without_nvcc(**extra: str) -> dict[str, str]:
    """PATH holding only the Python interpreter's directory: no nvcc anywhere."""
    return {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(REPO / "py"), **extra}


@needs_nvcc
def test_build_is_deterministic_and_records_provenance(tmp_path: Path) -> None:
    """Two checkouts at different paths (no cache between them) give byte-equal artifacts,
    although nvcc salts internal symbol names with the source's absolute path."""
    repo = write_tree(tmp_path / "repo")
    other = write_tree(tmp_path / "a" / "much" / "longer" / "checkout")
    first = build_into(repo, tmp_path / "out1", [BIG], skip=False, jobs=2)
    second = build_into(other, tmp_path / "out2", [BIG], skip=False, jobs=2)
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]
    doc = json.loads(first[0].read_bytes())
    assert first[0].name == "hw__big__bf16.ptxset.json"
    assert doc["arch"] == "sm_90a" and doc["flags"] == ["-O3", "-std=c++17", "-DATLAS_HIDDEN=64"]
    assert doc["closure_hash"] == closure_hash(repo, BIG, "sm_90a", doc["compiler_version"],
                                               doc["flags"])
    assert set(doc["modules"]) == {"a", "b"}
    assert doc["modules"]["b"]["source"] == "kernels/hw/big/bf16/b.cu"
    assert ".entry b_big" in doc["modules"]["b"]["ptx"]  # the shadow's own kernel
    assert ".entry b_kernel" in doc["modules"]["b"]["ptx"]  # and the common one it includes
    assert str(tmp_path) not in first[0].read_text()  # no absolute paths
    assert "_GLOBAL__N_" in doc["modules"]["a"]["ptx"]  # salted names present, yet equal


@needs_nvcc
def test_defines_build_a_variant_set(tmp_path: Path) -> None:
    """`atlas kernels build -D NAME=VALUE`: the variant's modules see the define, and its flags
    and closure hash say so, so a compile-time A/B set never passes for the default one."""
    repo = write_tree(tmp_path / "repo")
    write(repo, "kernels/hw/common/b_impl.cuh",
          "#pragma once\n#ifndef B_ALT\n#define B_ALT 0\n#endif\n"
          "#define B_VALUE (B_ALT ? 3.0f : 2.0f)\n")
    (plain,) = build_sets(repo, [SMALL], skip=False, jobs=1)
    (alt,) = build_sets(repo, [SMALL], skip=False, jobs=1, defines=("B_ALT=1",))
    assert alt.flags == (*plain.flags, "-DB_ALT=1")
    assert alt.closure_hash != plain.closure_hash
    assert alt.modules["a"].ptx == plain.modules["a"].ptx  # a.cu does not read it
    three, two = "1077936128", "1073741824"  # the bits of 3.0f and 2.0f, stored as ints
    assert three in alt.modules["b"].ptx and two in plain.modules["b"].ptx
    assert three not in plain.modules["b"].ptx


@needs_nvcc
def test_compile_error_names_the_source(tmp_path: Path) -> None:
    repo = write_tree(tmp_path)
    write(repo, "kernels/hw/small/bf16/a.cu", 'extern "C" __global__ void a_kernel() { oops; }\n')
    with pytest.raises(CompilerError, match=r"nvcc failed on .*kernels/hw/small/bf16/a.cu"):
        build_sets(repo, [SMALL], skip=False, jobs=1)


def test_skip_build_needs_no_nvcc(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo")
    out = tmp_path / "out"
    done = run_cli(["kernels", "build", "--out", str(out)], repo,
                   env_without_nvcc(ATLAS_SKIP_BUILD="1", ATLAS_TARGET_MODEL="big"))
    assert done.returncode == 0, done.stderr
    ptx_set = PtxSet.from_json((out / "hw__big__bf16.ptxset.json").read_bytes())
    assert ptx_set.skipped and dict(ptx_set.modules) == {}
    assert ptx_set.closure_hash == closure_hash(repo, BIG, "sm_90a", "skipped", list(ptx_set.flags))
    assert not (out / "hw__fam__bf16.ptxset.json").exists()  # ATLAS_TARGET_MODEL selected
    refused = run_cli(["kernels", "build", "--out", str(out)], repo, env_without_nvcc())
    assert refused.returncode != 0 and "nvcc not found" in refused.stderr


def test_list_prints_each_target_with_its_hash_and_modules(tmp_path: Path) -> None:
    repo = write_tree(tmp_path)
    done = run_cli(["kernels", "list"], repo / "kernels" / "hw",
                   env_without_nvcc(ATLAS_SKIP_BUILD="1", ATLAS_TARGET_MODEL="big"))
    assert done.returncode == 0, done.stderr
    flags = ["-O3", "-std=c++17", "-DATLAS_HIDDEN=64"]
    assert done.stdout.splitlines() == [
        f"hw/big/bf16  sm_90a  {closure_hash(repo, BIG, 'sm_90a', 'skipped', flags)}",
        "    runs models      big",
        "    a                kernels/hw/common/a.cu",
        "    b                kernels/hw/big/bf16/b.cu"]


def test_build_removes_sets_of_deleted_leaves_only(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo")
    out = tmp_path / "out"
    build_into(repo, out, [BIG, FAM, SMALL], skip=True)
    shutil.rmtree(repo / "kernels/hw/small")
    build_into(repo, out, [BIG], skip=True)
    assert sorted(p.name for p in out.glob("*.ptxset.json")) == [
        "hw__big__bf16.ptxset.json", "hw__fam__bf16.ptxset.json"]


def test_registry_selects_targets_and_lists_the_known_ones(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo")
    build_into(repo, tmp_path / "sets", [BIG, FAM, SMALL], skip=True)
    registry = PtxRegistry.load(tmp_path / "sets")
    assert registry.targets() == [BIG, FAM, SMALL]
    assert registry.select_target("hw", "big", "bf16").target == BIG
    with pytest.raises(KernelsNotFound) as err:
        registry.select_target("hw", "nope", "bf16")
    assert "built targets: hw/big/bf16, hw/fam/bf16, hw/small/bf16" in str(err.value)
    ptx_set, served = registry.select_model("hw", "qwen3", 64, "bf16")
    assert ptx_set.target == BIG and served.model == "big"
    ptx_set, served = registry.select_model("hw", "qwen3", 999, "bf16")
    assert ptx_set.target == FAM and served.spec.presets["default"].temperature == 0.6


def test_kernels_dir_search_order(tmp_path: Path) -> None:
    runfiles, package_root = tmp_path / "runfiles", tmp_path / "root"
    (runfiles / "atlas" / "kernels").mkdir(parents=True)
    (runfiles / "atlas" / "kernels" / "x.ptxset.json").write_text("{}")
    (package_root / "build" / "kernels").mkdir(parents=True)
    (package_root / "build" / "kernels" / "y.ptxset.json").write_text("{}")
    assert find_kernels_dir({"ATLAS_KERNELS_DIR": str(tmp_path)}, package_root) == tmp_path
    assert find_kernels_dir({"RUNFILES_DIR": str(runfiles)}, package_root) == \
        runfiles / "atlas" / "kernels"
    assert find_kernels_dir({}, package_root) == package_root / "build" / "kernels"
    with pytest.raises(KernelsNotFound, match="is not a directory"):
        find_kernels_dir({"ATLAS_KERNELS_DIR": str(tmp_path / "missing")}, package_root)
    with pytest.raises(KernelsNotFound, match="atlas kernels build"):
        find_kernels_dir({}, tmp_path / "empty")


def test_corrupted_module_is_rejected_on_load(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo")
    (ptx_set,) = build_sets(repo, [FAM], skip=True)
    doc = json.loads(ptx_set.to_json())
    doc["modules"] = {"a": {"source": "kernels/hw/common/a.cu", "ptx": "x", "sha256": "0" * 64}}
    with pytest.raises(ValueError, match="module 'a' PTX does not match its sha256"):
        PtxSet.from_json(json.dumps(doc).encode(), origin="test")


def test_other_vendors_are_refused_at_resolution() -> None:
    assert resolve_compute_target(Vendor.NVIDIA).output_extension == ".ptx"
    for vendor in (Vendor.AMD, Vendor.APPLE, Vendor.INTEL):
        with pytest.raises(CompilerError, match=f"not implemented for vendor '{vendor.value}'"):
            resolve_compute_target(vendor)


def test_artifact_name_is_flat() -> None:
    assert artifact_name(KernelTarget("hopper", "qwen3-8b", "bf16")) == \
        "hopper__qwen3-8b__bf16.ptxset.json"


@pytest.mark.slow
@needs_nvcc
@pytest.mark.skipif(shutil.which("bazel") is None, reason="bazel not installed")
@pytest.mark.skipif(os.environ.get("ATLAS_BAZEL_TESTS") != "1",
                    reason="starts a Bazel server (~1 min); opt in with ATLAS_BAZEL_TESTS=1")
def test_bazel_build_equals_cli_build_byte_for_byte(tmp_path: Path) -> None:
    """A copy of the repo's Bazel files over the small test tree: `bazel build //kernels:all`
    and `atlas kernels build` must write identical artifacts. Opt-in: it starts its own Bazel
    server and output root, which a routine `pytest` run should not pay for."""
    repo = write_tree(tmp_path / "repo")
    for rel in ["WORKSPACE.bazel", "BUILD.bazel", ".bazelrc", "kernels/BUILD.bazel"]:
        shutil.copy(REPO / rel, repo / rel)
    for rel in ["third_party", "tools/bazel", "py"]:
        shutil.copytree(REPO / rel, repo / rel, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(repo / "py")}
    env.pop("ATLAS_SKIP_BUILD", None)
    cli = run_cli(["kernels", "build", "--out", str(tmp_path / "cli")], repo, env)
    assert cli.returncode == 0, cli.stderr
    output_root = tmp_path / "bazel-root"
    bazel = ["bazel", f"--output_user_root={output_root}"]
    try:
        done = subprocess.run([*bazel, "build", "//kernels:all"], cwd=repo, env=env,
                              capture_output=True, text=True, check=False, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        built = sorted((repo / "bazel-bin" / "kernels").glob("*.ptxset.json"))
        assert [p.name for p in built] == sorted(p.name for p in (tmp_path / "cli").iterdir()
                                                 if p.suffix == ".json")
        for path in built:
            assert path.read_bytes() == (tmp_path / "cli" / path.name).read_bytes(), path.name
    finally:
        subprocess.run([*bazel, "shutdown"], cwd=repo, capture_output=True, check=False)


@needs_nvcc
def test_modules_compile_once_and_report_progress_as_they_finish(tmp_path: Path) -> None:
    """big and small differ from fam and the baseline only by ATLAS_HIDDEN, which no module
    reads, so all four share common a.cu's compile and three share common b.cu's: with big's
    own b.cu, 3 distinct modules. A rebuild with the cache compiles nothing and leaves the
    artifacts untouched."""
    repo = write_baseline(write_tree(tmp_path / "repo"))
    base = KernelTarget("hw", "common", "bf16")
    lines: list[ModuleBuilt] = []
    out, cache = tmp_path / "out", tmp_path / "cache"
    written = build_into(repo, out, [BIG, FAM, SMALL, base], skip=False, jobs=2,
                         cache_dir=cache, progress=lines.append)
    assert len(lines) == 3 and not any(b.cached for b in lines)
    assert sorted(b.done for b in lines) == list(range(1, 4))
    assert {b.source for b in lines} == {"kernels/hw/common/a.cu", "kernels/hw/common/b.cu",
                                         "kernels/hw/big/bf16/b.cu"}
    assert lines[-1].line().startswith("[  3/3] sm_90a   kernels/hw/")
    stamps = [p.stat().st_mtime_ns for p in written]
    again: list[ModuleBuilt] = []
    build_into(repo, out, [BIG, FAM, SMALL, base], skip=False, jobs=2, cache_dir=cache,
               progress=again.append)
    assert len(again) == 3 and all(b.cached for b in again)
    assert [p.stat().st_mtime_ns for p in written] == stamps
    sets = [PtxSet.from_json(p.read_bytes()) for p in written]
    # small's define is read by no kernel: it, and fam, compile to the baseline's PTX
    assert [v.path for v in identical_ptx_sets(sets)] == ["kernels/hw/fam/bf16",
                                                          "kernels/hw/small/bf16"]


def test_a_project_define_keys_only_the_modules_whose_closure_names_it() -> None:
    """A -DATLAS_* define enters a module's compile only where a file of its closure spells
    the name as a whole token; every other flag always does."""
    flags = ["-O3", "-DATLAS_HIDDEN=64", "-DATLAS_HIDDEN_ROWS=2", "-DATLAS_FAST", "-DNDEBUG",
             "-DB_ALT=1"]
    names_rows = {"a.cu": b'#include "u.cuh"\n', "u.cuh": b"#define R ATLAS_HIDDEN_ROWS\n"}
    assert flags_read_by(names_rows, flags) == ["-O3", "-DATLAS_HIDDEN_ROWS=2", "-DNDEBUG",
                                                "-DB_ALT=1"]
    names_hidden = {"b.cu": b"#if ATLAS_HIDDEN == 64 && defined(ATLAS_FAST)\n#endif\n"}
    assert flags_read_by(names_hidden, flags) == ["-O3", "-DATLAS_HIDDEN=64", "-DATLAS_FAST",
                                                  "-DNDEBUG", "-DB_ALT=1"]
    assert flags_read_by({"c.cu": b"int MY_ATLAS_HIDDEN;\n"}, flags) == ["-O3", "-DNDEBUG",
                                                                          "-DB_ALT=1"]


@needs_nvcc
def test_a_module_reading_a_leaf_define_compiles_per_leaf(tmp_path: Path) -> None:
    """Where a module reads the leaf's define, each leaf gets its own compile and PTX."""
    repo = write_tree(tmp_path / "repo")
    write(repo, "kernels/hw/common/b_impl.cuh",
          "#pragma once\n#ifndef ATLAS_HIDDEN\n#define ATLAS_HIDDEN 16\n#endif\n"
          "#define B_VALUE (ATLAS_HIDDEN * 1.0f)\n")
    lines: list[ModuleBuilt] = []
    small, fam = build_sets(repo, [SMALL, FAM], skip=False, jobs=2, progress=lines.append)
    assert sorted(b.source for b in lines) == ["kernels/hw/common/a.cu",
                                               "kernels/hw/common/b.cu",
                                               "kernels/hw/common/b.cu"]
    assert small.modules["a"].ptx == fam.modules["a"].ptx
    thirty_two, sixteen = "1107296256", "1098907648"  # the bits of 32.0f and 16.0f
    assert thirty_two in small.modules["b"].ptx and sixteen in fam.modules["b"].ptx


def test_identical_ptx_sets_are_reported_per_arch() -> None:
    def ptx_set(target: KernelTarget, arch: str, ptx: str, compiler: str = "nvcc 13") -> PtxSet:
        return PtxSet(target=target, vendor=Vendor.NVIDIA, arch=arch,
                      compiler_version=compiler, flags=(), closure_hash="h",
                      modules={"a": PtxModule.of("a", "kernels/a.cu", ptx)}, models=())

    sets = [ptx_set(BIG, "sm_90a", "x"), ptx_set(FAM, "sm_90a", "x"),
            ptx_set(SMALL, "sm_90a", "y"), ptx_set(KernelTarget("gb", "f", "bf16"), "sm_121", "x")]
    (twin,) = identical_ptx_sets(sets)
    assert twin.path == "kernels/hw/fam/bf16" and twin.rule == "identical-ptx"
    assert "same PTX as kernels/hw/big/bf16" in twin.message
    skipped = [ptx_set(BIG, "sm_90a", "", "skipped"), ptx_set(FAM, "sm_90a", "", "skipped")]
    assert identical_ptx_sets(skipped) == []


@needs_nvcc
def test_structure_check_fails_on_a_planted_pair_of_identical_leaves(tmp_path: Path) -> None:
    """ci/kernel_structure.py on a tree where fam/bf16 specializes nothing over the baseline
    common/bf16: the identical-PTX rule fires; without the baseline it does not."""
    repo = write_tree(tmp_path / "repo")
    shutil.rmtree(repo / "kernels/hw/small")  # its define changes nothing: fam's twin
    cmd = [sys.executable, str(REPO / "ci" / "kernel_structure.py"), "--repo-root", str(repo),
           "--cache-dir", str(tmp_path / "cache"), "--jobs", "2"]  # the 2nd run compiles nothing
    clean = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert "identical PTX: 0 leaf/leaves" in clean.stdout, clean.stdout + clean.stderr
    write_baseline(repo)
    planted = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert planted.returncode != 0
    assert "FAIL kernels/hw/fam/bf16: [identical-ptx] compiles to the same PTX as " \
           "kernels/hw/common/bf16" in planted.stdout, planted.stdout + planted.stderr


def test_default_cache_dir_is_per_user_and_overridable(tmp_path: Path) -> None:
    assert default_cache_dir({"ATLAS_PTX_CACHE": str(tmp_path)}) == tmp_path
    assert default_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/atlas/ptx")
    assert default_cache_dir({}) == Path.home() / ".cache" / "atlas" / "ptx"
