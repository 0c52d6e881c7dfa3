#!/usr/bin/env python3
"""Check every CUDA kernel of every hopper PTX set on this machine's GPU.

Each `KernelCase` (atlas.runtime.kernel_check) runs on CudaBackend with fresh random inputs
and is compared twice: with its float64 oracle (the case's own tolerance) and with the
HostBackend reference kernel's exact output (tight: a couple of bf16 ulps, f32 to
accumulation-order error, integers exactly). A CUDA graph capture of a few cases is then
replayed twice and checked again. A table is printed and a JSON record written; the exit
status is non-zero if anything failed.

PTX sets come from `atlas.kernels.registry` (the build directory or $ATLAS_KERNELS_DIR), or
from `--ptx-dir`: a directory of `*.ptxset.json` artifacts or of bare `<module>.ptx` files.
Modules whose PTX is byte-identical across sets are checked once. `--backend host` runs the
same flow on the CPU (it checks this script, not kernels).

    python3 tools/gpu/check_kernels.py [--ptx-dir DIR] [--seed N] [--out FILE] [-k TEXT] [-x TEXT]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "py"))

from atlas.core.dtype import DType  # noqa: E402
from atlas.runtime.gpu import DevicePtr, GpuBackend, GpuError  # noqa: E402
from atlas.runtime.host import HostBackend  # noqa: E402
from atlas.bench.provenance import commit_label  # noqa: E402
from atlas.runtime.kernel_check import (KernelCase, all_cases, as_float, compare,  # noqa: E402
                                        execute, host_dtype)

#: allowed distance from the host reference, in units of the output's own bf16 ulp
REFERENCE_BF16_ULPS = 2
#: f32 outputs: relative error, plus a floor relative to the largest output
REFERENCE_F32_RTOL = 1e-5
REFERENCE_SCALE_FLOOR = 2.0 ** -20
#: cases captured into the graph check (first case of this many distinct modules)
GRAPH_MODULES = 3


@dataclass
class PtxSource:
    """One PTX set to check: a name and its module name -> PTX bytes."""

    name: str
    modules: dict[str, bytes]
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Row:
    set_name: str
    case: str
    module: str
    err_oracle: float
    err_reference: float
    passed: bool
    detail: str = ""
    shared_with: list[str] = field(default_factory=list)


# ---- PTX discovery ----------------------------------------------------------------------

def load_sources(ptx_dir: Path | None, hw: str) -> list[PtxSource]:
    """The PTX sets to check, from `ptx_dir` or the kernel registry, filtered to `hw`."""
    if ptx_dir is not None and not any(ptx_dir.glob("*.ptxset.json")):
        mods = {p.stem: p.read_bytes() for p in sorted(ptx_dir.glob("*.ptx"))}
        if not mods:
            raise SystemExit(f"{ptx_dir}: no *.ptxset.json or *.ptx files")
        return [PtxSource(f"ptx-dir:{ptx_dir.name}", mods)]
    from atlas.kernels.registry import PtxRegistry, load_registry

    registry = PtxRegistry.load(ptx_dir) if ptx_dir is not None else load_registry()
    out = []
    for target in registry.targets():
        if target.hw != hw:
            continue
        ps = registry.select_target(target.hw, target.model, target.quant)
        if ps.skipped:
            raise SystemExit(f"{target}: PTX set was built with ATLAS_SKIP_BUILD=1 (no PTX); "
                             "rebuild with nvcc (atlas kernels build)")
        out.append(PtxSource(target.name, {n: m.image() for n, m in ps.modules.items()},
                             {"arch": ps.arch, "closure_hash": ps.closure_hash,
                              "compiler": ps.compiler_version}))
    if not out:
        raise SystemExit(f"no {hw} PTX sets in {registry.origin}")
    return out


def module_digest(ptx: bytes) -> str:
    return hashlib.sha256(ptx.rstrip(b"\0")).hexdigest()


# ---- comparisons ------------------------------------------------------------------------

def compare_to_reference(case: KernelCase, got: dict[str, np.ndarray],
                         ref: dict[str, np.ndarray]) -> tuple[float, str]:
    """(max abs error, problems) of a device run against the host reference's output."""
    worst, problems = 0.0, []
    for name, spec in case.outputs.items():
        g, r = got[name], ref[name]
        mask = case.compare_mask.get(name)
        slack = case.reference_slack.get(name, 0.0)
        if mask is not None:
            g, r = g[mask], r[mask]
            slack = slack[mask] if isinstance(slack, np.ndarray) else slack
        if spec.dtype in (DType.I32, DType.U8):
            bad = g != r
            err = float(np.abs(g.astype(np.int64) - r.astype(np.int64)).max()) if g.size else 0.0
        else:
            gf, rf = as_float(g, spec.dtype), as_float(r, spec.dtype)
            if np.isnan(gf).any() != np.isnan(rf).any() or np.isnan(gf).any():
                problems.append(f"{name}: NaN vs reference")
                worst = float("nan")
                continue
            diff = np.abs(gf - rf)
            err = float(diff.max()) if diff.size else 0.0
            floor = (REFERENCE_SCALE_FLOOR * (float(np.abs(rf).max()) if rf.size else 0.0)
                     + case.reference_abs_tol + slack)
            if spec.precision is DType.BF16:
                tol = REFERENCE_BF16_ULPS * bf16_ulp(np.maximum(np.abs(gf), np.abs(rf))) + floor
            else:
                tol = REFERENCE_F32_RTOL * np.abs(rf) + floor
            bad = diff > tol
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            problems.append(f"{name}: {int(bad.sum())}/{bad.size} differ from the reference "
                            f"(first at {idx})")
        worst = max(worst, err)
    return worst, "; ".join(problems)


