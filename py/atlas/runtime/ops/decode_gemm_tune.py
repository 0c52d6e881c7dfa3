"""Measured launch shapes for the skinny decode GEMM (ops/matmul_decode.py): for each launch key
(wgmma width, n, k, f32 output, SwiGLU epilogue, TMA or cp.async kernel) the cluster split and
warpgroups a block that ran fastest on this device, timed once and remembered.

Why: the split rule (matmul_decode.decode_split over the driver's cluster occupancy) is a model
of waves and fill, and on published shapes it was wrong by up to 1.8x (H200 kernel table,
2026-12-03 gpu39: Qwen3-4B gate_up at 64 rows 66.1 us on its pick, 37.6 on another split;
Qwen3-32B gate_up the other way, 155 vs 236). Measuring every candidate of a shape costs a few
milliseconds, once per device and kernel build, before the decode graphs are captured.

Three parts, kept apart (DESIGN.md SBIO):
* `choose`: timings -> pick, pure. Stable across restarts: the model's pick stays unless a
  candidate beats it by TUNE_GAIN; among candidates within TUNE_TIE of the fastest, the
  smallest split, then one warpgroup (the fewest blocks and the least cluster traffic).
* `time_picks`: the timing, through the backend: each candidate's launches captured into a
  graph (no host launch cost between them, PDL edges as in a decode graph), replayed between
  events, median per launch.
* `TuneTable`: the JSON file at $ATLAS_TUNE_CACHE (default DEFAULT_CACHE), keyed by GPU name,
  SM count, the kernel module's sha256 (GpuBackend.module_digest) and the launch key; a
  corrupt or unreadable file is ignored with one log line, never failing a start.

`DecodeGemmTuner` ties them to one backend (KernelCache.decode_tune); matmul_decode.decode_gemm
asks it for a pick when neither the call nor the routes force split or block shape, and times a
missing key right there unless the stream is being captured (the model's pick then). The timed
launches write the call's own output every time; the real launch after them writes it last.
The timed launches cycle through the call's weight and scratch copies of it (matmul_decode.
cold_weights: ROTATE_BYTES between two reads of one copy), so a weight under the L2 size is
timed from DRAM as a step reads it; timed on the weight alone (the first version), Llama-3.2-3B
o_proj at 128 rows took a pick 0.90x the model's cold (gpu43).
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ..gpu import DeviceFacts, EventHandle, GpuBackend, GpuError, Stream
from ..kernel_abi import GEMM_DECODE_SM90, GEMM_DECODE_TMA
from .routes import KernelRoutes

_log = logging.getLogger(__name__)

#: a candidate replaces the model's pick only when it is this much faster (a fraction)
TUNE_GAIN = 0.04
#: candidates this close to the fastest (a fraction) tie: the smallest split, then one
#: warpgroup, wins among them
TUNE_TIE = 0.02
#: eager launches of a candidate before its graph is captured (handles, tensor maps, caches)
WARMUP_LAUNCHES = 2
#: launches of a candidate captured into its timing graph, and timed replays of that graph
LAUNCHES_PER_REP = 10
TIMED_REPS = 3
#: bytes that pass between two timed reads of one weight copy (past the H200's 60 MiB L2, as
#: in a decode step, which reads every other layer's weights in between), and the most copies
ROTATE_BYTES = 256 << 20
MAX_COPIES = 64
#: where the table lives unless $ATLAS_TUNE_CACHE says otherwise
DEFAULT_CACHE = "~/.cache/atlas/decode_gemm_tune.json"
#: the file's layout version: a file of another version is ignored (and rewritten)
SCHEMA = 1

#: (cluster split, warpgroups a block)
Pick = tuple[int, int]
#: launches one candidate on a stream
LaunchFn = Callable[[Pick, Stream], None]


@dataclass(frozen=True, slots=True)
class TuneKey:
    """What a decode GEMM launch's speed depends on besides its pick: the wgmma width the batch
    runs at (matmul_decode.decode_cols), the product's n and k, f32 output, the gated epilogue
    (`swiglu` holds a matmul_decode.Glu: 0 none, 1 SwiGLU, 2 GeGLU), and the kernel (TMA or
    cp.async)."""

    cols: int
    n: int
    k: int
    out_f32: bool
    swiglu: int
    tma: bool
    persistent: bool = False
    streamk: bool = False

    def text(self) -> str:
        """The key's part of a table key (stable: the file outlives the process). Timed under
        KernelRoutes.decode_gemm_persistent, a pick's multi-wave grids ran the persistent form:
        such keys say so, and the one-tile form's keep their text; keys whose candidates
        included the stream-K entries (KernelRoutes.decode_gemm_streamk) say that too."""
        return (f"cols={self.cols} n={self.n} k={self.k} f32={int(self.out_f32)} "
                f"swiglu={int(self.swiglu)} tma={int(self.tma)}"
                + (" persistent=1" if self.persistent else "")
                + (" streamk=1" if self.streamk else ""))


def build_prefix(gpu: str, sm_count: int, digest: str) -> str:
    """What every key of one device and module build starts with."""
    return f"{gpu}|{sm_count}|{digest}|"


def table_key(gpu: str, sm_count: int, digest: str, key: TuneKey) -> str:
    """The full key of one entry: device, SM count, module build, launch key."""
    return build_prefix(gpu, sm_count, digest) + key.text()


def choose(times: Mapping[Pick, float], model: Pick, gain: float = TUNE_GAIN,
           tie: float = TUNE_TIE) -> Pick:
    """The pick a key keeps, from each candidate's time (any unit): `model` unless some
    candidate is faster than it by `gain` or more (a model pick that was not timed counts as
    infinitely slow); then, of the candidates within `tie` of the fastest, the smallest split
    (stream-K, split 0, after every cluster split: it costs a workspace), then the fewest
    warpgroups. Restarts whose timings differ by noise keep the same pick."""
    if not times:
        return model
    best = min(times.values())
    if best > times.get(model, float("inf")) * (1.0 - gain):
        return model
    return min((pick for pick, t in times.items() if t <= best * (1.0 + tie)),
               key=lambda pick: (pick[0] == 0, pick))


def time_picks(backend: GpuBackend, stream: Stream, picks: Iterable[Pick], launch: LaunchFn,
               events: list[EventHandle], warmup: int = WARMUP_LAUNCHES,
               iters: int = LAUNCHES_PER_REP, reps: int = TIMED_REPS) -> dict[Pick, float]:
    """Microseconds a launch of each pick takes: `warmup` eager launches, then `iters`
    launches captured into a graph, replayed once and then `reps` times between events
    (`events`: 2 x reps of them), the median replay / iters. `stream` must not be capturing."""
    out: dict[Pick, float] = {}
    for pick in picks:
        for _ in range(warmup):
            launch(pick, stream)
        backend.begin_capture(stream)
        try:
            for _ in range(iters):
                launch(pick, stream)
        finally:
            graph = backend.end_capture(stream)
        try:
            backend.launch_graph(graph, stream)
            for r in range(reps):
                backend.record_event(events[2 * r], stream)
                backend.launch_graph(graph, stream)
                backend.record_event(events[2 * r + 1], stream)
            out[pick] = statistics.median(
                backend.event_elapsed_ms(events[2 * r], events[2 * r + 1]) * 1e3 / iters
                for r in range(reps))
        finally:
            backend.destroy_graph(graph)
    return out


@dataclass(frozen=True, slots=True)
class TuneEntry:
    """One tuned key: the pick and its time, the model's pick and its time (us), and the
    milliseconds the tuning took."""

    split: int
    groups: int
    us: float
    model_split: int
    model_groups: int
    model_us: float
    tune_ms: float

    @property
    def pick(self) -> Pick:
        return self.split, self.groups


def cache_path(env: Mapping[str, str] | None = None) -> Path:
    """$ATLAS_TUNE_CACHE, else DEFAULT_CACHE."""
    env = os.environ if env is None else env
    return Path(env.get("ATLAS_TUNE_CACHE", "").strip() or DEFAULT_CACHE).expanduser()


def _read_entries(path: Path) -> dict[str, TuneEntry]:
    """The entries of the file at `path`: {} when there is none; ValueError / OSError when it
    cannot be read or is not a table of this SCHEMA."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    raw = json.loads(text)
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        raise ValueError(f"not a schema-{SCHEMA} decode GEMM tune table")
    entries = raw.get("entries")
    if not isinstance(entries, dict):
        raise ValueError("its 'entries' is not an object")
    try:
        out = {str(key): TuneEntry(**value) for key, value in entries.items()}
    except TypeError as exc:
        raise ValueError(f"a malformed entry ({exc})") from None
    if not all(type(e.split) is int and type(e.groups) is int for e in out.values()):
        raise ValueError("an entry's split or groups is not an integer")
    return out


