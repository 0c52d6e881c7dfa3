"""tools/gpu/check_kernels.py: its reference tolerance (the GPU pass/fail judge) and its whole
flow, run on the host backend."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from atlas.core.dtype import DType
from atlas.core.numerics import f32_to_bf16_bits
from atlas.runtime.gpu import GpuError
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import KernelCase, OutputSpec, all_cases, compare, execute

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu" / "check_kernels.py"


@pytest.fixture(scope="module")
def ck():
    spec = importlib.util.spec_from_file_location("check_kernels", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_kernels"] = module  # dataclasses resolve annotations through it
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["check_kernels"]


@pytest.fixture(scope="module")
def small_cases() -> list[KernelCase]:
    return all_cases(0, ("argmax", "embedding"))


def _case(dtype: DType, shape: tuple[int, ...]) -> KernelCase:
    return KernelCase("c", "m", {}, {"out": OutputSpec(dtype, shape)}, lambda *a: None,
                      lambda inputs: {})


def _bf16(values) -> np.ndarray:
    return f32_to_bf16_bits(np.asarray(values, dtype=np.float32))


def test_bf16_outputs_may_differ_by_two_ulps_not_three(ck) -> None:
    case = _case(DType.BF16, (3,))
    ref = _bf16([1.0, -3.0, 0.001])
    two_ulps = _bf16([1.0 + 2 * 2**-7, -3.0 - 2 * 2**-6, 0.001])
    three_ulps = _bf16([1.0 + 3 * 2**-7, -3.0, 0.001])
    err, problems = ck.compare_to_reference(case, {"out": two_ulps}, {"out": ref})
    assert not problems and err == pytest.approx(2 * 2**-6)
    err, problems = ck.compare_to_reference(case, {"out": three_ulps}, {"out": ref})
    assert "1/3 differ" in problems and err == pytest.approx(3 * 2**-7)


def test_reference_slack_widens_only_its_elements(ck) -> None:
    """A per-element slack (a gate sum near a bf16 tie: glu_flip_slack) lets that element
    move by it; its neighbours keep the two-ulp bound, also under a compare mask."""
    case = _case(DType.BF16, (3,))
    case.reference_slack = {"out": np.array([0.0, 0.25, 0.0])}
    ref = _bf16([1.0, 1.0, 1.0])
    _, problems = ck.compare_to_reference(case, {"out": _bf16([1.0, 1.25, 1.0])}, {"out": ref})
    assert not problems
    _, problems = ck.compare_to_reference(case, {"out": _bf16([1.25, 1.0, 1.0])}, {"out": ref})
    assert "1/3 differ" in problems
    case.compare_mask = {"out": np.array([False, True, True])}
    _, problems = ck.compare_to_reference(case, {"out": _bf16([9.0, 1.25, 1.0])}, {"out": ref})
    assert not problems


def test_glu_flip_slack_covers_exactly_the_sums_near_a_tie() -> None:
    """A gate sum right at a bf16 rounding tie may round either way on the device: act's slack
    there is the GLU's change over that ulp; a sum far from any tie gets none."""
    from atlas.runtime.cases.gemv import bf16_values, geglu_oracle, glu_flip_slack

    # x = [1, 1, 0...]: each sum is w's first two columns, exact in float64. Gate 0:
    # -3 - 2^-7, the tie between bf16 -3 and -3 - 2^-6; gate 1: 1 + 2^-9, a quarter ulp from
    # 1 (far from a tie); both ups 1
    k = 8
    x = np.zeros((1, k), np.float32)
    x[0, :2] = 1.0
    w = np.zeros((4, k), np.float32)
    w[:, 0] = [-3.0, 1.0, 1.0, 1.0]
    w[:, 1] = [-2**-7, 2**-9, 0.0, 0.0]
    slack = glu_flip_slack(bf16_values(_bf16(x)), bf16_values(_bf16(w)), geglu_oracle)
    assert slack.shape == (1, 2)
    assert slack[0, 1] == 0.0
    assert slack[0, 0] > 0.0


def test_nan_and_integer_mismatches_fail(ck) -> None:
    case = _case(DType.BF16, (2,))
    _, problems = ck.compare_to_reference(case, {"out": np.array([0x7FC0, 0], np.uint16)},
                                          {"out": np.array([0x3F80, 0], np.uint16)})
    assert "NaN" in problems
    ints = _case(DType.I32, (3,))
    err, problems = ck.compare_to_reference(ints, {"out": np.array([1, 2, 4], np.int32)},
                                            {"out": np.array([1, 2, 3], np.int32)})
    assert err == 1.0 and "1/3 differ" in problems


