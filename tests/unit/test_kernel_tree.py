"""Kernel tree: leaf enumeration, wildcard selection, TOML parsing, model-leaf selection.

`write_tree` builds the small tree the other test_kernel_* files use too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas.core.target import KernelTarget
from atlas.kernels.tree import (KernelTreeError, find_repo_root, kernel_target_for,
                                leaf_toml_paths, list_targets, load_leaf, select_model,
                                select_targets, selection_from_env)

HARDWARE = 'vendor = "nvidia"\narch = "{arch}"\n\n[compiler]\nflags = ["-O3", "-std=c++17"]\n'
FAMILY_MODEL = '[[model_types]]\nmodel_type = "qwen3"\n\n[presets.default]\ntemperature = 0.6\n'
SIZE_MODEL = ('[[model_types]]\nmodel_type = "Qwen3"\nhidden_size = 64\n\n'
              '[behavior]\ntool_parser = "hermes"\nthinking = true\n')


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def link(root: Path, rel: str, pointee: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(pointee)
    return path


def write_tree(root: Path) -> Path:
    """A tree that nvcc compiles in about a second per module:

    kernels/hw/common/  a.cu -> util.cuh;  b.cu -> b_impl.cuh;  lone.cuh (included by no one)
    kernels/hw/fam/bf16     family default (any hidden size), no shadows
    kernels/hw/big/bf16     hidden 64; shadows b.cu with a file that includes the common b.cu
    kernels/hw/small/bf16   hidden 32, no shadows, one define
    """
    k = "kernels/hw"
    write(root, f"{k}/HARDWARE.toml", HARDWARE.format(arch="sm_90a"))
    write(root, f"{k}/common/util.cuh", "#pragma once\n#define UTIL_VALUE 1.0f\n")
    # A kernel whose parameter type has internal linkage: nvcc then salts the names in the
    # anonymous namespace with a random number, so a.cu catches a non-deterministic build.
    write(root, f"{k}/common/a.cu", '#include "util.cuh"\n#include <stdint.h>\n'
          'namespace { struct Row { float a; };\n'
          '__device__ __noinline__ float twice(float v) {\n'
          '  __shared__ float s[32]; s[threadIdx.x & 31] = v; __syncthreads();\n'
          '  return 2.0f * s[0]; } }\n'
          'extern "C" __global__ void a_kernel(const Row* r, float* x) {\n'
          '  x[0] = twice(r->a + UTIL_VALUE); }\n')
    write(root, f"{k}/common/b_impl.cuh", "#pragma once\n#define B_VALUE 2.0f\n")
    write(root, f"{k}/common/b.cu", '#include "b_impl.cuh"\n'
          'extern "C" __global__ void b_kernel(float* x) { x[0] = B_VALUE; }\n')
    write(root, f"{k}/common/lone.cuh", "#pragma once\n")
    write(root, f"{k}/fam/MODEL.toml", FAMILY_MODEL)
    write(root, f"{k}/fam/bf16/KERNEL.toml", "[defines]\n")
    write(root, f"{k}/big/MODEL.toml", SIZE_MODEL)
    write(root, f"{k}/big/bf16/KERNEL.toml", "[defines]\nATLAS_HIDDEN = 64\n")
    write(root, f"{k}/big/bf16/b.cu", '#include "../../common/b.cu"\n'
          'extern "C" __global__ void b_big(float* x) { x[1] = B_VALUE; }\n')
    write(root, f"{k}/small/MODEL.toml", SIZE_MODEL.replace("64", "32"))
    write(root, f"{k}/small/bf16/KERNEL.toml", "[defines]\nATLAS_HIDDEN = 32\n")
    return root


BIG = KernelTarget("hw", "big", "bf16")
FAM = KernelTarget("hw", "fam", "bf16")
SMALL = KernelTarget("hw", "small", "bf16")


def test_list_targets_finds_every_leaf_sorted(tmp_path: Path) -> None:
    write_tree(tmp_path)
    assert list_targets(tmp_path) == [BIG, FAM, SMALL]


def test_wildcards_select_and_no_match_lists_the_leaves(tmp_path: Path) -> None:
    write_tree(tmp_path)
    assert select_targets(tmp_path, "hw", "[bs]*", "*") == [BIG, SMALL]
    with pytest.raises(KernelTreeError) as err:
        select_targets(tmp_path, "gb10", "*", "*")
    assert "hw/big/bf16" in str(err.value) and "hw/fam/bf16" in str(err.value)


def test_selection_env_defaults_to_everything() -> None:
    assert selection_from_env({}) == ("*", "*", "*")
    assert selection_from_env({"ATLAS_TARGET_MODEL": "qwen3*"}) == ("*", "qwen3*", "*")


def test_unknown_leaf_error_lists_known_leaves(tmp_path: Path) -> None:
    write_tree(tmp_path)
    with pytest.raises(KernelTreeError, match=r"no kernel leaf hw/nope/bf16; leaves: hw/big"):
        load_leaf(tmp_path, KernelTarget("hw", "nope", "bf16"))


def test_leaf_flags_are_hardware_then_sorted_defines_then_extras(tmp_path: Path) -> None:
    write_tree(tmp_path)
    write(tmp_path, "kernels/hw/big/bf16/KERNEL.toml",
          '[defines]\nATLAS_Z = 1\nATLAS_A = "x"\n[flags]\nextra = ["-Xptxas=-O3"]\n')
    leaf = load_leaf(tmp_path, BIG)
    assert leaf.flags == ["-O3", "-std=c++17", "-DATLAS_A=x", "-DATLAS_Z=1", "-Xptxas=-O3"]
    assert leaf.hardware.arch == "sm_90a"
    assert [m.model for m in leaf.models] == ["big"]
    assert leaf.models[0].spec.behavior["tool_parser"] == "hermes"


def test_bad_preset_is_rejected_with_the_file(tmp_path: Path) -> None:
    write_tree(tmp_path)
    write(tmp_path, "kernels/hw/fam/MODEL.toml",
          FAMILY_MODEL.replace("temperature = 0.6", "top_p = 0.0"))
    with pytest.raises(KernelTreeError, match=r"fam/MODEL.toml: preset 'default'"):
        load_leaf(tmp_path, FAM)


def test_exact_hidden_size_wins_over_family_default(tmp_path: Path) -> None:
    write_tree(tmp_path)
    assert select_model(tmp_path, "hw", "qwen3", 64, "bf16").target == BIG
    assert select_model(tmp_path, "hw", "Qwen3", 32, "bf16").target == SMALL
    assert select_model(tmp_path, "hw", "qwen3", 4096, "bf16").target == FAM


def test_no_matching_model_leaf_lists_what_exists(tmp_path: Path) -> None:
    write_tree(tmp_path)
    with pytest.raises(KernelTreeError) as err:
        select_model(tmp_path, "hw", "llama", 64, "bf16")
    message = str(err.value)
    assert "'llama'" in message and "hw/big/bf16 serves qwen3@64" in message
    assert "hw/fam/bf16 serves qwen3@any" in message
    with pytest.raises(KernelTreeError, match="no kernel leaf serves"):
        select_model(tmp_path, "hw", "qwen3", 64, "fp8")


def test_two_family_defaults_are_ambiguous(tmp_path: Path) -> None:
    write_tree(tmp_path)
    write(tmp_path, "kernels/hw/fam2/MODEL.toml", FAMILY_MODEL)
    write(tmp_path, "kernels/hw/fam2/bf16/KERNEL.toml", "")
    with pytest.raises(KernelTreeError,
                       match="several model directories: hw/fam/bf16, hw/fam2/bf16"):
        select_model(tmp_path, "hw", "qwen3", 100, "bf16")


def test_repo_root_is_found_from_a_subdirectory(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo")
    assert find_repo_root(repo / "kernels" / "hw" / "big") == repo
    with pytest.raises(KernelTreeError, match="no kernel tree"):
        find_repo_root(tmp_path)


def write_baseline(root: Path) -> Path:
    """Add to `write_tree`'s tree the hardware's baseline leaf `common/bf16` and a model
    directory `tiny` (hidden 16) with no leaf of its own, so the baseline runs it."""
    write(root, "kernels/hw/common/bf16/KERNEL.toml", "[defines]\n")
    write(root, "kernels/hw/tiny/MODEL.toml", SIZE_MODEL.replace("64", "16"))
    return root


BASE = KernelTarget("hw", "common", "bf16")


def test_a_model_without_its_own_leaf_runs_on_the_baseline_leaf(tmp_path: Path) -> None:
    write_baseline(write_tree(tmp_path))
    assert BASE in list_targets(tmp_path)
    assert kernel_target_for(tmp_path, "hw", "tiny", "bf16") == BASE
    assert kernel_target_for(tmp_path, "hw", "big", "bf16") == BIG  # its own leaf wins
    assert kernel_target_for(tmp_path, "hw", "tiny", "fp8") is None
    served = select_model(tmp_path, "hw", "qwen3", 16, "bf16")
    assert (served.model, served.target) == ("tiny", BASE)
    leaf = load_leaf(tmp_path, BASE)
    assert [m.model for m in leaf.models] == ["tiny"]  # big, fam, small have their own
    # the baseline's closure covers the MODEL.toml it carries, not those of other leaves
    assert leaf_toml_paths(tmp_path, BASE) == [
        "kernels/hw/HARDWARE.toml", "kernels/hw/tiny/MODEL.toml",
        "kernels/hw/common/bf16/KERNEL.toml"]


def test_selecting_a_model_selects_the_leaf_that_runs_it(tmp_path: Path) -> None:
    write_baseline(write_tree(tmp_path))
    assert select_targets(tmp_path, "*", "tiny", "*") == [BASE]
    assert select_targets(tmp_path, "*", "big", "*") == [BIG]
    assert select_targets(tmp_path, "*", "common", "*") == [BASE]


def test_a_model_leaf_needs_its_model_toml(tmp_path: Path) -> None:
    write_tree(tmp_path)
    write(tmp_path, "kernels/hw/orphan/bf16/KERNEL.toml", "")
    with pytest.raises(KernelTreeError, match="leaf hw/orphan/bf16 has no kernels/hw/orphan/"):
        load_leaf(tmp_path, KernelTarget("hw", "orphan", "bf16"))


def test_real_tree_model_leaves() -> None:
    """The shipped tree: two size leaves specialize (qwen3-30b-a3b and qwen3.5-35b-a3b: the MoE
    kernels' shapes as compile-time constants), every other model directory runs on its
    hardware's baseline leaf, and the exact hidden size picks its MODEL.toml."""
    repo = Path(__file__).absolute().parents[2]

    def pick(model_type: str, hidden: int, hw: str = "hopper") -> tuple[str, str]:
        served = select_model(repo, hw, model_type, hidden, "bf16")
        return served.model, served.target.name

    assert pick("llama", 576) == ("smollm2-135m", "hopper/common/bf16")
    assert pick("llama", 2048) == ("llama", "hopper/common/bf16")
    assert pick("qwen3", 1024) == ("qwen3-0.6b", "hopper/common/bf16")
    assert pick("qwen3", 4096) == ("qwen3-8b", "hopper/common/bf16")
    assert pick("qwen3", 2560) == ("qwen3", "hopper/common/bf16")
    assert pick("qwen3", 4096, "gb10") == ("qwen3", "gb10/common/bf16")
    assert pick("qwen3_moe", 2048) == ("qwen3-30b-a3b", "hopper/qwen3-30b-a3b/bf16")
    assert pick("qwen3_moe", 4096) == ("qwen3", "hopper/common/bf16")
    assert pick("qwen3_5_moe", 2048) == ("qwen3.5-35b-a3b", "hopper/qwen3.5-35b-a3b/bf16")
    assert pick("qwen3_5_moe", 3072) == ("qwen3_5", "hopper/common/bf16")
    assert list_targets(repo) == [KernelTarget("gb10", "common", "bf16"),
                                  KernelTarget("hopper", "common", "bf16"),
                                  KernelTarget("hopper", "qwen3-30b-a3b", "bf16"),
                                  KernelTarget("hopper", "qwen3.5-35b-a3b", "bf16")]