class TuneTable:
    """The tuned entries by full key (`table_key`), backed by a JSON file (`path`; None: in
    memory only, for tools that tune afresh). Thread-safe: an engine step and a tool may
    tune on different threads."""

    def __init__(self, path: Path | None, entries: Mapping[str, TuneEntry] | None = None):
        self.path = path
        self.entries: dict[str, TuneEntry] = dict(entries or {})
        self._lock = threading.Lock()
        self._write_failed = False

    @classmethod
    def load(cls, path: Path) -> "TuneTable":
        """The table in `path`; a missing file is an empty table, a corrupt or unreadable
        one too, with one warning (the next save replaces it)."""
        try:
            entries = _read_entries(path)
        except (OSError, ValueError) as exc:
            _log.warning("decode GEMM tune table %s ignored: %s", path, exc)
            entries = {}
        return cls(path, entries)

    def get(self, key: str) -> TuneEntry | None:
        return self.entries.get(key)

    def put(self, key: str, entry: TuneEntry) -> None:
        """Add an entry and write the file: what it holds now (other processes' keys) merged
        with ours, replaced atomically. A write that fails is logged once; the entry stays
        in memory."""
        with self._lock:
            self.entries[key] = entry
            if self.path is None:
                return
            try:
                merged = {**_read_entries(self.path), **self.entries}
            except (OSError, ValueError):
                merged = dict(self.entries)  # a corrupt file is replaced
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
                tmp.write_text(json.dumps(
                    {"schema": SCHEMA, "entries": {k: asdict(v) for k, v in
                                                   sorted(merged.items())}}, indent=1))
                os.replace(tmp, self.path)
            except OSError as exc:
                if not self._write_failed:
                    _log.warning("decode GEMM tune table %s not written: %s", self.path, exc)
                    self._write_failed = True


