"""One definition of a target's sources: modules, include closure, closure hash, and the
structural rules (identical shadows, private copies, symlinks)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from atlas.kernels.sources import (SourceError, closure_hash, closure_paths, include_closure,
                                   leaf_modules)
from atlas.kernels.structure import check_tree, parse_ptxas_spills
from atlas.kernels.tree import list_targets
from test_kernel_tree import BIG, FAM, SMALL, link, write, write_tree

FLAGS = ["-O3"]


def hashes(root: Path) -> dict[str, str]:
    return {t.name: closure_hash(root, t, "sm_90a", "nvcc 13.0", FLAGS) for t in list_targets(root)}


def test_leaf_file_shadows_common_and_renames_apply(tmp_path: Path) -> None:
    write_tree(tmp_path)
    modules = leaf_modules(tmp_path, BIG)
    assert {n: p.relative_to(tmp_path).as_posix() for n, p in modules.items()} == {
        "a": "kernels/hw/common/a.cu", "b": "kernels/hw/big/bf16/b.cu"}
    write(tmp_path, "kernels/hw/fam/bf16/KERNEL.toml", '[modules]\na = "alpha"\n')
    assert list(leaf_modules(tmp_path, FAM)) == ["alpha", "b"]


def test_rename_of_a_missing_stem_or_a_clash_is_an_error(tmp_path: Path) -> None:
    write_tree(tmp_path)
    write(tmp_path, "kernels/hw/fam/bf16/KERNEL.toml", '[modules]\nnope = "x"\n')
    with pytest.raises(SourceError, match="renames nope"):
        leaf_modules(tmp_path, FAM)
    write(tmp_path, "kernels/hw/fam/bf16/KERNEL.toml", '[modules]\na = "b"\n')
    with pytest.raises(SourceError, match="module 'b' comes from both"):
        leaf_modules(tmp_path, FAM)


def test_closure_follows_quoted_includes_not_angle_brackets(tmp_path: Path) -> None:
    write_tree(tmp_path)
    assert sorted(include_closure(tmp_path, "kernels/hw/common/a.cu")) == [
        "kernels/hw/common/a.cu", "kernels/hw/common/util.cuh"]


def test_closure_paths_cover_modules_headers_and_tomls_not_bench(tmp_path: Path) -> None:
    write_tree(tmp_path)
    write(tmp_path, "kernels/hw/big/BENCH.toml", "benchmarks = []\n")
    assert closure_paths(tmp_path, BIG) == [
        "kernels/hw/HARDWARE.toml", "kernels/hw/big/MODEL.toml", "kernels/hw/big/bf16/KERNEL.toml",
        "kernels/hw/big/bf16/b.cu", "kernels/hw/common/a.cu", "kernels/hw/common/b.cu",
        "kernels/hw/common/b_impl.cuh", "kernels/hw/common/util.cuh"]


def test_editing_a_header_changes_exactly_the_targets_that_include_it(tmp_path: Path) -> None:
    write_tree(tmp_path)
    # A second hardware dir whose a.cu does not include util.cuh: unaffected by the edit.
    write(tmp_path, "kernels/hw2/HARDWARE.toml", 'vendor = "nvidia"\narch = "sm_121"\n')
    write(tmp_path, "kernels/hw2/common/a.cu", 'extern "C" __global__ void a_kernel() {}\n')
    write(tmp_path, "kernels/hw2/fam/MODEL.toml", '[[model_types]]\nmodel_type = "qwen3"\n')
    write(tmp_path, "kernels/hw2/fam/bf16/KERNEL.toml", "")
    before = hashes(tmp_path)
    write(tmp_path, "kernels/hw/common/util.cuh", "#pragma once\n#define UTIL_VALUE 3.0f\n")
    after = hashes(tmp_path)
    assert {t for t in before if before[t] != after[t]} == {"hw/big/bf16", "hw/fam/bf16",
                                                            "hw/small/bf16"}
    # A header no module includes reaches no target.
    write(tmp_path, "kernels/hw/common/lone.cuh", "#pragma once\n// edited\n")
    assert hashes(tmp_path) == after


def test_shadow_including_its_own_common_file_is_still_covered(tmp_path: Path) -> None:
    """big/bf16/b.cu shadows common/b.cu but compiles it via #include "../../common/b.cu";
    editing the common file (or its header) must change big's hash."""
    write_tree(tmp_path)
    before = hashes(tmp_path)
    write(tmp_path, "kernels/hw/common/b_impl.cuh", "#pragma once\n#define B_VALUE 5.0f\n")
    mid = hashes(tmp_path)
    assert mid["hw/big/bf16"] != before["hw/big/bf16"]
    write(tmp_path, "kernels/hw/common/b.cu", '#include "b_impl.cuh"\n// edited\n')
    assert hashes(tmp_path)["hw/big/bf16"] != mid["hw/big/bf16"]