def test_f32_outputs_allow_accumulation_order_error_only(ck) -> None:
    case = _case(DType.FP32, (2,))
    ref = np.array([100.0, 1.0], np.float32)
    _, ok = ck.compare_to_reference(case, {"out": ref * np.float32(1 + 2e-6)}, {"out": ref})
    _, bad = ck.compare_to_reference(case, {"out": ref * np.float32(1 + 1e-3)}, {"out": ref})
    assert not ok and bad


def test_host_flow_checks_cases_and_a_graph_and_writes_json(ck, tmp_path: Path,
                                                           capsys) -> None:
    out = tmp_path / "result.json"
    rc = ck.main(["--backend", "host", "--seed", "3", "-m", "argmax", "--out", str(out)])
    assert rc == 0
    record = json.loads(out.read_text())
    names = [c["case"] for c in record["cases"]]
    assert record["passed"] and record["seed"] == 3 and record["git_commit"]
    assert any(n.startswith("argmax") for n in names)
    assert any(n.startswith("graph x2") for n in names)
    assert "PASS" in capsys.readouterr().out


def test_ptx_dir_of_bare_modules(ck, tmp_path: Path) -> None:
    (tmp_path / "gemv.ptx").write_bytes(b".version 9.0")
    (tmp_path / "argmax.ptx").write_bytes(b".version 9.0")
    (source,) = ck.load_sources(tmp_path, "hopper")
    assert sorted(source.modules) == ["argmax", "gemv"]


class _DyingBackend(HostBackend):
    """Every launch fails with a sticky error, as after an illegal address on a real GPU."""

    def launch(self, *args, **kwargs):
        raise GpuError("cuLaunchKernel failed: CUDA_ERROR_ILLEGAL_ADDRESS")

    def synchronize(self, stream=None):
        raise GpuError("cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS")


def test_a_dead_context_stops_the_run_after_the_guilty_case(ck, small_cases) -> None:
    cases = small_cases[:3]
    rows, alive = ck.check_cases(_DyingBackend(), cases, {}, "set", {})
    assert not alive and len(rows) == 1 and not rows[0].passed
    assert "ILLEGAL_ADDRESS" in rows[0].detail and rows[0].case == cases[0].name


def test_a_module_that_failed_to_load_fails_only_its_cases(ck, small_cases) -> None:
    cases = small_cases
    host = HostBackend()
    refs = {c.name: execute(host, c) for c in cases}
    rows, alive = ck.check_cases(host, cases, refs, "set", {"argmax": "CUDA_ERROR_INVALID_PTX"})
    assert alive
    assert all(r.passed == (r.module == "embedding") for r in rows)
    assert all("INVALID_PTX" in r.detail for r in rows if r.module == "argmax")


def test_same_bits_outputs_fail_on_one_differing_bit() -> None:
    """`same_bits` pairs are judged bit for bit, on top of (and tighter than) the oracle's
    tolerance: a one-ulp difference that every tolerance accepts fails the case."""
    spec = OutputSpec(DType.FP32, (3,))
    case = KernelCase("twins", "argmax", {}, {"a": spec, "b": spec}, lambda *_: None,
                      lambda _: {"a": np.ones(3), "b": np.ones(3)}, same_bits=(("a", "b"),))
    a = np.ones(3, np.float32)
    b = a.copy()
    b[1] = np.nextafter(np.float32(1), np.float32(2))
    assert compare(case, {"a": a, "b": a.copy()}, case.oracle({})).passed
    result = compare(case, {"a": a, "b": b}, case.oracle({}))
    assert not result.passed and "a vs b: 1 bytes differ" in result.detail


def test_graph_check_skips_cases_that_synchronize_in_their_run(ck) -> None:
    """A case whose run() synchronizes (the verification row-invariance cases) would
    invalidate the device's capture (gpu20): the graph check picks the module's next case."""
    every = all_cases(0, ("attention", "argmax"))
    cases = ([c for c in every if c.name.startswith("row invariance verify")]
             + [c for c in every if c.module == "argmax"])
    assert cases and not cases[0].capturable
    row = ck.graph_check(HostBackend(), cases, "host")
    assert row is not None and row.passed
    assert "row invariance verify" not in row.case
    assert "argmax" in row.case