#: the tables loaded in this process, by path: every KernelCache of a process shares one
_TABLES: dict[Path, TuneTable] = {}
_TABLES_LOCK = threading.Lock()


def shared_table(path: Path) -> tuple[TuneTable, bool]:
    """The process's table for `path`, loaded on first use; and whether this call loaded it."""
    with _TABLES_LOCK:
        table = _TABLES.get(path)
        if table is not None:
            return table, False
        table = _TABLES[path] = TuneTable.load(path)
        return table, True


class DecodeGemmTuner:
    """The tuning table of one backend's decode GEMM modules: lookups by (module, TuneKey),
    and the timing of missing keys on a stream of its own (ordered after the caller's work
    and before the caller's next by events)."""

    def __init__(self, backend: GpuBackend, facts: DeviceFacts, table: TuneTable,
                 digests: Mapping[str, str]) -> None:
        self.backend = backend
        self.table = table
        self._prefix = {module: build_prefix(facts.name, facts.sm_count, digest)
                        for module, digest in digests.items()}
        self._picks: dict[tuple[str, TuneKey], Pick] = {}
        self._failed: set[tuple[str, TuneKey]] = set()
        self._stream: Stream | None = None
        self._events: list[EventHandle] = []

    @classmethod
    def open(cls, backend: GpuBackend, facts: DeviceFacts, routes: KernelRoutes,
             table: TuneTable | None = None) -> "DecodeGemmTuner | None":
        """The tuner of a KernelCache: None under ATLAS_DECODE_GEMM_TUNE=0 or on a backend
        that loaded neither decode GEMM module (no digest: the host and mock backends, sets
        without sm_90a). `table` None: the file at `cache_path()`, loaded once per process,
        with a log line of what it holds for this device (tools and checks that tune afresh
        pass their own)."""
        if not routes.decode_gemm_tune:
            return None
        digests = {sig.module: digest for sig in (GEMM_DECODE_TMA, GEMM_DECODE_SM90)
                   if (digest := backend.module_digest(sig.module)) is not None}
        if not digests:
            return None
        loaded = False
        if table is None:
            table, loaded = shared_table(cache_path())
        tuner = cls(backend, facts, table, digests)
        if loaded:
            mine = [e for key, e in table.entries.items()
                    if any(key.startswith(p) for p in tuner._prefix.values())]
            _log.info("decode GEMM tune table %s: %d keys for this device and build (tuned "
                      "in %.0f ms in all), %d in the file", table.path, len(mine),
                      sum(e.tune_ms for e in mine), len(table.entries))
        return tuner

    def entry(self, module: str, key: TuneKey) -> TuneEntry | None:
        """The table's entry of `key` on `module` for this device and build."""
        prefix = self._prefix.get(module)
        return None if prefix is None else self.table.get(prefix + key.text())

    def lookup(self, module: str, key: TuneKey) -> Pick | None:
        """The tuned pick of `key` on `module`, None when it was never tuned here (kept per
        process after the first lookup: decode_gemm asks on every launch)."""
        pick = self._picks.get((module, key))
        if pick is None and (entry := self.entry(module, key)) is not None:
            pick = self._picks[module, key] = entry.pick
        return pick

    def can_tune(self, module: str, key: TuneKey) -> bool:
        """Whether `key` may be timed: its module has a digest and no earlier try failed."""
        return module in self._prefix and (module, key) not in self._failed

    def tune(self, module: str, key: TuneKey, candidates: Iterable[Pick], model: Pick,
             stream: Stream, launch: LaunchFn, iters: int = LAUNCHES_PER_REP) -> Pick:
        """Time every candidate (after the work already on `stream`; `iters` launches a timed
        graph), `choose`, remember the pick (table and file) and return it. A device error
        while timing is logged and the key keeps the model's pick for this process (never
        tried again, never written)."""
        backend = self.backend
        if self._stream is None:
            self._stream = backend.create_stream()
            self._events = [backend.create_event() for _ in range(2 * TIMED_REPS + 2)]
        ready, done = self._events[-2:]
        start = time.perf_counter()
        backend.record_event(ready, stream)
        backend.stream_wait_event(self._stream, ready)
        try:
            times = time_picks(backend, self._stream, candidates, launch, self._events[:-2],
                               iters=iters)
        except GpuError as exc:
            _log.warning("decode GEMM tuning of %s failed (%s); the model's pick %s stays",
                         key.text(), exc, model)
            self._failed.add((module, key))
            return model
        finally:
            backend.record_event(done, self._stream)
            backend.stream_wait_event(stream, done)
        if not times:  # the device holds no candidate's cluster: nothing was measured
            self._failed.add((module, key))
            return model
        pick = choose(times, model)
        entry = TuneEntry(pick[0], pick[1], round(times[pick], 3), model[0], model[1],
                          round(times.get(model, float("nan")), 3),
                          round((time.perf_counter() - start) * 1e3, 1))
        self.table.put(self._prefix[module] + key.text(), entry)
        self._picks[module, key] = pick
        _log.debug("decode GEMM tuned %s: split %d x %d warpgroup(s) %.2f us, model's split "
                   "%d x %d %.2f us (%d candidates, %.1f ms)", key.text(), *pick, entry.us,
                   *model, entry.model_us, len(times), entry.tune_ms)
        return pick