def test_hash_depends_on_arch_compiler_flags_and_leaf_tomls(tmp_path: Path) -> None:
    write_tree(tmp_path)
    base = closure_hash(tmp_path, BIG, "sm_90a", "v1", ["-O3"])
    assert base == closure_hash(tmp_path, BIG, "sm_90a", "v1", ["-O3"])
    assert len({base, closure_hash(tmp_path, BIG, "sm_121", "v1", ["-O3"]),
                closure_hash(tmp_path, BIG, "sm_90a", "v2", ["-O3"]),
                closure_hash(tmp_path, BIG, "sm_90a", "v1", ["-O2"]),
                closure_hash(tmp_path, BIG, "sm_90a", "v1", ["-O3", ""])}) == 5
    model_toml = tmp_path / "kernels/hw/big/MODEL.toml"
    model_toml.write_text("# edited\n" + model_toml.read_text())
    assert closure_hash(tmp_path, BIG, "sm_90a", "v1", ["-O3"]) != base
    edited = closure_hash(tmp_path, BIG, "sm_90a", "v1", ["-O3"])
    write(tmp_path, "kernels/hw/big/BENCH.toml", "benchmarks = []\n")
    assert closure_hash(tmp_path, BIG, "sm_90a", "v1", ["-O3"]) == edited


def test_hash_is_sha256_of_an_independent_encoding(tmp_path: Path) -> None:
    """Recompute the documented encoding by hand for a leaf with one module."""
    write(tmp_path, "kernels/h/HARDWARE.toml", 'vendor = "nvidia"\narch = "sm_90a"\n')
    write(tmp_path, "kernels/h/common/k.cu", "// k\n")
    write(tmp_path, "kernels/h/m/MODEL.toml", '[[model_types]]\nmodel_type = "x"\n')
    write(tmp_path, "kernels/h/m/q/KERNEL.toml", "")
    expected = hashlib.sha256()
    for tag, data in [(b"schema", b"atlas-closure-v1"), (b"arch", b"sm_90a"), (b"compiler", b"c"),
                      (b"flag", b"-O3")] + [
            item for rel in sorted(["kernels/h/HARDWARE.toml", "kernels/h/common/k.cu",
                                    "kernels/h/m/MODEL.toml", "kernels/h/m/q/KERNEL.toml"])
            for item in [(b"path", rel.encode()), (b"bytes", (tmp_path / rel).read_bytes())]]:
        expected.update(tag + b"\0" + str(len(data)).encode() + b"\0" + data)
    target = list_targets(tmp_path)[0]
    assert closure_hash(tmp_path, target, "sm_90a", "c", ["-O3"]) == expected.hexdigest()


def test_unresolvable_include_is_a_hard_error_naming_file_and_line(tmp_path: Path) -> None:
    write_tree(tmp_path)
    write(tmp_path, "kernels/hw/small/bf16/a.cu", '// shadow\n\n#include "missing.cuh"\n')
    with pytest.raises(SourceError, match=r'kernels/hw/small/bf16/a.cu:3: #include "missing.cuh"'):
        closure_hash(tmp_path, SMALL, "sm_90a", "c", [])
    write(tmp_path, "kernels/hw/small/bf16/a.cu", '#include "../../../../../../etc/passwd"\n')
    with pytest.raises(SourceError, match="outside the repository"):
        closure_hash(tmp_path, SMALL, "sm_90a", "c", [])