def bf16_ulp(magnitude: np.ndarray) -> np.ndarray:
    """The spacing of bf16 values at each magnitude (8 significant bits)."""
    m = np.maximum(magnitude, 2.0 ** -126)
    return np.exp2(np.floor(np.log2(m)) - 7)


# ---- running ----------------------------------------------------------------------------

def healthy(device: GpuBackend) -> bool:
    """False once the device context is unusable (a sticky error such as an illegal address)."""
    try:
        device.synchronize()
        return True
    except GpuError:
        return False


def check_cases(device: GpuBackend, cases: list[KernelCase], references: dict[str, dict],
                set_name: str, load_failures: dict[str, str]) -> tuple[list[Row], bool]:
    """One row per case; stops launching (returns False) once the context has died, since
    every later launch would fail for that one case's fault."""
    rows = []
    for case in cases:
        if case.module in load_failures:
            rows.append(Row(set_name, case.name, case.module, float("nan"), float("nan"),
                            False, f"module load failed: {load_failures[case.module]}"))
            continue
        try:
            got = execute(device, case)
        except Exception as exc:  # recorded as this case's failure, never dropped
            rows.append(Row(set_name, case.name, case.module, float("nan"), float("nan"),
                            False, f"{type(exc).__name__}: {exc}"))
            if isinstance(exc, GpuError) and not healthy(device):
                return rows, False
            continue
        oracle = compare(case, got, case.oracle(case.inputs))
        ref_err, ref_problems = compare_to_reference(case, got, references[case.name])
        err_oracle = max(oracle.max_abs_err.values(), default=0.0)
        detail = "; ".join(p for p in (oracle.detail, ref_problems) if p)
        rows.append(Row(set_name, case.name, case.module, err_oracle, ref_err,
                        oracle.passed and not ref_problems, detail))
    return rows, True


def open_device(kind: str, src: PtxSource) -> tuple[GpuBackend, dict[str, str]]:
    """The device for one set, loading modules one by one so a bad module fails only its
    own cases; returns the device and module -> load error."""
    if kind == "host":
        return HostBackend(), {}
    from atlas.runtime.cuda import CudaBackend

    device = CudaBackend()
    failures = {}
    for name, ptx in src.modules.items():
        try:
            device.load_module(name, ptx)
        except GpuError as exc:
            failures[name] = str(exc)
    return device, failures


def _prepare(backend: GpuBackend, case: KernelCase) -> dict[str, DevicePtr]:
    ptrs = {name: backend.upload(arr) for name, arr in case.inputs.items()}
    for name, spec in case.outputs.items():
        if name not in ptrs:
            ptrs[name] = backend.alloc(max(spec.dtype.nbytes(int(np.prod(spec.shape))), 1))
    return ptrs


