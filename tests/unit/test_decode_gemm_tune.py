"""The decode GEMM's tuner (ops/decode_gemm_tune.py): the selection rule (hysteresis against
the model's pick, ties to the smallest split and one warpgroup), key construction, the table
file (round trip, merge, corrupt and unwritable files), and decode_gemm's routing through it
(a table entry decides the launched entry point and block; a miss times every candidate on a
mock device whose event clock charges each launch a chosen cost; a miss inside a capture runs
the model's pick; the switch and device-less backends never tune). The timing on the H200 is
tools/gpu/tune_decode_gemm.py."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from atlas.core.cold_reads import rotation_copies
from atlas.runtime.gpu import EventHandle, GpuError, Stream
from atlas.runtime.host import HostBackend
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, decode_gemm_tune as tune, matmul_decode
from atlas.runtime.ops.decode_gemm_tune import TuneEntry, TuneKey, TuneTable, choose
from atlas.runtime.ops.routes import KernelRoutes


#: these tests pin the one-tile cluster entries (the persistent form:
#: test_decode_gemm_persistent.py; stream-K: test_decode_gemm_streamk.py)
ONE_TILE = {"ATLAS_DECODE_GEMM_PERSISTENT": "0", "ATLAS_DECODE_GEMM_STREAMK": "0"}


@pytest.fixture(autouse=True)
def _one_tile_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    """KernelCache(dev) reads the environment: the one-tile entries there too."""
    for name, value in ONE_TILE.items():
        monkeypatch.setenv(name, value)


# ---- the selection rule -----------------------------------------------------------------

@pytest.mark.parametrize("times, model, pick", [
    ({(2, 2): 100.0, (3, 2): 96.5, (4, 1): 97.0}, (2, 2), (2, 2)),  # 3.5% faster: model stays
    ({(2, 2): 100.0, (3, 2): 95.0, (4, 1): 99.0}, (2, 2), (3, 2)),  # 5% faster: replaced
    ({(2, 2): 100.0, (3, 2): 96.0}, (2, 2), (3, 2)),                # exactly 4%: replaced
    # within 2% of the fastest, the smallest split wins, then one warpgroup
    ({(1, 2): 60.0, (2, 1): 50.9, (2, 2): 50.8, (4, 2): 50.0}, (1, 2), (2, 1)),
    ({(1, 2): 60.0, (2, 1): 51.1, (3, 2): 50.5, (4, 2): 50.0}, (1, 2), (3, 2)),
    ({(1, 1): 60.0, (1, 2): 50.0, (2, 1): 50.2}, (1, 1), (1, 2)),
    ({(4, 2): 80.0, (8, 2): 20.0}, (2, 2), (8, 2)),                  # an untimed model loses
    ({}, (2, 2), (2, 2)),                                            # nothing timed
])
def test_choose_keeps_the_model_unless_beaten_and_breaks_ties_small(times, model,
                                                                    pick) -> None:
    assert choose(times, model) == pick


def test_choose_is_stable_under_noise() -> None:
    """Two runs whose timings differ by 1% pick the same: the hysteresis and the tie band."""
    base = {(1, 1): 40.0, (2, 1): 30.0, (2, 2): 30.3, (3, 2): 29.9}
    for scale in ({}, {(2, 1): 1.01}, {(3, 2): 0.99, (2, 2): 0.99}):
        noisy = {p: t * scale.get(p, 1.0) for p, t in base.items()}
        assert choose(noisy, (1, 1)) == (2, 1)
        assert choose(noisy, (2, 2)) == (2, 2)  # within 4% of the fastest: the model stays


def test_keys_name_every_field_and_the_device() -> None:
    key = TuneKey(64, 4096, 12288, False, True, True)
    assert key.text() == "cols=64 n=4096 k=12288 f32=0 swiglu=1 tma=1"
    others = [TuneKey(32, 4096, 12288, False, True, True), TuneKey(64, 4095, 12288, False, True,
              True), TuneKey(64, 4096, 4096, False, True, True), TuneKey(64, 4096, 12288, True,
              True, True), TuneKey(64, 4096, 12288, False, False, True),
              TuneKey(64, 4096, 12288, False, True, False)]
    assert len({k.text() for k in [key, *others]}) == 7
    full = tune.table_key("NVIDIA H200", 132, "ab12", key)
    assert full == "NVIDIA H200|132|ab12|" + key.text()
    assert full != tune.table_key("NVIDIA H100", 132, "ab12", key)
    assert full != tune.table_key("NVIDIA H200", 114, "ab12", key)
    assert full != tune.table_key("NVIDIA H200", 132, "cd34", key)


def test_cache_path_default_and_override() -> None:
    assert tune.cache_path({}) == Path("~/.cache/atlas/decode_gemm_tune.json").expanduser()
    assert tune.cache_path({"ATLAS_TUNE_CACHE": "/tmp/t.json"}) == Path("/tmp/t.json")


# ---- the table file -----------------------------------------------------------------------

_ENTRY = TuneEntry(3, 2, 12.5, 2, 2, 13.9, 14.0)


def test_table_round_trip_and_merge_with_other_writers(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "tune.json"
    first, second = TuneTable.load(path), TuneTable.load(path)  # two processes, no file yet
    assert not first.entries
    first.put("a", _ENTRY)
    second.put("b", TuneEntry(1, 1, 5.0, 1, 1, 5.0, 3.0))
    reread = TuneTable.load(path)
    assert reread.entries == {"a": _ENTRY, "b": TuneEntry(1, 1, 5.0, 1, 1, 5.0, 3.0)}
    assert reread.get("a").pick == (3, 2)
    assert json.loads(path.read_text())["schema"] == tune.SCHEMA
    assert not list(path.parent.glob("*.tmp"))  # replaced atomically


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"schema": 99, "entries": {}}',
                                  '{"schema": 1, "entries": []}',
                                  '{"schema": 1, "entries": {"a": {"split": 1}}}',
                                  '{"schema": 1, "entries": {"a": {"split": 3.0, "groups": 2, '
                                  '"us": 1, "model_split": 2, "model_groups": 2, '
                                  '"model_us": 1, "tune_ms": 1}}}'])
def test_a_corrupt_table_is_ignored_with_one_line_and_replaced(tmp_path: Path, text: str,
                                                               caplog) -> None:
    path = tmp_path / "tune.json"
    path.write_text(text)
    with caplog.at_level(logging.WARNING, logger=tune.__name__):
        table = TuneTable.load(path)
    assert not table.entries
    assert len(caplog.records) == 1 and "ignored" in caplog.records[0].getMessage()
    table.put("a", _ENTRY)
    assert TuneTable.load(path).entries == {"a": _ENTRY}


def test_an_unwritable_table_keeps_its_entries_in_memory(tmp_path: Path, caplog) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    table = TuneTable.load(blocker / "tune.json")  # its directory is a file
    caplog.clear()  # (the load's own line: the path cannot be read either)
    with caplog.at_level(logging.WARNING, logger=tune.__name__):
        table.put("a", _ENTRY)
        table.put("b", _ENTRY)
    assert table.get("a") == _ENTRY and table.get("b") == _ENTRY
    assert len(caplog.records) == 1 and "not written" in caplog.records[0].getMessage()


# ---- decode_gemm through the tuner ------------------------------------------------------

class _TimedMock(MockGpuBackend):
    """A mock sm_90a device that loaded both decode GEMM modules (digests), captures and
    replays graphs, and whose event clock charges each replayed launch `cost[(func, block)]`
    microseconds (100 where not listed)."""

    def __init__(self, cost: dict[tuple[str, int], float] | None = None) -> None:
        super().__init__()
        self.cost = cost or {}
        self.graphs_destroyed = 0

    @property
    def module_names(self) -> list[str]:
        return ["gemm", "gemm_sm90", "gemv", "gemv_mma", "gemm_decode_sm90", "gemm_decode_tma"]

    def module_digest(self, module: str) -> str | None:
        return f"{module}-sha" if module in self.module_names else None

    def is_capturing(self, stream: Stream) -> bool:
        return stream in self._captures

    def create_event(self) -> EventHandle:
        return EventHandle([0])

    def record_event(self, event: EventHandle, stream: Stream) -> None:
        event.native[0] = len(self.graph_launches)

    def event_elapsed_ms(self, start: EventHandle, end: EventHandle) -> float:
        replays = self.graph_launches[start.native[0]:end.native[0]]
        return sum(self.cost.get((r.func, r.block[0]), 100.0)
                   for g in replays for r in g.graph) / 1e3

    def destroy_graph(self, graph) -> None:
        self.graphs_destroyed += 1


@pytest.fixture
def table_path(tmp_path: Path, monkeypatch) -> Path:
    """A fresh $ATLAS_TUNE_CACHE (each test's own file, so the process-wide tables of other
    tests never leak in)."""
    path = tmp_path / "tune.json"
    monkeypatch.setenv("ATLAS_TUNE_CACHE", str(path))
    return path


def _operands(dev: MockGpuBackend, m: int, n: int, k: int) -> tuple[int, int, int]:
    return dev.alloc(m * k * 2), dev.alloc(n * k * 2), dev.alloc(m * n * 4)


_O_PROJ = (64, 4096, 4096)  # Qwen3-8B o_proj at 64 rows: the model's split 4 of 2 warpgroups
_O_KEY = TuneKey(64, 4096, 4096, False, False, True)


def test_a_table_entry_decides_entry_point_and_block(table_path: Path) -> None:
    dev = _TimedMock()
    kc = KernelCache(dev)
    assert kc.decode_tune is not None
    kc.decode_tune.table.put(
        tune.table_key(kc.facts.name, kc.facts.sm_count, "gemm_decode_tma-sha", _O_KEY),
        TuneEntry(3, 2, 12.0, 4, 2, 14.0, 10.0))
    x, w, y = _operands(dev, *_O_PROJ)
    matmul_decode.decode_gemm(kc, 0, x, w, y, *_O_PROJ)
    matmul_decode.decode_gemm(kc, 0, x, w, y, 40, 4096, 4096)  # N = 64 too: the same key
    records = dev.drain_launches()
    assert [(r.func, r.block[0], r.grid[0]) for r in records] == [
        ("gemm_decode_tma_bf16_split3", 288, 32 * 3)] * 2
    assert not dev.graph_launches  # a hit times nothing
    # forced split or block shape (argument or routes) bypasses the table
    matmul_decode.decode_gemm(kc, 0, x, w, y, *_O_PROJ, split=2)
    matmul_decode.decode_gemm(kc, 0, x, w, y, *_O_PROJ, wide=False)
    forced = KernelCache(dev, KernelRoutes.from_env({**ONE_TILE, "ATLAS_DECODE_GEMM_SPLIT": "1"}))
    matmul_decode.decode_gemm(forced, 0, x, w, y, *_O_PROJ)
    assert [(r.func, r.block[0]) for r in dev.drain_launches()] == [
        ("gemm_decode_tma_bf16_split2", 288), ("gemm_decode_tma_bf16_split4", 160),
        ("gemm_decode_tma_bf16", 288)]


def test_a_miss_times_every_candidate_keeps_the_fastest_and_writes_it(table_path) -> None:
    # split 6 of two warpgroups is 10% faster than the model's split 4
    dev = _TimedMock({("gemm_decode_tma_bf16_split4", 288): 14.0,
                      ("gemm_decode_tma_bf16_split6", 288): 12.6,
                      ("gemm_decode_tma_bf16_split7", 288): 12.5})
    kc = KernelCache(dev)
    x, w, y = _operands(dev, *_O_PROJ)
    matmul_decode.decode_gemm(kc, 5, x, w, y, *_O_PROJ)
    # 16 candidates (splits 1..8 keep >= 4 k-tiles of 64 columns at k = 4096; 1 or 2 groups)
    assert len(dev.graph_launches) == 16 * (1 + tune.TIMED_REPS)
    assert dev.graphs_destroyed == 16
    timed = {(r.func, r.block[0]) for g in dev.graph_launches for r in g.graph}
    assert len(timed) == 16
    assert all(len(g.graph) == tune.LAUNCHES_PER_REP for g in dev.graph_launches)
    assert all(g.stream != 5 for g in dev.graph_launches)  # on the tuner's own stream
    launches = dev.drain_launches()
    assert len(launches) == 16 * tune.WARMUP_LAUNCHES + 1
    # split 7 is the fastest, split 6 within 2%: the smaller split
    assert (launches[-1].func, launches[-1].block[0], launches[-1].stream) == (
        "gemm_decode_tma_bf16_split6", 288, 5)
    assert all(r.args["y"] == y for r in launches)
    saved = json.loads(table_path.read_text())["entries"]
    (key, entry), = saved.items()
    assert key.endswith("|gemm_decode_tma-sha|" + _O_KEY.text())
    assert key.startswith(f"{kc.facts.name}|{kc.facts.sm_count}|")
    assert (entry["split"], entry["groups"], entry["model_split"], entry["model_groups"]) == (
        6, 2, 4, 2)
    assert entry["us"] == pytest.approx(12.6) and entry["model_us"] == pytest.approx(14.0)
    # the next launch of the key, and a new process reading the file, take it untimed
    tune._TABLES.clear()
    for cache in (kc, KernelCache(dev)):
        matmul_decode.decode_gemm(cache, 5, x, w, y, *_O_PROJ)
    assert [r.func for r in dev.drain_launches()] == ["gemm_decode_tma_bf16_split6"] * 2
    assert len(dev.graph_launches) == 16 * (1 + tune.TIMED_REPS)


def test_candidates_keep_k_tiles_and_the_kernels_block_shapes() -> None:
    # k = 1024: 16 k-tiles, splits up to 4; N = 16 on the cp.async kernel: one warpgroup
    assert matmul_decode.valid_picks(16, 1024, tma=False) == [(1, 1), (2, 1), (4, 1)]
    assert matmul_decode.valid_picks(16, 1024, tma=True) == [
        (s, g) for s in (1, 2, 3, 4) for g in (1, 2)]
    assert matmul_decode.valid_picks(64, 192, tma=True) == [(1, 1), (1, 2)]


def test_a_miss_while_capturing_runs_the_models_pick_untimed(table_path) -> None:
    dev = _TimedMock({("gemm_decode_tma_bf16_split6", 288): 1.0})
    kc = KernelCache(dev)
    x, w, y = _operands(dev, *_O_PROJ)
    dev.begin_capture(7)
    matmul_decode.decode_gemm(kc, 7, x, w, y, *_O_PROJ)
    (record,) = dev.end_capture(7).native
    assert (record.func, record.block[0]) == ("gemm_decode_tma_bf16_split4", 288)
    assert not dev.graph_launches and not table_path.exists()


def test_a_device_error_keeps_the_model_and_is_not_retried(table_path, caplog) -> None:
    class Failing(_TimedMock):
        def launch_graph(self, graph, stream) -> None:
            raise GpuError("cuGraphLaunch failed")

    dev = Failing()
    kc = KernelCache(dev)
    x, w, y = _operands(dev, *_O_PROJ)
    with caplog.at_level(logging.WARNING, logger=tune.__name__):
        for _ in range(2):
            matmul_decode.decode_gemm(kc, 0, x, w, y, *_O_PROJ)
    assert len(caplog.records) == 1 and "failed" in caplog.records[0].getMessage()
    assert dev.drain_launches()[-1].func == "gemm_decode_tma_bf16_split4"
    assert dev.graphs_destroyed == 1 and not table_path.exists()


def test_switch_and_device_less_backends_never_tune(table_path) -> None:
    assert KernelRoutes.from_env({}).decode_gemm_tune
    assert KernelCache(_TimedMock(), KernelRoutes.from_env(
        {"ATLAS_DECODE_GEMM_TUNE": "0"})).decode_tune is None
    for dev in (HostBackend(), MockGpuBackend()):  # no compiled module: nothing to key by
        assert dev.module_digest("gemm_decode_tma") is None
        assert KernelCache(dev).decode_tune is None
    dev = _TimedMock()
    off = KernelCache(dev, KernelRoutes.from_env({"ATLAS_DECODE_GEMM_TUNE": "0"}))
    x, w, y = _operands(dev, *_O_PROJ)
    matmul_decode.decode_gemm(off, 0, x, w, y, *_O_PROJ)
    assert dev.drain_launches()[0].func == "gemm_decode_tma_bf16_split4"
    assert not dev.graph_launches


def test_the_table_loads_once_per_process_and_logs_a_summary(table_path, caplog) -> None:
    dev = _TimedMock()
    key = tune.table_key(dev.device_facts().name, dev.device_facts().sm_count,
                         "gemm_decode_tma-sha", _O_KEY)
    TuneTable.load(table_path).put(key, _ENTRY)
    TuneTable.load(table_path).put("other GPU|114|x|" + _O_KEY.text(), _ENTRY)
    with caplog.at_level(logging.INFO, logger=tune.__name__):
        first, second = KernelCache(dev), KernelCache(dev)
    assert first.decode_tune.table is second.decode_tune.table
    (line,) = [r.getMessage() for r in caplog.records]
    assert "1 keys for this device" in line and "14 ms" in line and "2 in the file" in line


def test_tuned_check_cases_pass_on_the_host_at_the_models_pick() -> None:
    """The device check's tuned cases (cases/decode_gemm_tune.py; on the H200 every candidate
    writes the output first) hold their oracle on the host references."""
    from atlas.runtime.cases import decode_gemm_tune as tuned_cases
    from atlas.runtime.kernel_check import check

    cases = tuned_cases.gemm_decode_tuned_cases(np.random.default_rng(5))
    assert len(cases) == len(tuned_cases.TUNED_SHAPES)
    assert all(c.name.startswith("gemm_decode_tma tuned") and not c.capturable for c in cases)
    for case in cases:
        result = check(HostBackend(), case)
        assert result.passed, (case.name, result.detail)


def test_the_device_tool_prints_model_and_tuned_picks(monkeypatch, capsys) -> None:
    """tools/gpu/tune_decode_gemm.py's flow on the timed mock: split 3 of two warpgroups
    costs half of every other pick, so every plain product's pick changes and the SwiGLU's
    (other entry points) stays."""
    import importlib
    import sys

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "tools" / "gpu"))
    tool = importlib.import_module("tune_decode_gemm")

    class Device(_TimedMock):
        def __init__(self, modules: dict[str, bytes]) -> None:
            super().__init__({("gemm_decode_tma_bf16_split3", 288): 50.0})

        def device_info(self) -> dict[str, str]:
            return {"name": "mock"}

    monkeypatch.setattr(tool, "CudaBackend", Device)
    monkeypatch.setattr(tool, "decode_modules", dict)
    monkeypatch.setattr(sys, "argv", ["tune_decode_gemm.py", "-k", "qwen3-8b", "--rows",
                                      "16,64"])
    assert tool.main() == 0
    out = capsys.readouterr().out
    assert "| qwen3-8b o_proj | 64 | (4, 2) | 100.00 | (3, 2) | 50.00 | 2.000 |" in out
    assert "| qwen3-8b gate_up+swiglu | 16 | (2, 1) | 100.00 | (2, 1) | 100.00 | 1.000 |" in out
    assert "6 of 8 picks changed" in out


def test_candidates_the_device_cannot_hold_are_not_timed(table_path) -> None:
    class FewClusters(_TimedMock):  # no cluster of 5 or more fits
        def resident_blocks(self, handle, block, shared_mem, cluster) -> int:
            return 4 if cluster >= 5 else 132

    dev = FewClusters()
    x, w, y = _operands(dev, *_O_PROJ)
    matmul_decode.decode_gemm(KernelCache(dev), 0, x, w, y, *_O_PROJ)
    timed = {(r.func, r.block[0]) for g in dev.graph_launches for r in g.graph}
    assert {func for func, _ in timed} == {"gemm_decode_tma_bf16"} | {
        f"gemm_decode_tma_bf16_split{s}" for s in (2, 3, 4)}
    assert len(timed) == 8


def test_a_failing_occupancy_query_keeps_the_model(table_path, caplog) -> None:
    class NoQuery(_TimedMock):
        calls = 0

        def resident_blocks(self, handle, block, shared_mem, cluster) -> int | None:
            NoQuery.calls += 1
            if NoQuery.calls > 8:  # the model's own queries (powers of two) succeed
                raise GpuError("cuOccupancyMaxActiveClusters failed")
            return 132

    dev = NoQuery()
    x, w, y = _operands(dev, *_O_PROJ)
    with caplog.at_level(logging.WARNING, logger=tune.__name__):
        matmul_decode.decode_gemm(KernelCache(dev), 0, x, w, y, *_O_PROJ)
    assert dev.drain_launches()[-1].func == "gemm_decode_tma_bf16_split4"
    assert any("failed" in r.getMessage() for r in caplog.records)


def test_cuda_backend_digests_its_modules_and_asks_the_driver_about_capture(
        monkeypatch) -> None:
    import enum
    import hashlib

    from atlas.runtime import cuda
    from test_backends import FakeDriver, FakeResult

    class Status(enum.IntEnum):
        CU_STREAM_CAPTURE_STATUS_NONE = 0
        CU_STREAM_CAPTURE_STATUS_ACTIVE = 1

    drv = FakeDriver({})
    answer = [FakeResult.CUDA_SUCCESS, Status.CU_STREAM_CAPTURE_STATUS_NONE]
    drv.CUstreamCaptureStatus = Status
    drv.cuStreamIsCapturing = lambda stream: tuple(answer)
    monkeypatch.setattr(cuda, "_load_driver", lambda: drv)
    be = cuda.CudaBackend(modules={"toy": b"ptx"})
    assert be.module_digest("toy") == hashlib.sha256(b"ptx\0").hexdigest()  # as loaded
    assert be.module_digest("other") is None
    assert not be.is_capturing(0)
    answer[1] = Status.CU_STREAM_CAPTURE_STATUS_ACTIVE
    assert be.is_capturing(0)
    answer[:] = [FakeResult.CUDA_ERROR_INVALID_VALUE, None]  # refused: never synchronize
    assert be.is_capturing(0)


def test_timed_launches_cycle_through_cold_weight_copies_then_free_them(table_path) -> None:
    """A weight under ROTATE_BYTES is timed through scratch copies of its size, so every timed
    launch reads its weight from DRAM as a step does; the scratch is freed after tuning, and a
    device that cannot hold it times on the weight alone."""
    dev = _TimedMock()
    kc = KernelCache(dev)
    x, w, y = _operands(dev, *_O_PROJ)
    wbytes = 4096 * 4096 * 2
    copies = rotation_copies(wbytes, tune.ROTATE_BYTES, tune.MAX_COPIES)
    assert copies == 8  # 32 MiB a copy: 256 MiB between two reads of one
    freed: list[int] = []
    free = dev.free
    dev.free = lambda ptr: (freed.append(ptr), free(ptr))[1]  # type: ignore[method-assign]
    matmul_decode.decode_gemm(kc, 5, x, w, y, *_O_PROJ)
    graph = dev.graph_launches[0].graph
    read = [r.args["w"] for r in graph]
    assert len(read) >= copies and read[copies:] == read[:len(read) - copies]  # cyclic
    (pool,) = freed
    assert set(read) == {w} | {pool + i * wbytes for i in range(copies - 1)}
    assert dev.drain_launches()[-1].args["w"] == w  # the real launch reads the real weight

    def no_room(nbytes: int) -> int:
        raise GpuError("out of memory")

    dev.alloc = no_room  # type: ignore[method-assign]
    assert matmul_decode.cold_weights(KernelCache(dev), w, wbytes) == (0, [w])
    assert matmul_decode.cold_weights(kc, w, 1 << 30) == (0, [w])  # one copy is enough