def test_symlinked_file_resolves_includes_beside_the_link_like_nvcc(tmp_path: Path) -> None:
    """A symlink's quoted includes resolve in the link's directory (what nvcc compiles), and
    closure_paths also names the link's target so an edit there reaches this leaf."""
    write_tree(tmp_path)
    write(tmp_path, "kernels/hw/small/bf16/util.cuh", "#define UTIL_VALUE 7.0f\n")
    link(tmp_path, "kernels/hw/small/bf16/a.cu", "../../common/a.cu")
    closure = include_closure(tmp_path, "kernels/hw/small/bf16/a.cu")
    assert sorted(closure) == ["kernels/hw/small/bf16/a.cu", "kernels/hw/small/bf16/util.cuh"]
    common_a = (tmp_path / "kernels/hw/common/a.cu").read_bytes()
    assert closure["kernels/hw/small/bf16/a.cu"] == common_a
    assert "kernels/hw/common/a.cu" in closure_paths(tmp_path, SMALL)


def test_identical_shadow_is_rejected(tmp_path: Path) -> None:
    write_tree(tmp_path)
    assert check_tree(tmp_path) == []
    write(tmp_path, "kernels/hw/small/bf16/a.cu", (tmp_path / "kernels/hw/common/a.cu").read_text())
    rules = {(v.path, v.rule) for v in check_tree(tmp_path)}
    assert ("kernels/hw/small/bf16/a.cu", "identical-shadow") in rules


def test_private_identical_shadows_rejected_symlinked_ones_accepted(tmp_path: Path) -> None:
    write_tree(tmp_path)
    shadow = (tmp_path / "kernels/hw/big/bf16/b.cu").read_text()
    write(tmp_path, "kernels/hw/small/bf16/b.cu", shadow)
    assert [(v.path, v.rule) for v in check_tree(tmp_path)] == [
        ("kernels/hw/small/bf16/b.cu", "private-copy")]
    (tmp_path / "kernels/hw/small/bf16/b.cu").unlink()
    link(tmp_path, "kernels/hw/small/bf16/b.cu", "../../big/bf16/b.cu")
    assert check_tree(tmp_path) == []


def test_absolute_dangling_and_directory_symlinks_are_rejected(tmp_path: Path) -> None:
    write_tree(tmp_path)
    link(tmp_path, "kernels/hw/small/bf16/x.cu", str(tmp_path / "kernels/hw/common/a.cu"))
    link(tmp_path, "kernels/hw/small/bf16/y.cu", "../../common/gone.cu")
    link(tmp_path, "kernels/hw/small/bf16/dir", "../../common")
    messages = {v.path: v.message for v in check_tree(tmp_path) if v.rule == "symlink"}
    assert messages.keys() == {"kernels/hw/small/bf16/x.cu", "kernels/hw/small/bf16/y.cu",
                               "kernels/hw/small/bf16/dir"}
    assert "absolute" in messages["kernels/hw/small/bf16/x.cu"]
    assert "dangling" in messages["kernels/hw/small/bf16/y.cu"]


def test_parse_ptxas_spills_lists_only_spilling_functions() -> None:
    report = """ptxas info    : Compiling entry function 'good' for 'sm_90a'
ptxas info    : Function properties for good
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 20 registers, used 0 barriers
ptxas info    : Function properties for bad
    64 bytes stack frame, 48 bytes spill stores, 40 bytes spill loads
"""
    spills = parse_ptxas_spills(report)
    assert [(s.function, s.stores, s.loads) for s in spills] == [("bad", 48, 40)]


def test_real_tree_passes_structure_rules() -> None:
    repo = Path(__file__).absolute().parents[2]
    assert [str(v) for v in check_tree(repo)] == []