def _reset(backend: GpuBackend, case: KernelCase, ptrs: dict[str, DevicePtr]) -> None:
    """Restore in/out buffers to their inputs and poison pure outputs (0xFF = NaN)."""
    for name, spec in case.outputs.items():
        if name in case.inputs:
            backend.copy_h2d(ptrs[name], np.ascontiguousarray(case.inputs[name]))
        else:
            backend.memset(ptrs[name], 0xFF, max(spec.dtype.nbytes(int(np.prod(spec.shape))), 1))


def _read(backend: GpuBackend, case: KernelCase, ptrs: dict[str, DevicePtr]) -> dict:
    return {name: backend.download(ptrs[name], host_dtype(spec.dtype), spec.shape)
            for name, spec in case.outputs.items()}


def graph_check(device: GpuBackend, cases: list[KernelCase], set_name: str) -> Row | None:
    """Capture one case of each of a few modules, and every case marked `graph`, into a
    graph, replay it twice, check."""
    picked: list[KernelCase] = []
    modules: set[str] = set()
    for case in cases:
        if not case.capturable:
            continue
        if case.module not in modules and len(modules) < GRAPH_MODULES:
            modules.add(case.module)
            picked.append(case)
        elif case.graph:
            picked.append(case)
    if not picked:
        return None
    label = "graph x2: " + ", ".join(c.name for c in picked)
    stream = device.create_stream()
    bufs = [_prepare(device, c) for c in picked]
    try:
        for c, p in zip(picked, bufs):  # warm-up resolves every kernel outside the capture
            _reset(device, c, p)
            c.run(device, stream, p)
        device.synchronize(stream)
        device.begin_capture(stream)
        try:
            for c, p in zip(picked, bufs):
                c.run(device, stream, p)
        finally:
            graph = device.end_capture(stream)
        worst, problems = 0.0, []
        for replay in (1, 2):
            for c, p in zip(picked, bufs):
                _reset(device, c, p)
            device.launch_graph(graph, stream)
            device.synchronize(stream)
            for c, p in zip(picked, bufs):
                res = compare(c, _read(device, c, p), c.oracle(c.inputs))
                worst = max([worst, *res.max_abs_err.values()])
                if not res.passed:
                    problems.append(f"replay {replay} {c.name}: {res.detail}")
        device.destroy_graph(graph)
        return Row(set_name, label, "graph", worst, float("nan"), not problems,
                   "; ".join(problems))
    except Exception as exc:  # recorded as the graph check's failure
        return Row(set_name, label, "graph", float("nan"), float("nan"), False,
                   f"{type(exc).__name__}: {exc}")
    finally:
        for p in bufs:
            for ptr in p.values():
                device.free(ptr)


# ---- reporting --------------------------------------------------------------------------

def git_commit() -> str:
    return commit_label(REPO)


