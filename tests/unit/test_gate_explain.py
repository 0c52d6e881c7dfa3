"""The advisory summary: categories, kernel reach, and every target listed (touched or not)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from atlas.gate.explain import CATEGORIES, categorize, explain, reach
from atlas_cli.main import cli

REPO = Path(__file__).resolve().parents[2]


def test_categorize_puts_each_path_in_its_first_matching_category() -> None:
    groups = categorize([
        "py/atlas/gate/coverage.py", "kernels/hopper/q/BENCH.toml", "kernels/hopper/common/a.cu",
        "py/atlas/model/engine.py", "tests/unit/test_a.py", "docs/a.md", "README.md",
        "ci/lint.sh", ".ci/run", "kernels2/x", "py/atlas/gate/explain.py",
    ])
    assert list(groups) == list(CATEGORIES)  # every category hit, in order
    assert groups[CATEGORIES[0]] == ["py/atlas/gate/coverage.py"]
    assert groups[CATEGORIES[1]] == ["kernels/hopper/q/BENCH.toml"]
    assert groups[CATEGORIES[2]] == ["kernels/hopper/common/a.cu"]
    assert groups[CATEGORIES[5]] == ["README.md", "docs/a.md"]
    assert groups[CATEGORIES[7]] == ["kernels2/x", "py/atlas/gate/explain.py"]


def test_reach_maps_kernel_paths_to_the_targets_compiling_them() -> None:
    closures = {"hopper/a/bf16": frozenset({"kernels/hopper/common/x.cuh", "k/a"}),
                "hopper/b/bf16": frozenset({"k/b"})}
    assert reach(["kernels/hopper/common/x.cuh", "kernels/hopper/common/unused.cu",
                  "docs/x.md"], closures) == {
        "kernels/hopper/common/unused.cu": [],
        "kernels/hopper/common/x.cuh": ["hopper/a/bf16"]}


def test_summary_lists_untouched_and_unresolvable_targets() -> None:
    closures = {"hopper/a/bf16": frozenset({"kernels/hopper/common/x.cuh"}),
                "hopper/b/bf16": frozenset()}
    lines = explain("main", ["kernels/hopper/common/x.cuh"], closures,
                    {"gb10/c/bf16": "missing include"}).lines()
    assert "  kernels/hopper/common/x.cuh -> hopper/a/bf16" in lines
    assert "  hopper/a/bf16: touched" in lines
    assert "  hopper/b/bf16: untouched" in lines
    assert "  gb10/c/bf16: closure unresolvable: missing include" in lines
    assert lines[-1].startswith("path floor alone would re-open: concurrency-sweep")


def test_explain_runs_on_this_repository() -> None:
    result = CliRunner().invoke(cli, ["gate", "--root", str(REPO), "explain", "--base", "HEAD"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("advisory summary of changes since HEAD")
    assert "every target in the tree:" in result.output
