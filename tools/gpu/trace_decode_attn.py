#!/usr/bin/env python3
"""Where decode attention's time goes: a phase trace of the real kernel, and its time-vs-keys
line.

1. Phase trace. The traced twins (kernels/hopper/common/attention_twins.cu: the production
   template with PhaseTrace) stamp %globaltimer and clock64 in thread 0 of every block at
   each phase (ops.attention.TRACE_PHASES: start, kv_len, prologue, loaded (its pre-wait K/V
   rows arrived), waited, q_ready, round1, keys_done, block_merged, arrived, merged, end).
   For each
   head geometry the models launch at batch 1 (kernel_shapes.DECODE_LATENCY_HEADS:
   Qwen3-0.6B 16/8, Qwen3-8B 32/8, Qwen3-30B-A3B 32/4 on the rope-fused kernel,
   Qwen3.5-35B-A3B 16/2 D256 on the cached-q one) at 64 / 512 / 4,096
   keys, with the engine's split count, three ways (batches a fourth):
     alone  the kernel by itself (synchronized before it: nothing overlaps it)
     b2b    right behind another launch of itself (PDL: it may start before that one ends)
     gemv   right behind the layer's projection GEMV (the model's order: the qkv GEMV writes
            what the attention reads after its wait; hidden sizes of the real models)
     swept  (batches) behind a read of SWEEP_BYTES after another launch of itself: L2 turned
            over, as in a step (the batch-64 step's attention: ~121 us against ~108 back to
            back, attn_step_gap.py)
     graph  (batch 1) between the qkv GEMV and an o_proj-shaped GEMV, GRAPH_LAYERS such
            triples captured in a CUDA graph and replayed, as a decode step runs them (the
            o_proj launching early under PDL); the last triple's stamps
   Each line: per phase, the median over the blocks that attend over keys of the time since
   the block's own start (clock64, us at the measured SM clock); `first` and `span` are the
   launch's first block start and last block end (globaltimer, us) relative to the last end
   of the traced launch before it (b2b: negative when it started before that one ended,
   which PDL allows; gemv: the GEMV's time is in them, the curve below prints it), and
   `wait` is the median waited stamp relative to that end. `/SM`: most blocks of the launch
   resident on one SM at once; `block`: the median keyed block's duration; `late`: when the
   last keyed block started after the launch's first (a second wave of blocks, or blocks
   waiting for the previous kernel's to leave their SMs).
   Also the Qwen3-8B batch-64 x 1,536-key launch (the 64-stream throughput regime): block
   duration, blocks per SM at once, the launch's span.
   `--long`: the same for the tensor-core kernel's batch-1 entry instead
   (attention_long.cu decode_attn_long_rope_early_exact_bf16, or its late-trigger twin where the
   model takes that (model/load.py: gated attention before an o_proj of
   LATE_TRIGGER_MIN_O_BYTES and more; ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=1 forces it), and their
   traced twins, the rope-fused
   geometries at D 64 / 128, and Qwen3.5's plain D-256 entry, decode_attn_long_d256_bf16 and
   its twin, stamps from its wait on; the grid a long-context engine gives batch 1:
   step_inputs.decode_splits at LONG_CONTEXT_KEYS), and the batch-64 row on the staged
   entry's traced twin (its stamps start after its wait); its phases: kv_len (the split decided),
   prologue (the table, first tiles and constants requested: just before the wait), waited,
   q_ready (the rows normed and rotated), loaded (the first tile landed), round1 (its
   products), keys_done, block_merged (the warps merged, the partial stored), arrived (the
   gated entry: every split of its kv head stored, attention_long.cu SpreadMerge), merged
   (past the split merge's ticket; the last block past the merge; the gated entry: every
   block past its share), end.
2. Time vs keys (batch 1, keys 1..8,192): the production kernel's own time from CUDA-graph
   replays of back-to-back launches (PDL on; input sets, GEMV weights included, cycled
   through 128 MB, so short contexts' K/V stays in L2 when the kernel runs alone), and the
   time it adds behind the projection GEMV (graph of GEMV + attention pairs minus the GEMV
   alone; the GEMV's weights stream between two uses of a set, as a model's layers do).
   A least-squares line over keys >= 1,024: intercept = fixed latency, slope = us per key,
   printed as the K/V bandwidth it implies.

    python3 tools/gpu/trace_decode_attn.py [--quick] [--ptx-dir DIR]
    python3 tools/gpu/trace_decode_attn.py --dry-run   # CPU: tiny shapes on the HostBackend
(the dry run checks the flow: the host has no device clock, so every stamp reads zero).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_kernels import (ENGINE_MAX_SEQ_LEN, EPS, ROPE_THETA, Env, ks, open_env,  # noqa: E402
                           paged_kv, time_cuda)
from atlas.model.step_inputs import decode_splits  # noqa: E402
from atlas.runtime.gpu import Stream  # noqa: E402
from atlas.runtime.ops import KernelCache, attention, matmul  # noqa: E402
from atlas.runtime.ops.attention_long import (LONG_CONTEXT_KEYS, LONG_ROPE_HEAD_DIMS,  # noqa: E402
                                              decode_attention_long_rope_gated,
                                              late_trigger_pays)

#: the projection GEMV's input width per traced geometry (the real models' hidden sizes)
HIDDEN = {"qwen3-0.6b": 1024, "qwen3-8b": 4096, "qwen3-30b-a3b": 2048, "qwen2.5-1.5b": 1536,
          "qwen3.5-35b-a3b": 2048}
TRACE_KEYS = (64, 512, 4096)
CURVE_KEYS = (1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
#: the fit's keys: past the shortest splits, where the time grows with the bytes
FIT_FROM_KEYS = 1024
#: the throughput regime traced at its own batch (Qwen3-8B heads)
THROUGHPUT = (64, 1536)
#: launches traced per (shape, mode); the median over them is printed
TRACE_RUNS = 5
#: (qkv GEMV, attention, o_proj GEMV) triples in the graph mode's CUDA graph
GRAPH_LAYERS = 4
#: bytes the swept mode reads between the two launches (most of L2: a step's state when its
#: attention starts; tools/gpu/attn_step_gap.py's l2 variant)
SWEEP_BYTES = 40 << 20
#: bytes between two uses of one input set in the curve's graphs (past the 60 MB L2)
ROTATE_BYTES = 128 << 20
MAX_COPIES = 32
#: the SM clock assumed when no block ran long enough to measure it (H200 boost)
DEFAULT_SM_MHZ = 1980.0
TINY_HEADS = (ks.AttentionHeads("tiny", 4, 2, 64, True),
              ks.AttentionHeads("tiny-d256", 4, 1, 256, False))
TINY_HIDDEN = 64

P = attention.TRACE_PHASES
CYC = attention.TRACE_CYCLES_WORD


@dataclass
class Problem:
    """One decode attention launch's inputs at `keys` keys for `batch` sequences (the
    step's token at position keys - 1), and the projection GEMV the model runs before it."""

    env: Env
    heads: Any
    batch: int
    keys: int
    hidden: int
    long: bool = False  # the tensor-core kernel's batch-1 (early) entry
    #: Qwen3.5's gated attention as one launch (decode_attention_long_rope_gated's late entry:
    #: each q head followed by its gate, a quarter rotating, (1 + w) norms), batch 1, D 256
    gated: bool = False

    def __post_init__(self) -> None:
        env, h = self.env, self.heads
        torch, b, d, bs = env.torch, self.batch, h.head_dim, ks.KV_BLOCK_SIZE
        reach = max(LONG_CONTEXT_KEYS if self.long else ENGINE_MAX_SEQ_LEN, self.keys)
        self.splits = decode_splits(b, h.kv_heads, reach, env.num_sms)
        self.grid = ((self.splits, h.kv_heads, b) if self.long else
                     attention.decode_grid(self.splits, h.heads, h.kv_heads, b, env.kc.routes))
        st = paged_kv(env, b, self.keys, h.kv_heads, d, bs)
        self.max_blocks = st["tables"].shape[1]
        half = d // 8 if self.gated else d // 2  # (gated: a quarter of the head rotates)
        inv = ROPE_THETA ** (-torch.arange(0, half, device=env.device).double() / half)
        ang = torch.arange(self.keys, device=env.device).double()[:, None] * inv[None, :]
        st["cos_sin"] = torch.cat([ang.cos(), ang.sin()], dim=1).float().contiguous()
        last = st["tables"][:, (self.keys - 1) // bs].long()
        width = ((2 * h.heads + 2 * h.kv_heads) * d if self.gated else
                 (h.heads + 2 * h.kv_heads) * d if h.rope else h.heads * d)
        norm_lo, norm_hi = (-0.5, 0.5) if self.gated else (0.5, 1.5)  # gated: (1 + w)
        st.update(
            x=env.uniform((1, self.hidden)), w=env.uniform((width, self.hidden), -0.05, 0.05),
            wo=env.uniform((self.hidden, h.heads * d), -0.05, 0.05),
            o_out=env.uniform((1, self.hidden)),
            qkv=env.uniform((b, width)), qw=env.uniform((d,), norm_lo, norm_hi),
            kw=env.uniform((d,), norm_lo, norm_hi),
            pos=torch.full((b,), self.keys - 1, dtype=torch.int32, device=env.device),
            slots=(last * bs + (self.keys - 1) % bs).to(torch.int32),
            kv_lens=torch.full((b,), self.keys, dtype=torch.int32, device=env.device),
            part_o=torch.empty((b, h.heads, self.splits, d), dtype=torch.float32,
                               device=env.device),
            part_ml=torch.empty((b, h.heads, self.splits, 2), dtype=torch.float32,
                                device=env.device),
            counters=torch.zeros((b, h.heads), dtype=torch.int32, device=env.device),
            out=torch.empty((b, h.heads, d), dtype=torch.bfloat16, device=env.device))
        self.st = st
        self.blocks = self.grid[0] * self.grid[1] * self.grid[2]
        # the late trigger where the model takes it (model/load.py: gated attention, by the
        # o_proj after it)
        routes = env.kc.routes
        if routes.decode_attn_long_late_trigger is None:
            routes = replace(routes, decode_attn_long_late_trigger=late_trigger_pays(
                2 * self.hidden * h.heads * d, self.gated))
        if self.gated:  # its traced twin is the late entry's; num_splits as given (the grid)
            routes = replace(routes, decode_attn_long_late_trigger=True,
                             decode_attn_long_min_batch=0)
        self.kc = KernelCache(env.backend, routes)
        late = routes.decode_attn_long_late_trigger
        long_kernel = ("decode_attn_long_d256" if not h.rope else
                       ("decode_attn_long_rope_early_late_exact" if late else
                        "decode_attn_long_rope_early_exact") if b == 1 else
                       "decode_attn_long_rope_staged")
        self.kernel = ("decode_attn_long_rope_early_late_gated_d256" if self.gated else
                       long_kernel if self.long else attention.decode_kernel(
                           env.kc.routes, self.splits, h.rope).func.removesuffix("_bf16"))

    def new_trace(self) -> Any:
        return self.env.torch.zeros((self.blocks, attention.TRACE_WORDS),
                                    dtype=self.env.torch.int64, device=self.env.device)

    def attend(self, stream: Stream, trace: Any = None) -> None:
        """The attention launch (traced into `trace` when given)."""
        env, h, st, d = self.env, self.heads, self.st, self.heads.head_dim
        p = env.ptr
        tr = p(trace) if trace is not None else 0
        common = (p(st["tables"]), p(st["kv_lens"]), p(st["part_o"]), p(st["part_ml"]),
                  p(st["counters"]), p(st["out"]), self.batch, h.heads, h.kv_heads, d,
                  ks.KV_BLOCK_SIZE, self.max_blocks, self.splits, d ** -0.5)
        if self.gated:
            decode_attention_long_rope_gated(
                self.kc, stream, p(st["qkv"]), p(st["k_pool"]), p(st["v_pool"]), p(st["qw"]),
                p(st["kw"]), p(st["cos_sin"]), p(st["pos"]), p(st["slots"]), p(st["tables"]),
                p(st["kv_lens"]), p(st["part_o"]), p(st["part_ml"]), p(st["counters"]),
                p(st["out"]), h.heads, h.kv_heads, d, ks.KV_BLOCK_SIZE, self.max_blocks,
                self.splits, d ** -0.5, EPS, 2 * d, d // 4, True, trace=tr)
        elif h.rope:
            attention.decode_attention_rope(
                self.kc, stream, p(st["qkv"]), p(st["k_pool"]), p(st["v_pool"]), p(st["qw"]),
                p(st["kw"]), p(st["cos_sin"]), p(st["pos"]), p(st["slots"]), *common, EPS,
                trace=tr, long=True if self.long else None)
        else:  # the long D-256 entry (Qwen3.5's gated attention) or the clustered kernel
            attention.decode_attention(self.kc, stream, p(st["qkv"]), p(st["k_pool"]),
                                       p(st["v_pool"]), *common, long=self.long, trace=tr)

    def project(self, stream: Stream) -> None:
        """The projection GEMV writing the rows the attention reads after its wait."""
        st = self.st
        matmul.gemv(self.env.kc, stream, self.env.ptr(st["x"]), self.env.ptr(st["w"]),
                    self.env.ptr(st["qkv"][:1]), 1, st["w"].shape[0], self.hidden)

    def project_out(self, stream: Stream) -> None:
        """The o_proj-shaped GEMV after the attention (its first row in, hidden out)."""
        st = self.st
        matmul.gemv(self.env.kc, stream, self.env.ptr(st["out"][:1]), self.env.ptr(st["wo"]),
                    self.env.ptr(st["o_out"]), 1, self.hidden, st["wo"].shape[1])


# ---- the phase trace --------------------------------------------------------------------

def traced_in_graph(env: Env, pr: Problem) -> np.ndarray:
    """The graph mode: GRAPH_LAYERS (qkv GEMV, traced attention, o_proj GEMV) triples in one
    CUDA graph, replayed twice; the trace the last attention left (eager on the host)."""
    mine = pr.new_trace()

    def layer() -> None:
        stream = env.stream()
        pr.project(stream)
        pr.attend(stream, mine)
        pr.project_out(stream)

    if not env.cuda:
        layer()
        env.finish()
        return mine.cpu().numpy()
    torch = env.torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # modules, shared-memory opt-ins: before the capture
        layer()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_LAYERS):
            layer()
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    return mine.cpu().numpy()


def traced(env: Env, pr: Problem, mode: str) -> tuple[np.ndarray, np.ndarray | None]:
    """One traced launch in `mode` (alone, b2b, gemv, swept, graph): (its trace, the trace of
    the traced launch before it or before the GEMV or sweep; None alone and in the graph)."""
    if mode == "graph":
        return traced_in_graph(env, pr), None
    stream = env.stream()
    before = pr.new_trace() if mode != "alone" else None
    mine = pr.new_trace()
    sweep = (env.torch.ones(SWEEP_BYTES // 4, dtype=env.torch.float32, device=env.device)
             if mode == "swept" else None)
    env.sync()
    if before is not None:
        pr.attend(stream, before)  # gemv / swept: the end the GEMV or sweep starts after
    if mode == "gemv":
        pr.project(stream)
    if sweep is not None:
        sweep.sum()
    pr.attend(stream, mine)
    env.finish()
    env.sync()
    prev = before.cpu().numpy() if before is not None else None
    return mine.cpu().numpy(), prev


def sm_clock_mhz(traces: list[np.ndarray]) -> float:
    """The SM clock from the blocks that ran >= 5 us: globaltimer ns vs clock64 cycles."""
    end = P.index("end")
    ns = cyc = 0
    for t in traces:
        ok = (t[:, end] > 0) & (t[:, end] - t[:, 0] >= 5000)
        ns += int((t[ok, end] - t[ok, 0]).sum())
        cyc += int((t[ok, CYC + end] - t[ok, CYC]).sum())
    return cyc / ns * 1e3 if ns > 0 and cyc > 0 else DEFAULT_SM_MHZ


@dataclass
class TraceLine:
    """The medians of one (shape, mode) over TRACE_RUNS launches."""

    phases: list[float]   # us since the block's start, per phase after `start` (nan: never)
    first: float          # first block start - the previous launch's last end (us)
    span: float           # last block end - the previous launch's last end (or first start)
    wait: float           # median waited stamp - the previous launch's last end
    keyed: int            # blocks that attended over keys
    sms: int              # distinct SMs used
    per_sm: int           # most of its blocks resident on one SM at once
    block_us: float       # median keyed block duration (us)
    late: float           # last keyed block's start - the launch's first start (us)


def summarize(t: np.ndarray, prev: np.ndarray | None, mhz: float) -> TraceLine:
    start, end = t[:, 0], t[:, P.index("end")]
    keyed = t[:, attention.TRACE_KEYED_WORD] == 1
    rows = t[keyed] if keyed.any() else t
    phases = []
    for i in range(1, len(P)):
        hit = rows[:, i] > 0
        phases.append(float(np.median(rows[hit, CYC + i] - rows[hit, CYC])) / mhz
                      if hit.any() else math.nan)
    ran = end > 0
    ref = int(prev[:, P.index("end")].max()) if prev is not None else int(start[ran].min()
                                                                          if ran.any() else 0)
    waited = t[:, P.index("waited")]
    wait = float(np.median(waited[waited > 0] - ref)) / 1e3 if (waited > 0).any() else math.nan
    sm = t[:, attention.TRACE_SM_WORD]
    per_sm = 0
    for s in np.unique(sm[ran]):  # most blocks of one SM whose [start, end) overlap
        on = ran & (sm == s)
        events = sorted([(int(a), 1) for a in start[on]] + [(int(b), -1) for b in end[on]],
                        key=lambda e: (e[0], e[1]))
        live = 0
        for _, step in events:
            live += step
            per_sm = max(per_sm, live)
    dur = (rows[:, CYC + P.index("end")] - rows[:, CYC]) / mhz
    first = int(start[ran].min()) if ran.any() else 0
    late = float(rows[:, 0].max() - first) / 1e3 if ran.any() else math.nan
    return TraceLine(phases, (first - ref) / 1e3 if ran.any() else math.nan,
                     (int(end[ran].max()) - ref) / 1e3 if ran.any() else math.nan, wait,
                     int(keyed.sum()), len(np.unique(sm[ran])), per_sm,
                     float(np.median(dur)) if len(dur) else math.nan, late)


def median_line(lines: list[TraceLine]) -> TraceLine:
    def med(get: Callable[[TraceLine], float]) -> float:
        vals = [get(x) for x in lines if not math.isnan(get(x))]
        return statistics.median(vals) if vals else math.nan
    return TraceLine([med(lambda x, i=i: x.phases[i]) for i in range(len(P) - 1)],
                     med(lambda x: x.first), med(lambda x: x.span), med(lambda x: x.wait),
                     lines[0].keyed, lines[0].sms, max(x.per_sm for x in lines),
                     med(lambda x: x.block_us), med(lambda x: x.late))


def _f(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.2f}"


def trace_table(env: Env, problems: list[Problem], modes: tuple[str, ...],
                dump: Path | None = None) -> list[str]:
    raw: list[tuple[Problem, str, list[tuple[np.ndarray, np.ndarray | None]]]] = []
    for pr in problems:
        for mode in modes:
            if mode in ("gemv", "graph") and pr.batch > 1:
                continue  # the GEMVs stand for batch-1 projections
            if mode == "swept" and pr.batch == 1:
                continue  # the batch-64 row's question (attn_step_gap.py)
            traced(env, pr, mode)  # warm: modules, caches, the counters' first use
            raw.append((pr, mode, [traced(env, pr, mode) for _ in range(TRACE_RUNS)]))
    mhz = sm_clock_mhz([t for _, _, runs in raw for t, _ in runs])
    if dump is not None:  # every block's stamps, for per-block timelines (--dump)
        np.savez(dump, **{f"{pr.kernel}|{pr.keys}|{mode}|{i}": t for pr, mode, runs in raw
                          for i, (t, _) in enumerate(runs)})
    head = (f"{'shape':<34} {'mode':<5} {'kernel':<24} {'grid':<14} {'keyed':>5} {'SMs':>4} "
            f"{'/SM':>3} " + " ".join(f"{p[:9]:>9}" for p in P[1:]) +
            f" {'first':>7} {'wait':>7} {'span':>7} {'block':>7} {'late':>7}")
    out = [f"phase trace: us since the block's start (median over keyed blocks, SM clock "
           f"{mhz:.0f} MHz); first / wait / span in us after the previous launch's end "
           "(alone, graph: after its own first start)", head]
    for pr, mode, runs in raw:
        line = median_line([summarize(t, prev, mhz) for t, prev in runs])
        shape = f"{pr.heads.name} b{pr.batch} keys{pr.keys} splits{pr.splits}"
        out.append(f"{shape:<34} {mode:<5} {pr.kernel:<24} {str(pr.grid):<14} "
                   f"{line.keyed:>5} {line.sms:>4} {line.per_sm:>3} " +
                   " ".join(f"{_f(v):>9}" for v in line.phases) +
                   f" {_f(line.first):>7} {_f(line.wait):>7} {_f(line.span):>7} "
                   f"{_f(line.block_us):>7} {_f(line.late):>7}")
    return out


# ---- time vs keys -----------------------------------------------------------------------

def graph_us(env: Env, sets: list[Problem], step: Callable[[Problem, Stream], None],
             repeats: int) -> float:
    def run(i: int) -> None:
        step(sets[i], env.stream())
    return time_cuda(env, run, len(sets), repeats).us if env.cuda else math.nan


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares (intercept us, slope us per key) over the points past FIT_FROM_KEYS."""
    xs = [k for k, t in points if k >= FIT_FROM_KEYS and not math.isnan(t)]
    ys = [t for k, t in points if k >= FIT_FROM_KEYS and not math.isnan(t)]
    if len(xs) < 2:
        return math.nan, math.nan
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def curve(env: Env, heads: Any, hidden: int, keys: tuple[int, ...], repeats: int,
          long: bool = False) -> list[str]:
    out = [f"{heads.name} (hq {heads.heads}, hkv {heads.kv_heads}, D {heads.head_dim}) "
           f"batch 1: keys, attention us, GEMV + attention us, GEMV us, added behind the GEMV"]
    points, behind = [], []
    for n in keys:
        width = (heads.heads + 2 * heads.kv_heads if heads.rope else heads.heads) * \
            heads.head_dim
        per_set = 4 * n * heads.kv_heads * heads.head_dim + 2 * width * hidden  # K/V + GEMV w
        copies = max(2, min(MAX_COPIES, -(-ROTATE_BYTES // per_set))) if env.cuda else 2
        sets = [Problem(env, heads, 1, n, hidden, long) for _ in range(copies)]
        alone = graph_us(env, sets, lambda pr, s: pr.attend(s), repeats)
        pair = graph_us(env, sets, lambda pr, s: (pr.project(s), pr.attend(s)), repeats)
        gemv = graph_us(env, sets, lambda pr, s: pr.project(s), repeats)
        points.append((n, alone))
        behind.append((n, pair - gemv))
        out.append(f"  keys {n:>5}  {_f(alone):>7}  {_f(pair):>7}  {_f(gemv):>7}  "
                   f"{_f(pair - gemv):>7}   ({sets[0].kernel}, {sets[0].splits} splits)")
        del sets
    key_bytes = 4 * heads.kv_heads * heads.head_dim  # K and V, bf16
    for label, pts in (("alone", points), ("behind the GEMV", behind)):
        b0, slope = fit(pts)
        gbs = key_bytes / (slope * 1e3) if slope > 0 else math.nan
        out.append(f"  fit keys >= {FIT_FROM_KEYS} ({label}): intercept {_f(b0)} us, slope "
                   f"{_f(slope * 1e3)} us per 1k keys = {_f(gbs)} GB/s of K/V")
    return out


def block_lines(dump: dict[str, np.ndarray], run: str = "2") -> list[str]:
    """Each alone / graph launch of a --dump file (run `run` of its repeats): its last-ending
    block against its median keyed block, every phase in globaltimer us from the launch's
    first block start, then its keyed blocks' end times (which block ends a launch late, and
    in which phase it spends the difference)."""
    out = []
    for key in sorted(dump):
        name, keys, mode, which = key.split("|")
        if which != run or mode not in ("alone", "graph"):
            continue
        t = dump[key].astype(np.int64)
        ran = t[:, P.index("end")] > 0
        t0 = t[ran, 0].min()
        keyed = np.where(ran & (t[:, attention.TRACE_KEYED_WORD] == 1))[0]
        last = int(np.argmax(np.where(ran, t[:, P.index("end")], 0)))
        med = keyed[np.argsort(t[keyed, P.index("end")])[len(keyed) // 2]]
        out.append(f"{name} {mode} keys {keys}: {len(keyed)} keyed of {int(ran.sum())} blocks; "
                   f"last block {last} (keyed {int(t[last, attention.TRACE_KEYED_WORD])}, SM "
                   f"{int(t[last, attention.TRACE_SM_WORD])}) vs median keyed block {med}")
        for b, tag in ((last, "last"), (med, "median")):
            stamps = " ".join(f"{p}={(t[b, i] - t0) / 1e3:.2f}" if t[b, i] > 0 else f"{p}=nan"
                              for i, p in enumerate(P))
            out.append(f"  {tag:<6} {stamps}")
        ends = np.sort((t[keyed, P.index("end")] - t0) / 1e3)
        out.append("  keyed ends (us): " + " ".join(f"{e:.2f}" for e in ends))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="two geometries, fewer curve points")
    ap.add_argument("--ptx-dir", type=Path, help="PTX set directory (default: the registry's)")
    ap.add_argument("--model", default="qwen3-8b", help="model whose PTX set runs (registry)")
    ap.add_argument("--repeats", type=int, default=10, help="timed graph replays per point")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dry-run", action="store_true", help="CPU: tiny shapes, HostBackend")
    ap.add_argument("--long", action="store_true",
                    help="the tensor-core kernel's batch-1 entry (rope-fused D 64 / 128 heads)")
    ap.add_argument("--gated", action="store_true",
                    help="with --long: Qwen3.5's D-256 heads on the one-launch gated entry "
                         "(ATLAS_DECODE_ATTN_LONG_GATED) as well as the plain D-256 entry")
    ap.add_argument("--heads", help="comma-separated DECODE_LATENCY_HEADS names to run "
                                    "(default: all; e.g. qwen3-30b-a3b)")
    ap.add_argument("--keys", help="comma-separated trace key counts (default: TRACE_KEYS)")
    ap.add_argument("--dump", type=Path,
                    help="also save every traced launch's per-block stamps (.npz; keys "
                         "kernel|keys|mode|run, rows [block, TRACE_WORDS]) and print each "
                         "launch's last block against its median one (block_lines)")
    ap.add_argument("--blocks", type=Path,
                    help="only print block_lines of an earlier --dump file (no device)")
    ap.add_argument("--trace-only", action="store_true",
                    help="the phase table of batch 1 only: no batch-64 row, no curves")
    ap.add_argument("--curves-only", action="store_true",
                    help="only the time-vs-keys lines (for routes without traced twins, e.g. "
                         "ATLAS_DECODE_ATTN_SPLIT_MAJOR=1)")
    args = ap.parse_args(argv)
    if args.blocks:
        with np.load(args.blocks) as dump:
            print("\n".join(block_lines(dict(dump))))
        return 0
    env, info, ptx_set = open_env(args)
    print(f"device: {info.get('name')}  PTX set: {ptx_set}  SMs: {env.num_sms}")
    if args.dry_run:
        geoms = [(h, TINY_HIDDEN) for h in TINY_HEADS]
        keys, curve_keys, throughput = (5, 40), (1, 40, 1100, 1200), (3, 70)
    else:
        geoms = [(h, HIDDEN[h.name]) for h in ks.DECODE_LATENCY_HEADS]
        keys, curve_keys, throughput = TRACE_KEYS, CURVE_KEYS, THROUGHPUT
        if args.quick:
            geoms, curve_keys = geoms[:2], (1, 64, 512, 1024, 4096, 8192)
    if args.long:  # the rope-fused entries' geometries and Qwen3.5's plain D-256 entry
        geoms = [g for g in geoms if (g[0].rope and g[0].head_dim in LONG_ROPE_HEAD_DIMS)
                 or (not g[0].rope and g[0].head_dim == 256)]
    if args.heads:
        geoms = [g for g in geoms if g[0].name in args.heads.split(",")]
    if args.keys:
        keys = tuple(int(k) for k in args.keys.split(","))
    if not args.curves_only:
        problems = [Problem(env, h, 1, n, hidden, args.long) for h, hidden in geoms
                    for n in keys]
        if args.gated:  # the gated entry beside the plain D-256 one
            problems += [Problem(env, h, 1, n, hidden, True, gated=True) for h, hidden in geoms
                         for n in keys if h.head_dim == 256]
        # the batch-64 row on a rope-fused geometry (none where --heads picks only D 256)
        big = next((g for g in geoms if g[0].name == "qwen3-8b"),
                   next((g for g in geoms if g[0].rope), None))
        if not args.trace_only and big is not None:
            problems.append(Problem(env, big[0], throughput[0], throughput[1], big[1],
                                    args.long))
        for line in trace_table(env, problems, ("alone", "b2b", "gemv", "graph", "swept"),
                                args.dump):
            print(line, flush=True)
        del problems
        if args.dump:
            with np.load(args.dump) as dump:
                print("\n".join(block_lines(dict(dump))), flush=True)
    if args.trace_only:
        return 0
    for h, hidden in geoms:
        for line in curve(env, h, hidden, curve_keys, args.repeats, args.long):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