def nvidia_driver_version() -> str | None:
    """The kernel driver's version as nvidia-smi reports it (the CUDA API only gives the
    CUDA version it supports)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             text=True, capture_output=True, check=True, timeout=30).stdout
        return out.strip().splitlines()[0] if out.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def fmt_err(x: float) -> str:
    return "-" if x != x else f"{x:.3e}"


def print_table(rows: list[Row]) -> None:
    width = max([len(r.case) for r in rows] + [4])
    set_width = max([len(r.set_name) for r in rows] + [3])
    print(f"{'set':<{set_width}}  {'case':<{width}}  {'vs oracle':>10}  {'vs ref':>10}  result")
    for r in rows:
        extra = f"  (+{len(r.shared_with)} sets, same PTX)" if r.shared_with else ""
        print(f"{r.set_name:<{set_width}}  {r.case:<{width}}  {fmt_err(r.err_oracle):>10}  "
              f"{fmt_err(r.err_reference):>10}  {'PASS' if r.passed else 'FAIL'}{extra}")
        if r.detail and not r.passed:
            print(f"{'':<{set_width}}    -> {r.detail}")


def _json_float(x: float) -> float | None:
    return None if x != x else x


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptx-dir", type=Path, help="*.ptxset.json or *.ptx files to check")
    ap.add_argument("--hw", default="hopper", help="hardware directory of the sets to check")
    ap.add_argument("--seed", type=int, help="input seed (default: from the clock)")
    ap.add_argument("--out", type=Path, help="JSON result path "
                    "(default bench/results/gpu_check-<date>-<commit>.json)")
    ap.add_argument("-k", dest="select", action="append", default=[],
                    help="only cases whose name contains this text (repeatable: any of them)")
    ap.add_argument("-m", dest="modules", action="append",
                    help="only cases of this kernel module (repeatable; default: all)")
    ap.add_argument("-x", dest="exclude", action="append", default=[],
                    help="skip cases whose name contains this text (repeatable)")
    ap.add_argument("--backend", choices=("cuda", "host"), default="cuda",
                    help="host runs the flow on the CPU (a self-test of this script)")
    args = ap.parse_args(argv)

    seed = args.seed if args.seed is not None else int(time.time()) % 2**31
    cases = [c for c in all_cases(seed, args.modules)
             if (not args.select or any(k in c.name for k in args.select))
             and not any(x in c.name for x in args.exclude)]
    duplicates = sorted({c.name for c in cases if [d.name for d in cases].count(c.name) > 1})
    if duplicates:
        raise SystemExit(f"case names must be unique: {', '.join(duplicates)}")
    print(f"seed {seed}: {len(cases)} cases")
    host = HostBackend()
    references = {c.name: execute(host, c) for c in cases}

    if args.backend == "host":
        sources = [PtxSource("host", {m: b"" for m in sorted({c.module for c in cases})})]
    else:
        sources = load_sources(args.ptx_dir, args.hw)

    rows: list[Row] = []
    checked: dict[tuple[str, str], Row] = {}  # (case, module sha) -> first row
    info: dict[str, Any] = {"backend": args.backend}
    for src in sources:
        started = time.monotonic()
        device, load_failures = open_device(args.backend, src)
        if args.backend == "cuda" and "device" not in info:
            info["device"] = {**device.device_info(),  # type: ignore[attr-defined]
                              "nvidia_driver": nvidia_driver_version()}
            print(f"device: {info['device']}")
        digests = {m: module_digest(p) for m, p in src.modules.items()}
        todo = []
        for case in cases:
            if case.module not in src.modules:
                continue
            first = checked.get((case.name, digests[case.module]))
            if first is not None:
                first.shared_with.append(src.name)
            else:
                todo.append(case)
        new_rows, alive = check_cases(device, todo, references, src.name, load_failures)
        for case, row in zip(todo, new_rows):
            checked[(case.name, digests[case.module])] = row
        rows.extend(new_rows)
        if not alive:
            rows.append(Row(src.name, "ABORTED: device context lost", "-", float("nan"),
                            float("nan"), False, f"after {new_rows[-1].case}; later cases "
                            "and sets were not run (exclude it with -x to check the rest)"))
            break
        usable = [c for c in (todo or cases) if c.module in src.modules
                  and c.module not in load_failures]
        g = graph_check(device, usable, src.name)
        rows.extend([g] if g else [])
        missing = sorted({c.module for c in cases} - set(src.modules))
        if missing:
            print(f"{src.name}: no module for cases of {', '.join(missing)}")
        try:
            device.close()
        except GpuError as exc:
            print(f"{src.name}: closing the device failed: {exc}")
        print(f"{src.name}: {len(todo)} cases run in {time.monotonic() - started:.1f}s")

    print_table(rows)
    failed = [r for r in rows if not r.passed]
    commit = git_commit()
    now = dt.datetime.now(dt.timezone.utc)
    out = args.out or REPO / "bench" / "results" / \
        f"gpu_check-{now.strftime('%Y%m%d-%H%M%S')}-{commit}.json"
    record = {
        "date": now.isoformat(timespec="seconds"), "git_commit": commit, "seed": seed,
        **info,
        "sets": {s.name: {**s.meta, "modules": sorted(s.modules)} for s in sources},
        "cases": [{"set": r.set_name, "case": r.case, "module": r.module,
                   "max_abs_err_oracle": _json_float(r.err_oracle),
                   "max_abs_err_reference": _json_float(r.err_reference),
                   "passed": r.passed, "detail": r.detail, "same_ptx_in": r.shared_with}
                  for r in rows],
        "passed": not failed,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"\n{len(rows) - len(failed)}/{len(rows)} passed; wrote {out}")
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
