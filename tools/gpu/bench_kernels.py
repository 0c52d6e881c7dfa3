#!/usr/bin/env python3
"""Kernel table: every Atlas kernel family against its PyTorch equivalent on one GPU.

For each shape of `atlas.bench.kernel_shapes.table_shapes()` both sides compute the same
thing on the same random (never zero) inputs. Ours is checked against PyTorch once (relative
error, NaN never passes, our outputs poisoned first) before anything is timed, so a wrong
kernel is never timed. Timing: each side's iteration is captured `iters` times into a CUDA
graph (so the Python launch path is out of both numbers, and a multi-kernel PyTorch sequence
pays its kernel-to-kernel gaps as it would in a captured engine), cycling through enough
input sets that the bytes between two uses of one set exceed the L2 cache; the graph is
warmed up, replayed `--repeats` times between CUDA events on one stream, and the median per
iteration is reported. Ceilings are measured first: device copy bandwidth with 4 GiB
buffers (bytes read + written) and a bf16 8192^3 torch.matmul.

One command runs the whole table; a failing shape prints FAIL with its error and the rest
continue. The table prints last and is written as JSON + Markdown to --out-dir
(`kernel_table-<date>-<commit>.{json,md}`) with GPU, driver, commit and date; the JSON's
`metrics` (speedup_min, speedup_geomean) feed the `kernel-table` gate. Exit status 1 when
any row failed.

    python3 tools/gpu/bench_kernels.py [--quick] [-k TEXT] [--out-dir DIR] [--ptx-dir DIR]
    python3 tools/gpu/bench_kernels.py --dry-run   # CPU: tiny shapes, HostBackend + CPU torch
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import functools
import importlib.util
import json
import math
import statistics
import sys
import tempfile
import time
import dataclasses
import traceback
import warnings
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "py"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from atlas.core.cold_reads import rotation_copies  # noqa: E402
from atlas.core.quant import Fp8ScaleMap  # noqa: E402
from atlas.model.step_inputs import decode_splits  # noqa: E402
from atlas.runtime.gpu import DevicePtr, GpuBackend, Stream  # noqa: E402
from atlas.runtime.kernel_abi import SAMPLE_ROW  # noqa: E402
from atlas.runtime.ops import (KernelCache, activation, attention,  # noqa: E402
                               attention_long, attention_verify, embedding,
                               gating, linear_attention, matmul, matmul_batched,
                               matmul_decode, matmul_fp8_wgmma, matmul_nvfp4, matmul_quant,
                               matmul_quant_mma,
                               moe, norm, rope, sampling)
from atlas.runtime.ops.matmul_nvfp4 import Nvfp4Weight  # noqa: E402
from atlas.runtime.ops.matmul_quant import Fp8Weight  # noqa: E402
from check_kernels import git_commit, load_sources, nvidia_driver_version  # noqa: E402


def _load_kernel_shapes() -> Any:
    """atlas.bench.kernel_shapes, also when the harness package's __init__ needs packages
    the GPU image lacks (this module itself needs only the standard library)."""
    try:
        from atlas.bench import kernel_shapes
        return kernel_shapes
    except ImportError:
        path = REPO / "py" / "atlas" / "bench" / "kernel_shapes.py"
        spec = importlib.util.spec_from_file_location("atlas_bench_kernel_shapes", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses resolve annotations through it
        spec.loader.exec_module(module)
        return module


ks = _load_kernel_shapes()

#: bytes that pass between two uses of one input set (the H200's L2 is 50-60 MB)
ROTATE_BYTES = 256 << 20
MAX_COPIES = 64
#: a captured graph should run about this long, so the replay's own start is noise
GRAPH_TARGET_US = 2000.0
MAX_ITERS = 512
EPS = 1e-6
#: the engine's default max_seq_len (model.load): decode attention's split count follows it
ENGINE_MAX_SEQ_LEN = 8192
ROPE_THETA = 1e6
#: relative error ||ours - torch|| / ||torch|| allowed per output dtype
BF16_TOL = 2e-2
F32_TOL = 5e-3
#: top-p slack when checking that our sampled token lies in PyTorch's kept set
TOP_P_SLACK = 1e-3
#: input sets of the CPU dry run (it checks the flow, not the cache)
DRY_RUN_COPIES = 2
#: shapes of the CPU dry run: small enough for the numpy reference kernels
TINY = ks.ModelDims("tiny", hidden=64, heads=4, kv_heads=2, head_dim=64, intermediate=96,
                    vocab=512)
TINY_MOE = ks.MoeDims("tiny-moe", hidden=64, experts=8, top_k=2, inter=32)
TINY_MOE_ROUTER = ks.MoeDims("tiny-moe-sigmoid", hidden=64, experts=40, top_k=4, inter=32,
                             scoring="sigmoid")
#: (8 value heads: the in_proj width 656 is a multiple of 16, as the GEMMs of batch > 8 need)
TINY_HYBRID = ks.HybridDims("tiny-hybrid", heads=4, kv_heads=2, head_dim=64, key_heads=2,
                            value_heads=8, key_dim=32, value_dim=32, conv_kernel=4, hidden=64)
#: the latency rows' two kernels: rope fused (D 64) and the unfused one at D 256
TINY_LATENCY_HEADS = (ks.AttentionHeads("tiny", 4, 2, 64, True),
                      ks.AttentionHeads("tiny-d256", 4, 1, 256, False))


# ---- the device the table runs on -------------------------------------------------------

class Env:
    """Torch device, our kernels, and how a torch tensor becomes a pointer our ops take.

    On CUDA our launches go onto torch's current stream and read torch's memory directly,
    so both sides run on one stream and one set of buffers. In the CPU dry run the
    HostBackend (numpy reference kernels) cannot read torch memory: each `ptr` mirrors the
    tensor into a host-backend buffer, and `finish` copies every mirror back.
    """

    def __init__(self, torch: Any, backend: GpuBackend, cuda: bool, seed: int) -> None:
        self.torch = torch
        self.backend = backend
        self.cuda = cuda
        self.device = torch.device("cuda" if cuda else "cpu")
        self.kc = KernelCache(backend)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(seed)
        self.num_sms = self.kc.facts.sm_count  # the driver's; H200 defaults on the host
        self._mirrors: list[tuple[Any, DevicePtr]] = []

    def stream(self) -> Stream:
        if self.cuda:
            return int(self.torch.cuda.current_stream().cuda_stream)
        return self.backend.default_stream()

    def ptr(self, t: Any) -> DevicePtr:
        if not t.is_contiguous():
            raise ValueError("kernel arguments must be contiguous tensors")
        if self.cuda:
            return int(t.data_ptr())
        p = self.backend.upload(self.host_bytes(t))
        self._mirrors.append((t, p))
        return p

    def host_bytes(self, t: Any) -> np.ndarray:
        """The bytes of a contiguous CPU tensor as a writable uint8 numpy view."""
        return t.view(-1).view(self.torch.uint8).numpy()

    def finish(self) -> None:
        """Make our last launches' results visible in the torch tensors."""
        for t, p in self._mirrors:
            raw = self.backend.download(p, np.uint8, t.numel() * t.element_size())
            self.host_bytes(t)[:] = raw
            self.backend.free(p)
        self._mirrors.clear()

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    # ---- random inputs (uniform, never zero) ----
    def uniform(self, shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0,
                dtype: Any = None) -> Any:
        t = self.torch.rand(shape, generator=self.gen, device=self.device)
        return (t * (hi - lo) + lo).to(dtype or self.torch.bfloat16)

    def normal(self, shape: tuple[int, ...], std: float) -> Any:
        return self.torch.randn(shape, generator=self.gen, device=self.device) * std

    def randperm(self, n: int) -> Any:
        return self.torch.randperm(n, generator=self.gen, device=self.device)

    def randint(self, high: int, shape: tuple[int, ...]) -> Any:
        return self.torch.randint(0, high, shape, generator=self.gen, device=self.device)


# ---- a case: one shape, our launch, PyTorch's equivalents ------------------------------

Set = dict[str, Any]


@dataclass
class Variant:
    """One PyTorch way of computing the shape; each variant is its own table row."""

    label: str
    run: Callable[[Set], Any]
    note: str = ""
    #: the attention backend this variant runs on, once its first call picked it
    sdpa: Sdpa | None = None
    #: relative-error tolerance when this variant computes something else on purpose (an
    #: FP8 activation quantization); None: the output dtype's
    tol: float | None = None

    @property
    def full_label(self) -> str:
        return f"{self.label} [{self.sdpa.name}]" if self.sdpa else self.label


@dataclass
class Case:
    """Input sets, our launch and PyTorch's variants for one shape.

    `outputs` are poisoned before our checked run; `mutated` are inputs a side updates in
    place (cloned for PyTorch's checked run so both start equal); `compare` pairs our
    results with PyTorch's (ours set, torch set, torch's return) as (name, ours, theirs).
    """

    shape: Any
    make_set: Callable[[], Set]
    ours: Callable[[Set, Stream], None]
    variants: list[Variant]
    compare: Callable[[Set, Set, Any], list[tuple[str, Any, Any]]]
    outputs: tuple[str, ...] = ()
    mutated: tuple[str, ...] = ()
    note: str = ""
    #: compare for equality (token ids, membership flags), not by relative error
    exact: bool = False
    sets: list[Set] = field(default_factory=list)


def rel_error(torch: Any, ours: Any, ref: Any) -> float:
    a, b = ours.double().reshape(-1), ref.double().reshape(-1)
    if bool(torch.isnan(a).any()) or bool(torch.isnan(b).any()):
        return float("nan")
    den = float(torch.linalg.vector_norm(b))
    return float(torch.linalg.vector_norm(a - b)) / (den if den > 0 else 1.0)


def tolerance(torch: Any, t: Any) -> float:
    return F32_TOL if t.dtype == torch.float32 else BF16_TOL


# ---- families ---------------------------------------------------------------------------

def norm_case(env: Env, s: Any) -> Case:
    torch, F = env.torch, env.torch.nn.functional
    rows, dim = s.rows, s.dim

    def make() -> Set:
        st = {"x": env.uniform((rows, dim)), "w": env.uniform((dim,), 0.5, 1.5),
              "out": torch.empty((rows, dim), dtype=torch.bfloat16, device=env.device)}
        if s.residual:
            st["delta"] = env.uniform((rows, dim))
        return st

    if s.residual:
        def ours(st: Set, stream: Stream) -> None:
            norm.add_rmsnorm(env.kc, stream, env.ptr(st["x"]), env.ptr(st["delta"]),
                             env.ptr(st["w"]), env.ptr(st["out"]), rows, dim, EPS)

        def theirs(st: Set) -> Any:
            st["x"].add_(st["delta"])
            return F.rms_norm(st["x"], (dim,), st["w"], EPS)

        def compare(o: Set, t: Set, r: Any) -> list:
            return [("out", o["out"], r), ("residual", o["x"], t["x"])]

        return Case(s, make, ours, [Variant("x += r; F.rms_norm(x, w)", theirs)], compare,
                    outputs=("out",), mutated=("x",))

    def ours_plain(st: Set, stream: Stream) -> None:
        norm.rmsnorm(env.kc, stream, env.ptr(st["x"]), env.ptr(st["w"]), env.ptr(st["out"]),
                     rows, dim, EPS)

    return Case(s, make, ours_plain,
                [Variant("F.rms_norm(x, w)", lambda st: F.rms_norm(st["x"], (dim,), st["w"], EPS))],
                lambda o, t, r: [("out", o["out"], r)], outputs=("out",))


def rope_case(env: Env, s: Any) -> Case:
    torch, F = env.torch, env.torch.nn.functional
    t_, hq, hkv, d, bs = s.tokens, s.heads, s.kv_heads, s.head_dim, ks.KV_BLOCK_SIZE
    heads, half = hq + 2 * hkv, d // 2
    max_pos = max(4096, t_)
    inv_freq = ROPE_THETA ** (-torch.arange(0, half, device=env.device).double() / half)
    angles = torch.arange(max_pos, device=env.device).double()[:, None] * inv_freq[None, :]
    cos_sin = torch.cat([angles.cos(), angles.sin()], dim=1).float().contiguous()
    nb = -(-t_ // bs)
    decode = t_ <= 64

    def make() -> Set:
        pos = (env.randint(max_pos, (t_,)) if decode
               else torch.arange(t_, device=env.device)).to(torch.int32)
        slots = env.randperm(nb * bs)[:t_].to(torch.int32)
        ang = angles[pos.long()]
        cos = torch.cat([ang.cos(), ang.cos()], dim=1)[:, None, :].to(torch.bfloat16)
        sin = torch.cat([ang.sin(), ang.sin()], dim=1)[:, None, :].to(torch.bfloat16)
        pool = (nb, hkv, bs, d)
        return {"qkv": env.uniform((t_, heads * d)), "qw": env.uniform((d,), 0.5, 1.5),
                "kw": env.uniform((d,), 0.5, 1.5), "cos_sin": cos_sin, "pos": pos,
                "slots": slots, "blk": (slots // bs).long(), "off": (slots % bs).long(),
                "cos": cos.contiguous(), "sin": sin.contiguous(),
                "q_out": torch.empty((t_, hq, d), dtype=torch.bfloat16, device=env.device),
                "k_cache": torch.zeros(pool, dtype=torch.bfloat16, device=env.device),
                "v_cache": torch.zeros(pool, dtype=torch.bfloat16, device=env.device)}

    def ours(st: Set, stream: Stream) -> None:
        qw = env.ptr(st["qw"]) if s.qk_norm else 0
        kw = env.ptr(st["kw"]) if s.qk_norm else 0
        rope.qk_norm_rope_kv(env.kc, stream, env.ptr(st["qkv"]), env.ptr(st["q_out"]),
                             env.ptr(st["k_cache"]), env.ptr(st["v_cache"]), qw, kw,
                             env.ptr(st["cos_sin"]), env.ptr(st["pos"]), env.ptr(st["slots"]),
                             t_, hq, hkv, d, bs, EPS)

    def rotate(x: Any, cos: Any, sin: Any) -> Any:
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    def theirs(st: Set) -> Any:
        x = st["qkv"].view(t_, heads, d)
        q, k, v = x[:, :hq], x[:, hq:hq + hkv], x[:, hq + hkv:]
        if s.qk_norm:
            q = F.rms_norm(q, (d,), st["qw"], EPS)
            k = F.rms_norm(k, (d,), st["kw"], EPS)
        q = rotate(q, st["cos"], st["sin"])
        st["k_cache"][st["blk"], :, st["off"]] = rotate(k, st["cos"], st["sin"])
        st["v_cache"][st["blk"], :, st["off"]] = v
        return q

    def compare(o: Set, t: Set, r: Any) -> list:
        return [("q", o["q_out"], r), ("k_cache", o["k_cache"], t["k_cache"]),
                ("v_cache", o["v_cache"], t["v_cache"])]

    ops_ = "F.rms_norm q,k; " if s.qk_norm else ""
    return Case(s, make, ours, [Variant(ops_ + "rotate_half RoPE; index_put paged K/V", theirs,
                                        "cos/sin gathered per position outside the timed "
                                        "region (once per forward, as transformers does)")],
                compare, outputs=("q_out",), mutated=("k_cache", "v_cache"))


def silu_case(env: Env, s: Any) -> Case:
    torch, F = env.torch, env.torch.nn.functional
    rows, inter = s.rows, s.inter

    def make() -> Set:
        return {"gu": env.uniform((rows, 2 * inter), -4, 4),
                "out": torch.empty((rows, inter), dtype=torch.bfloat16, device=env.device)}

    def ours(st: Set, stream: Stream) -> None:
        activation.silu_mul(env.kc, stream, env.ptr(st["gu"]), env.ptr(st["out"]), rows, inter)

    def theirs(st: Set) -> Any:
        g, u = st["gu"].chunk(2, dim=-1)
        return F.silu(g) * u

    return Case(s, make, ours, [Variant("F.silu(g) * u", theirs)],
                lambda o, t, r: [("out", o["out"], r)], outputs=("out",))


def embedding_case(env: Env, s: Any) -> Case:
    torch, F = env.torch, env.torch.nn.functional
    table = env.uniform((s.vocab, s.dim))

    def make() -> Set:
        ids = env.randint(s.vocab, (s.tokens,))
        return {"table": table, "ids": ids.to(torch.int32), "ids64": ids,
                "out": torch.empty((s.tokens, s.dim), dtype=torch.bfloat16, device=env.device)}

    def ours(st: Set, stream: Stream) -> None:
        embedding.embedding(env.kc, stream, env.ptr(st["ids"]), env.ptr(st["table"]),
                            env.ptr(st["out"]), s.tokens, s.dim, s.vocab)

    return Case(s, make, ours, [Variant("F.embedding", lambda st: F.embedding(st["ids64"],
                                                                              st["table"]))],
                lambda o, t, r: [("out", o["out"], r)], outputs=("out",),
                note="one table shared by all input sets; the ids rotate")


def swiglu_linear_case(env: Env, s: Any) -> Case:
    """The down projection with its SwiGLU (matmul.linear_silu: one fused GEMV at batch 1)
    against F.silu(g) * u, then matmul."""
    torch, F = env.torch, env.torch.nn.functional
    m, n, k = s.m, s.n, s.k

    def make() -> Set:
        scale = 1.0 / math.sqrt(k)
        return {"gu": env.uniform((m, 2 * k), -4, 4),
                "w": env.uniform((n, k), -scale * 3, scale * 3),
                "act": torch.empty((m, k), dtype=torch.bfloat16, device=env.device),
                "y": torch.empty((m, n), dtype=torch.bfloat16, device=env.device)}

    def ours(st: Set, stream: Stream) -> None:
        matmul.linear_silu(env.kc, stream, env.ptr(st["gu"]), env.ptr(st["w"]), env.ptr(st["y"]),
                           m, n, k, scratch=env.ptr(st["act"]))

    def theirs(st: Set) -> Any:
        g, u = st["gu"].chunk(2, dim=-1)
        return torch.matmul(F.silu(g) * u, st["w"].T)

    route = ("one fused GEMV" if matmul.fuses_silu(env.kc, m, n, k)
             else "silu_mul + " + matmul.linear_route(env.kc, m, n))
    note = f"ours: {route} (ops.matmul.linear_silu)"
    return Case(s, make, ours, [Variant("F.silu(g) * u @ w.T", theirs)],
                lambda o, t, r: [("y", o["y"], r)], outputs=("y",), note=note)


def gate_up_swiglu_case(env: Env, s: Any, kc: KernelCache) -> Case:
    """The gate_up projection ending with its SwiGLU (matmul.linear_swiglu where
    fuses_gate_up_swiglu allows: decode batches on the decode GEMM's SwiGLU entries; else
    the GEMV/GEMM then silu_mul) against matmul, then
    F.silu(g) * u. `kc`: the row's routes (its decode GEMM kernel and block shape)."""
    torch, F = env.torch, env.torch.nn.functional
    m, n, k = s.m, s.n, s.k
    fused = matmul.fuses_gate_up_swiglu(kc, m, n, k)

    def make() -> Set:
        scale = 1.0 / math.sqrt(k)
        return {"x": env.uniform((m, k)), "w": env.uniform((n, k), -scale * 3, scale * 3),
                "gu": torch.empty((m, n), dtype=torch.bfloat16, device=env.device),
                "act": torch.empty((m, n // 2), dtype=torch.bfloat16, device=env.device)}

    def ours(st: Set, stream: Stream) -> None:
        x, w, gu, act = (env.ptr(st[name]) for name in ("x", "w", "gu", "act"))
        if fused:
            matmul.linear_swiglu(kc, stream, x, w, act, m, n, k)
            return
        matmul.linear(kc, stream, x, w, gu, m, n, k)
        activation.silu_mul(kc, stream, gu, act, m, n // 2)

    def theirs(st: Set) -> Any:
        g, u = torch.matmul(st["x"], st["w"].T).chunk(2, dim=-1)
        return F.silu(g) * u

    route = matmul.linear_route(kc, m, n)
    if route == "gemm_decode_sm90":
        route = decode_gemm_note(kc, m, n, k, s.wide, swiglu=fused)
    route = (f"one {route} launch ending with the SwiGLU (ops.matmul.linear_swiglu)" if fused
             else f"{route} + silu_mul")
    return Case(s, make, ours, [Variant("matmul, F.silu(g) * u", theirs)],
                lambda o, t, r: [("act", o["act"], r)], outputs=("act",), note=f"ours: {route}")


def decode_gemm_note(kc: KernelCache, m: int, n: int, k: int, wide: bool | None,
                     out_f32: bool = False, swiglu: bool = False) -> str:
    """Which decode GEMM kernel a row runs, its block shape, cluster split and ring (`wide`
    None: the routes' own, so the tuner's pick where it runs: the rule's shown, marked)."""
    tma = matmul_decode.uses_tma(kc)
    groups = matmul_decode.decode_groups(m, wide, tma)
    split = matmul_decode.launch_split(kc, m, n, k, out_f32, swiglu, tma, groups)
    cols = matmul_decode.decode_cols(m)
    stages = (matmul_decode.ring_stages(cols, groups, matmul_decode.TMA_MAX_STAGES) if tma
              else matmul_decode.ring_stages(cols, groups))
    ring = (f"TMA ring of {stages} stages" if tma else f"cp.async ring of {stages} stages, "
            f"L2 window {kc.routes.decode_gemm_l2_tiles} k-tiles")
    # the persistent route (default; ATLAS_DECODE_GEMM_PERSISTENT=0: off): the grids of several
    # waves loop over tiles instead
    looped = (matmul_decode.persistent_launch_grid(kc, m, n, out_f32, swiglu, (split, groups))
              if tma else None)
    grid = "" if looped is None else f", persistent grid of {looped} blocks"
    tuned = (" unless the start-up tuner picked another (ops/decode_gemm_tune)"
             if wide is None and matmul_decode.tunes(kc) else "")
    return (f"{'gemm_decode_tma' if tma else 'gemm_decode_sm90'}, {groups} warpgroup(s) a "
            f"block, cluster split {split}, {ring}{grid}{tuned}")


def linear_case(env: Env, s: Any) -> Case:
    torch = env.torch
    m, n, k = s.m, s.n, s.k
    if s.swiglu:
        return swiglu_linear_case(env, s)
    routes = env.kc.routes
    if s.decode_sm90:  # the row's decode GEMM kernel and block shape, whichever op runs it
        routes = replace(routes, decode_gemm_tma=routes.decode_gemm_tma and not s.cpasync,
                         decode_gemm_wide=s.wide)
    if s.gemv:
        routes = replace(routes, gemv_ring=s.gemv == "ring", gemv_ring_single=s.gemv == "ring")
    kc = env.kc if routes == env.kc.routes else KernelCache(env.kc.backend, routes=routes)
    if s.ends_swiglu:
        return gate_up_swiglu_case(env, s, kc)
    out_dtype = torch.float32 if s.out_f32 else torch.bfloat16
    f32_mm = _f32_matmul(env) if s.out_f32 else None

    def make() -> Set:
        scale = 1.0 / math.sqrt(k)
        return {"x": env.uniform((m, k)), "w": env.uniform((n, k), -scale * 3, scale * 3),
                "y": torch.empty((m, n), dtype=out_dtype, device=env.device)}

    launch = (matmul_decode.decode_gemm if s.decode_sm90
              else matmul_batched.batched_gemv if s.batched
              else partial(matmul.gemv, single=m == 1 and s.gemv == "tiled") if s.gemv
              else matmul.linear)

    def ours(st: Set, stream: Stream) -> None:
        launch(kc, stream, env.ptr(st["x"]), env.ptr(st["w"]), env.ptr(st["y"]), m, n, k,
               s.out_f32)

    if f32_mm is not None:
        variant = Variant(f32_mm[0], lambda st: f32_mm[1](st["x"], st["w"]))
    else:
        variant = Variant("torch.matmul(x, w.T)", lambda st: torch.matmul(st["x"], st["w"].T))
    if s.decode_sm90:
        note = (f"ours: {decode_gemm_note(kc, m, n, k, s.wide, s.out_f32)} "
                f"(ops.matmul_decode.decode_gemm, forced)")
    elif s.batched:
        note = "ours: gemv_mma (ops.matmul_batched.batched_gemv, forced)"
    elif s.gemv == "ring" and (plan := matmul.gemv_ring_plan(
            n, k, kc.facts.sm_count, kc.facts.shared_memory_per_sm,
            kc.routes.gemv_ring_stages)) is not None:
        note = (f"ours: gemv_ring (ops.matmul.gemv, forced), {plan.grid} blocks of "
                f"{plan.threads}, {plan.stages} stages")
    elif s.gemv:
        note = "ours: the register-tiled gemv_bf16 (ops.matmul.gemv, ATLAS_GEMV_RING=0)"
    else:
        route = matmul.linear_route(env.kc, m, n)
        if route == "gemm_sm90_tma" and env.kc.routes.gemm_tma_multicast:
            route += " in clusters of 2 (W multicast)"
        if route.startswith("gemm_sm90_tma") and env.kc.routes.gemm_tma_persistent:
            route += ", persistent grid"
        note = f"ours: {route} (ops.matmul.linear's choice for m={m})"
    return Case(s, make, ours, [variant], lambda o, t, r: [("y", o["y"], r)], outputs=("y",),
                note=note)


#: E2M1 code -> value (sign in bit 3), for PyTorch's NVFP4 dequantization
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0,
               -4.0, -6.0)
#: x quantized to FP8 for torch._scaled_mm: E4M3's 3 mantissa bits cost ~4% rms per element
SCALED_MM_TOL = 6e-2


def quant_route(kc: KernelCache, w: Any, m: int, plain: bool = True) -> str:
    """The kernel QuantLinear runs an m-row product on (matmul_quant's dispatch); `plain`:
    a bf16 product (not the SwiGLU-ending gate_up, not f32 logits)."""
    if matmul_fp8_wgmma.uses(kc, w, m):
        return "gemm_decode_fp8 (FP8 tensor cores, TMA ring, x as two E4M3 parts)"
    if matmul_quant.uses_fp8_h2(kc, w, m):
        return "gemv_fp8_h2 (CUDA cores, E4M3 convert to f16, HFMA2)"
    if plain and matmul_quant.uses_core_single(kc, w, m):
        return "gemv_fp8_cvt_bf16_single (CUDA cores, hardware E4M3 convert)"
    if matmul_nvfp4.uses_h2(kc, w, m):
        return "gemv_nvfp4_h2 (CUDA cores, f16 decode, HFMA2)"
    if matmul_quant.uses_mma(kc, w, m):
        if matmul_quant_mma.uses_direct(kc, w, m):
            if matmul_quant_mma.uses_staged(kc, w):
                return "gemv_quant_direct (tensor cores, staged by bulk copies)"
            loop = matmul_quant_mma.direct_loop(kc, w)
            return f"gemv_quant_direct (tensor cores, register-fed, {loop} loop)"
        return "gemv_mma_quant (tensor cores, shared-memory ring)"
    fmt = "fp8" if isinstance(w, Fp8Weight) else "nvfp4"
    if matmul_quant.gemv_passes(w.nbytes, w.n, w.k, m):
        return f"gemv_{fmt} x{-(-m // matmul.GEMV_MAX_M)} passes"
    return f"dequant_{fmt} + {matmul.linear_route(kc, m, w.n)}"


def quant_linear_case(env: Env, s: Any) -> Case:
    """Our quantized decode GEMV (matmul_quant.QuantLinear, what a model layer calls) against
    PyTorch dequantizing the same weights then torch.matmul, and for FP8 torch._scaled_mm
    (per-tensor scales, x quantized to FP8 inside the timed op) where it runs at this M.
    Block scales are all equal here so _scaled_mm computes the same weights; the GPU check
    cases cover varying scales."""
    torch = env.torch
    m, n, k = s.m, s.n, s.k
    fp8 = s.fmt == "fp8-block"
    lut = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=env.device)

    out_n = n // 2 if s.swiglu else n

    def make() -> Set:
        st: Set = {"x": env.uniform((m, k)),
                   "y": torch.empty((m, out_n), device=env.device,
                                    dtype=torch.float32 if s.logits else torch.bfloat16)}
        if fp8:
            codes = env.randint(256, (n, k)).to(torch.uint8)
            codes = torch.where((codes & 0x7F) == 0x7F, codes ^ 1, codes)  # no NaN codes
            w_scale = 1.0 / (100.0 * math.sqrt(k))
            st.update(codes=codes, scale=torch.full((-(-n // 128), -(-k // 128)), w_scale,
                                                    dtype=torch.float32, device=env.device),
                      w_scale=torch.tensor(w_scale, dtype=torch.float32, device=env.device))
        else:
            st.update(codes=env.randint(256, (n, k // 2)).to(torch.uint8),
                      scale=(env.randint(0x18, (n, k // 16)) + 0x30).to(torch.uint8),
                      rows=torch.full((n,), 1.0 / (4.0 * math.sqrt(k)), dtype=torch.float32,
                                      device=env.device))
        return st

    def weight(st: Set) -> Any:
        if fp8:
            return Fp8Weight(env.ptr(st["codes"]), env.ptr(st["scale"]), n, k,
                             Fp8ScaleMap.block(n, k))
        return Nvfp4Weight(env.ptr(st["codes"]), env.ptr(st["scale"]), env.ptr(st["rows"]),
                           n, k)

    # a ring row forces the shared-memory ring kernel, a lut row the NVFP4 byte-table decode,
    # an n1 / n2 row the register-fed kernel's narrow loop (never its staged variant), a tc
    # row one FP8 row on the tensor-core route, never the convert GEMV, an h2 row one NVFP4
    # row on the half-precision-FMA GEMV (NVFP4 or FP8); the others one NVFP4 row on the
    # tensor-core route, one FP8 row on the convert GEMV / tensor-core kernels, whatever
    # ATLAS_QUANT_NVFP4_H2 / ATLAS_QUANT_FP8_H2 say (the h2 rows are their A/B); a wg row FP8
    # rows on the FP8 tensor-core decode GEMM, which no other row takes
    routes = dataclasses.replace(env.kc.routes, quant_nvfp4_h2=s.h2, quant_fp8_h2=s.h2,
                                 quant_fp8_wgmma=s.wg)
    kc = (KernelCache(env.backend, dataclasses.replace(routes, quant_direct=False))
          if s.ring else
          KernelCache(env.backend, dataclasses.replace(routes, quant_fp8_core=False))
          if s.tc else
          KernelCache(env.backend, dataclasses.replace(routes, quant_e2m1_lut=True))
          if s.lut else
          KernelCache(env.backend, dataclasses.replace(routes, quant_narrow=s.narrow,
                                                       quant_staged=False))
          if s.narrow else KernelCache(env.backend, routes))

    def ours(st: Set, stream: Stream) -> None:
        lin = matmul_quant.QuantLinear(weight(st))
        if s.swiglu:
            lin.linear_swiglu(kc, stream, env.ptr(st["x"]), env.ptr(st["y"]), m)
        else:
            lin.linear(kc, stream, env.ptr(st["x"]), env.ptr(st["y"]), m, out_f32=s.logits)

    def finish(y: Any) -> Any:
        """PyTorch's SwiGLU of a [gate | up] product (bf16 ops, as transformers runs it), or
        the bf16 product widened (logits: ours are its bf16-rounded sums widened)."""
        if s.logits:
            return y.float()
        if not s.swiglu:
            return y
        return torch.nn.functional.silu(y[:, :out_n]) * y[:, out_n:]

    def dequant(st: Set) -> Any:
        if fp8:
            s_full = st["scale"].repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
            w = st["codes"].view(torch.float8_e4m3fn).float() * s_full
        else:
            c = st["codes"].long()
            vals = torch.stack((lut[c & 0xF], lut[c >> 4]), dim=-1).reshape(n, k)
            s_full = st["scale"].view(torch.float8_e4m3fn).float().repeat_interleave(16, 1)
            w = vals * s_full * st["rows"][:, None]
        return finish(torch.matmul(st["x"], w.to(torch.bfloat16).T))

    variants = [Variant("dequantize to bf16 + torch.matmul", dequant)]
    note = ""
    probe = (Fp8Weight(0, 0, n, k, Fp8ScaleMap.block(n, k)) if fp8  # for the route's name
             else Nvfp4Weight(0, 0, 0, n, k))
    if fp8:
        def scaled_mm(st: Set) -> Any:
            sx = st["x"].abs().amax().float() / 448.0
            xq = (st["x"].float() / sx).to(torch.float8_e4m3fn)
            return finish(torch._scaled_mm(xq, st["codes"].view(torch.float8_e4m3fn).T,
                                           scale_a=sx, scale_b=st["w_scale"],
                                           out_dtype=torch.bfloat16))
        try:
            scaled_mm(make())
            variants.append(Variant("torch._scaled_mm (x to FP8 per tensor)", scaled_mm,
                                    tol=SCALED_MM_TOL))
        except (RuntimeError, NotImplementedError, TypeError) as exc:
            note = f"torch._scaled_mm does not run at m={m}: {str(exc).splitlines()[0][:120]}"
    plain = not s.swiglu and not s.logits
    route = (quant_route(kc, probe, m, plain).replace("gemv_quant_direct",
                                                      "gemv_quant_direct gate_up + SwiGLU")
             if s.swiglu else quant_route(kc, probe, m, plain)) + (
        ", E2M1 byte tables" if s.lut else "") + (
        ", f32 logits" if s.logits else "")
    return Case(s, make, ours, variants, lambda o, t, r: [("y", o["y"], r)], outputs=("y",),
                note=note or f"ours: {route} (QuantLinear, m={m})")


def _f32_matmul(env: Env) -> tuple[str, Callable[[Any, Any], Any]]:
    """PyTorch's best bf16 x bf16 -> f32 product: mm(out_dtype=float32) where the installed
    version has it, else a bf16 matmul then .float()."""
    torch = env.torch
    a = torch.ones((2, 16), dtype=torch.bfloat16, device=env.device)
    try:
        torch.mm(a, a.T, out_dtype=torch.float32)
        return ("torch.mm(x, w.T, out_dtype=f32)",
                lambda x, w: torch.mm(x, w.T, out_dtype=torch.float32))
    except (TypeError, RuntimeError):
        return "torch.matmul(x, w.T).float()", lambda x, w: torch.matmul(x, w.T).float()


def paged_kv(env: Env, batch: int, length: int, hkv: int, d: int, bs: int) -> Set:
    """Random K and V for `batch` sequences of `length` tokens, both as a paged pool of
    shuffled 16-token blocks [blocks, hkv, bs, D] under one block table per sequence (what
    ours reads) and as contiguous [batch, hkv, length, D] (what PyTorch's SDPA reads)."""
    torch = env.torch
    nb = -(-length // bs)
    ids = env.randperm(batch * nb).view(batch, nb)
    st: Set = {"tables": ids.to(torch.int32)}
    for name in ("k", "v"):
        tokens = env.uniform((batch, nb * bs, hkv, d))
        pool = torch.empty((batch * nb, hkv, bs, d), dtype=torch.bfloat16, device=env.device)
        pool[ids.reshape(-1)] = tokens.view(batch, nb, bs, hkv, d).permute(0, 1, 3, 2, 4) \
            .reshape(batch * nb, hkv, bs, d)
        st[f"{name}_pool"] = pool
        st[f"{name}_c"] = tokens[:, :length].permute(0, 2, 1, 3).contiguous()
        del tokens
    return st


class Sdpa:
    """F.scaled_dot_product_attention pinned to the first backend that accepts the call:
    flash, then cuDNN, then memory-efficient; PyTorch's own choice (the math fallback) only
    when none does. Picked on the first (checked, untimed) call, so PyTorch is timed on its
    fastest fused kernel rather than on whatever its dispatcher falls back to."""

    def __init__(self, torch: Any) -> None:
        from torch.nn.attention import SDPBackend

        self.torch = torch
        self.candidates = [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                           SDPBackend.EFFICIENT_ATTENTION]
        self.backend: Any = None
        self.name = "not run"

    def __call__(self, q: Any, k: Any, v: Any, **kw: Any) -> Any:
        from torch.nn.attention import sdpa_kernel

        sdpa = self.torch.nn.functional.scaled_dot_product_attention
        if self.backend is None and self.name == "not run":
            self.name = "default"
            for backend in self.candidates:
                try:
                    with warnings.catch_warnings(), sdpa_kernel([backend]):
                        warnings.simplefilter("ignore")
                        out = sdpa(q, k, v, **kw)
                except RuntimeError:
                    continue
                self.backend, self.name = backend, backend.name
                return out
        if self.backend is None:
            return sdpa(q, k, v, **kw)
        with sdpa_kernel([self.backend]):
            return sdpa(q, k, v, **kw)


def prefill_attention_case(env: Env, s: Any) -> Case:
    torch = env.torch
    t_, hq, hkv, d, bs = s.seq, s.heads, s.kv_heads, s.head_dim, ks.KV_BLOCK_SIZE
    padded = -(-t_ // bs) * bs

    def make() -> Set:
        st = paged_kv(env, 1, t_, hkv, d, bs)
        st["q"] = env.uniform((t_, hq, d))
        st["cu_q"] = torch.tensor([0, t_], dtype=torch.int32, device=env.device)
        st["kv_lens"] = torch.tensor([t_], dtype=torch.int32, device=env.device)
        st["out"] = torch.empty((t_, hq, d), dtype=torch.bfloat16, device=env.device)
        return st

    # every wgmma row names its entry point: the plain row the 64-key tiles, the A/B rows
    # the same launch builder with their variant's route on
    kc = (KernelCache(env.kc.backend, dataclasses.replace(
        env.kc.routes, prefill_attn_qreg=s.variant == "qreg",
        prefill_attn_wide=s.variant == "wide")) if s.sm90 else env.kc)

    def ours(st: Set, stream: Stream) -> None:
        attention.prefill_attention(kc, stream, env.ptr(st["q"]), env.ptr(st["k_pool"]),
                                    env.ptr(st["v_pool"]), env.ptr(st["tables"]),
                                    env.ptr(st["cu_q"]), env.ptr(st["kv_lens"]),
                                    env.ptr(st["out"]), 1, hq, hkv, d, bs, padded // bs,
                                    d ** -0.5, t_, sm90=s.sm90)

    sdpa_gqa, sdpa_repeated = Sdpa(torch), Sdpa(torch)
    group = hq // hkv

    def gqa(st: Set) -> Any:
        q = st["q"].view(1, t_, hq, d).transpose(1, 2)
        return sdpa_gqa(q, st["k_c"], st["v_c"], is_causal=True, enable_gqa=True)

    def repeated(st: Set) -> Any:
        q = st["q"].view(1, t_, hq, d).transpose(1, 2)
        k = st["k_c"].repeat_interleave(group, dim=1)
        v = st["v_c"].repeat_interleave(group, dim=1)
        return sdpa_repeated(q, k, v, is_causal=True)

    paged_note = ("ours reads K/V from the paged cache (16-token blocks, shuffled); PyTorch "
                  "reads contiguous K/V")
    return Case(s, make, ours,
                [Variant("F.sdpa(is_causal, enable_gqa), contiguous K/V", gqa, paged_note,
                         sdpa_gqa),
                 Variant("repeat_kv + F.sdpa(is_causal) (transformers)", repeated, paged_note,
                         sdpa_repeated)],
                lambda o, t, r: [("out", o["out"], r[0].transpose(0, 1))], outputs=("out",),
                note=(f"ours: prefill_attn_sm90_{s.variant} (forced)" if s.variant else
                      "ours: prefill_attn_sm90 (ops.attention_sm90, forced)" if s.sm90 else
                      "ours: prefill_attn_bf16 (mma.sync, forced)"))


def decode_attention_case(env: Env, s: Any) -> Case:
    if s.drafts:
        return verify_attention_case(env, s)
    torch = env.torch
    b, hist, hq, hkv, d, bs = s.batch, s.history, s.heads, s.kv_heads, s.head_dim, \
        ks.KV_BLOCK_SIZE
    padded = -(-hist // bs) * bs
    nb = padded // bs
    max_seq_len = max(ENGINE_MAX_SEQ_LEN, hist)
    splits = decode_splits(b, hkv, max_seq_len, env.num_sms)
    long = True if s.long_kernel else None
    routed_long = attention_long.uses_long(env.kc, hq, hkv, d, nb * bs, b)
    kernel = (attention_long.long_kernel_for(d).func if s.long_kernel or routed_long
              else attention.decode_kernel(env.kc.routes, splits, rope=False).func)
    launched = (attention_long.long_launch_splits(env.kc, b, hkv, d, nb * bs, splits)
                if routed_long and not s.long_kernel else splits)
    partials = (attention.decode_split_rule(hist, launched)[1] if s.long_kernel or routed_long
                else attention.decode_partial_rule(hist, splits, env.kc.routes)[1])

    def make() -> Set:
        st = paged_kv(env, b, hist, hkv, d, bs)
        st["q"] = env.uniform((b, hq, d))
        st["kv_lens"] = torch.full((b,), hist, dtype=torch.int32, device=env.device)
        st["part_o"] = torch.empty((b, hq, splits, d), dtype=torch.float32, device=env.device)
        st["part_ml"] = torch.empty((b, hq, splits, 2), dtype=torch.float32,
                                    device=env.device)
        st["counters"] = torch.zeros((b, hq), dtype=torch.int32, device=env.device)
        st["out"] = torch.empty((b, hq, d), dtype=torch.bfloat16, device=env.device)
        return st

    def ours(st: Set, stream: Stream) -> None:
        attention.decode_attention(env.kc, stream, env.ptr(st["q"]), env.ptr(st["k_pool"]),
                                   env.ptr(st["v_pool"]), env.ptr(st["tables"]),
                                   env.ptr(st["kv_lens"]), env.ptr(st["part_o"]),
                                   env.ptr(st["part_ml"]), env.ptr(st["counters"]),
                                   env.ptr(st["out"]), b, hq, hkv, d, bs, nb, splits, d ** -0.5,
                                   long=long)

    # the q heads sharing a kv head become that head's query rows: exact GQA decode with
    # no K/V expansion, which every fused SDPA backend accepts
    group = hq // hkv
    sdpa_contiguous, sdpa_gathered = Sdpa(torch), Sdpa(torch)

    def contiguous(st: Set) -> Any:
        return sdpa_contiguous(st["q"].view(b, hkv, group, d), st["k_c"], st["v_c"])

    def gathered(st: Set) -> Any:
        tables = st["tables"].long()

        def gather(pool: Any) -> Any:
            return pool[tables].transpose(1, 2).reshape(b, hkv, padded, d)[:, :, :hist]
        return sdpa_gathered(st["q"].view(b, hkv, group, d), gather(st["k_pool"]),
                             gather(st["v_pool"]))

    return Case(s, make, ours, [
        Variant("F.sdpa, q heads folded per kv head, contiguous K/V", contiguous,
                "PyTorch reads one contiguous K/V per sequence; ours reads the paged cache",
                sdpa_contiguous),
        Variant("gather paged blocks + F.sdpa (folded heads)", gathered,
                "what a paged engine on plain PyTorch does: gather the blocks, then SDPA",
                sdpa_gathered),
    ], lambda o, t, r: [("out", o["out"], r.reshape(b, hq, d))], outputs=("out",),
        note=f"ours: {kernel}, a {launched}-split grid (the engine's choice: model.step_inputs."
             f"decode_splits at max_seq_len {max_seq_len} gives {splits}, "
             f"ops.attention_long.long_launch_splits for routed batches); "
             f"{partials} partial(s) at this history")


def verify_attention_case(env: Env, s: Any) -> Case:
    """A verification step's attention: `batch` sequences of drafts + 1 rows, row j seeing
    history + j keys (its K/V already appended), on the verification kernel or (rows_apart)
    on decode attention with every row a sequence (the ATLAS_DECODE_ATTN_VERIFY=0 path).
    PyTorch: SDPA with each sequence's rows x folded q heads as the query rows and a mask
    that gives each row its own keys."""
    torch = env.torch
    b, hist, k, hq, hkv, d, bs = s.batch, s.history, s.drafts, s.heads, s.kv_heads, \
        s.head_dim, ks.KV_BLOCK_SIZE
    per, total = k + 1, hist + k
    rows, group = b * per, hq // hkv
    nb = -(-total // bs)
    max_seq_len = max(ENGINE_MAX_SEQ_LEN, total)
    # the runner's split counts: per sequence on the verification kernel (runner.
    # verify_splits); rows apart, batch 1's up to the row-invariant rows (7 on an H200)
    splits = decode_splits(b if not s.rows_apart else 1 if rows <= 7 else rows, hkv,
                           max_seq_len, env.num_sms)

    def make() -> Set:
        st = paged_kv(env, b, total, hkv, d, bs)
        st["tables"] = st["tables"].repeat_interleave(per, dim=0).contiguous()
        st["kv_lens"] = (hist + torch.arange(per, dtype=torch.int32, device=env.device)) \
            .repeat(b).contiguous()
        st["q"] = env.uniform((rows, hq, d))
        st["part_o"] = torch.empty((rows, hq, splits, d), dtype=torch.float32, device=env.device)
        st["part_ml"] = torch.empty((rows, hq, splits, 2), dtype=torch.float32,
                                    device=env.device)
        st["counters"] = torch.zeros((rows, hq), dtype=torch.int32, device=env.device)
        st["out"] = torch.empty((rows, hq, d), dtype=torch.bfloat16, device=env.device)
        return st

    # the model's launches: rows apart on decode attention, or one window a sequence with
    # the routes' fewest keys a split (ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS)
    min_chunk = env.kc.routes.decode_attn_verify_min_keys
    launch = (attention.decode_attention if s.rows_apart else
              functools.partial(attention_verify.decode_attention_verify, rows_per_block=per,
                                min_chunk=min_chunk))

    def ours(st: Set, stream: Stream) -> None:
        launch(env.kc, stream, env.ptr(st["q"]), env.ptr(st["k_pool"]), env.ptr(st["v_pool"]),
               env.ptr(st["tables"]), env.ptr(st["kv_lens"]), env.ptr(st["part_o"]),
               env.ptr(st["part_ml"]), env.ptr(st["counters"]), env.ptr(st["out"]), rows, hq,
               hkv, d, bs, nb, splits, d ** -0.5)

    sdpa = Sdpa(torch)
    visible = (torch.arange(total, device=env.device)[None, :]
               < (hist + torch.arange(per, device=env.device))[:, None])
    mask = visible.repeat_interleave(group, dim=0)          # [(K + 1) * group, keys]

    def masked(st: Set) -> Any:
        q = st["q"].view(b, per, hkv, group, d).permute(0, 2, 1, 3, 4).reshape(
            b, hkv, per * group, d)
        o = sdpa(q, st["k_c"], st["v_c"], attn_mask=mask)
        return o.view(b, hkv, per, group, d).permute(0, 2, 1, 3, 4).reshape(rows, hq, d)

    kernel = ("decode attention, each row a sequence (ATLAS_DECODE_ATTN_VERIFY=0)"
              if s.rows_apart else f"decode_attn_verify (each sequence's K/V read once, "
              f"splits of >= {min_chunk} keys)")
    return Case(s, make, ours, [
        Variant("F.sdpa(attn_mask), rows x folded q heads per kv head, contiguous K/V", masked,
                "PyTorch reads one contiguous K/V per sequence; ours reads the paged cache",
                sdpa)], lambda o, t, r: [("out", o["out"], r)], outputs=("out",),
        note=f"ours: {kernel}, a {splits}-split grid; compare with the plain b{b} "
             f"hist{hist} row x {per}")


def decode_attention_rope_case(env: Env, s: Any) -> Case:
    """Ours: one launch (decode_attn_rope_bf16); PyTorch: F.rms_norm of q and k, rotate_half
    RoPE, index_put of k and v into the paged pools, then gather + SDPA (folded heads)."""
    torch, F = env.torch, env.torch.nn.functional
    b, hist, hq, hkv, d, bs = s.batch, s.history, s.heads, s.kv_heads, s.head_dim, \
        ks.KV_BLOCK_SIZE
    padded, half, group = -(-hist // bs) * bs, d // 2, hq // hkv
    nb = padded // bs
    splits = decode_splits(b, hkv, max(ENGINE_MAX_SEQ_LEN, hist), env.num_sms)
    routes = env.kc.routes
    kernel, partials = attention.decode_kernel(routes, splits, rope=True).func, \
        attention.decode_partial_rule(hist, splits, routes)[1]
    if attention_long.uses_long(env.kc, hq, hkv, d, nb * bs, b):  # as decode_attention_rope
        splits = attention_long.long_launch_splits(env.kc, b, hkv, d, nb * bs, splits)
        kernel, partials = (attention_long.long_rope_kernel_for(routes, b, head_dim=d).func,
                            attention.decode_split_rule(hist, splits)[1])
    inv_freq = ROPE_THETA ** (-torch.arange(0, half, device=env.device).double() / half)
    pos_angles = torch.arange(hist, device=env.device).double()[:, None] * inv_freq[None, :]
    cos_sin = torch.cat([pos_angles.cos(), pos_angles.sin()], dim=1).float().contiguous()
    angles = pos_angles[hist - 1]  # the step's token is at position hist - 1
    cos = torch.cat([angles.cos(), angles.cos()]).to(torch.bfloat16)
    sin = torch.cat([angles.sin(), angles.sin()]).to(torch.bfloat16)

    def make() -> Set:
        st = paged_kv(env, b, hist, hkv, d, bs)
        last = st["tables"][:, (hist - 1) // bs].long()
        st.update(qkv=env.uniform((b, (hq + 2 * hkv) * d)), qw=env.uniform((d,), 0.5, 1.5),
                  kw=env.uniform((d,), 0.5, 1.5),
                  pos=torch.full((b,), hist - 1, dtype=torch.int32, device=env.device),
                  slots=(last * bs + (hist - 1) % bs).to(torch.int32), blk=last,
                  kv_lens=torch.full((b,), hist, dtype=torch.int32, device=env.device),
                  part_o=torch.empty((b, hq, splits, d), dtype=torch.float32,
                                     device=env.device),
                  part_ml=torch.empty((b, hq, splits, 2), dtype=torch.float32,
                                      device=env.device),
                  counters=torch.zeros((b, hq), dtype=torch.int32, device=env.device),
                  out=torch.empty((b, hq, d), dtype=torch.bfloat16, device=env.device))
        return st

    def ours(st: Set, stream: Stream) -> None:
        attention.decode_attention_rope(
            env.kc, stream, env.ptr(st["qkv"]), env.ptr(st["k_pool"]), env.ptr(st["v_pool"]),
            env.ptr(st["qw"]), env.ptr(st["kw"]), env.ptr(cos_sin), env.ptr(st["pos"]),
            env.ptr(st["slots"]), env.ptr(st["tables"]), env.ptr(st["kv_lens"]),
            env.ptr(st["part_o"]), env.ptr(st["part_ml"]), env.ptr(st["counters"]),
            env.ptr(st["out"]), b, hq, hkv, d, bs, nb, splits, d ** -0.5, EPS)

    def rotate(x: Any) -> Any:
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    sdpa = Sdpa(torch)

    def theirs(st: Set) -> Any:
        x = st["qkv"].view(b, hq + 2 * hkv, d)
        q = rotate(F.rms_norm(x[:, :hq], (d,), st["qw"], EPS))
        k = rotate(F.rms_norm(x[:, hq:hq + hkv], (d,), st["kw"], EPS))
        off = (hist - 1) % bs
        st["k_pool"][st["blk"], :, off] = k
        st["v_pool"][st["blk"], :, off] = x[:, hq + hkv:]
        tables = st["tables"].long()

        def gather(pool: Any) -> Any:
            return pool[tables].transpose(1, 2).reshape(b, hkv, padded, d)[:, :, :hist]
        return sdpa(q.reshape(b, hkv, group, d), gather(st["k_pool"]), gather(st["v_pool"]))

    return Case(s, make, ours, [
        Variant("rms_norm + RoPE + index_put K/V + gather + F.sdpa", theirs,
                "PyTorch runs the prologue as separate ops; ours is one launch", sdpa)],
        lambda o, t, r: [("out", o["out"], r.reshape(b, hq, d)),
                         ("k_pool", o["k_pool"], t["k_pool"])],
        outputs=("out",), mutated=("k_pool", "v_pool"),
        note=f"ours: {kernel} on a {splits}-split grid, {partials} partial(s) at this "
             "history")


def sampling_case(env: Env, s: Any) -> Case:
    torch = env.torch
    rows, vocab = s.rows, s.vocab
    records = np.zeros(rows, dtype=SAMPLE_ROW)
    records["slot"] = -1
    records["top_k"] = s.top_k
    records["seed_lo"] = np.arange(rows) + 17
    records["temperature"] = s.temperature
    records["top_p"] = s.top_p
    records["repetition"] = 1.0
    params = torch.from_numpy(records.view(np.uint8).copy()).to(env.device)
    # the multi-block workspace: allocated once like Sampler's (each launch re-zeroes counters)
    scratch_bytes, counter_bytes = sampling.sample_scratch_bytes(rows, vocab)
    scratch = torch.empty((scratch_bytes,), dtype=torch.uint8, device=env.device)
    counters = torch.zeros((counter_bytes,), dtype=torch.uint8, device=env.device)

    def make() -> Set:
        return {"logits": env.normal((rows, vocab), 3.0).contiguous(), "params": params,
                "out": torch.empty((rows,), dtype=torch.int32, device=env.device)}

    def ours(st: Set, stream: Stream) -> None:
        sampling.sample(env.kc, stream, env.ptr(st["logits"]), env.ptr(st["params"]),
                        env.ptr(st["out"]), env.ptr(scratch), env.ptr(counters), rows, vocab)

    if s.temperature <= 0:
        return Case(s, make, ours, [Variant("torch.argmax", lambda st: st["logits"].argmax(-1))],
                    lambda o, t, r: [("token", o["out"].long(), r)], outputs=("out",),
                    exact=True, note="ours: sample_f32 at temperature 0 (the serving path)")

    def theirs(st: Set) -> Any:
        scaled = st["logits"] / s.temperature
        if s.top_k > 0:
            vals, idx = torch.topk(scaled, s.top_k, dim=-1)
        else:
            vals, idx = torch.sort(scaled, dim=-1, descending=True)
        probs = vals.softmax(dim=-1)
        drop = probs.cumsum(dim=-1) - probs > s.top_p
        probs = probs.masked_fill(drop, 0.0)
        choice = torch.multinomial(probs, 1)
        return idx.gather(-1, choice).squeeze(-1)

    def compare(o: Set, t: Set, r: Any) -> list:
        kept = kept_tokens(torch, o["logits"], s.temperature, s.top_k, s.top_p + TOP_P_SLACK)
        tokens = o["out"].long()
        bad = (tokens < 0) | (tokens >= vocab)
        inside = kept.gather(-1, tokens.clamp(0, vocab - 1)[:, None]).squeeze(-1) & ~bad
        theirs_inside = kept.gather(-1, r[:, None]).squeeze(-1)
        return [("token in kept set", inside.long(), torch.ones_like(inside).long()),
                ("torch token in kept set", theirs_inside.long(),
                 torch.ones_like(theirs_inside).long())]

    sort = "topk" if s.top_k > 0 else "full sort"
    return Case(s, make, ours, [Variant(f"{sort}; softmax; cumsum top-p; multinomial", theirs)],
                compare, outputs=("out",), exact=True,
                note="checked: every sampled token lies in the top-k/top-p set (float64)")


def kept_tokens(torch: Any, logits: Any, temperature: float, top_k: int, top_p: float) -> Any:
    """bool [rows, vocab]: the tokens top-k then top-p keep, in float64."""
    z = logits.double() / temperature
    vals, idx = torch.sort(z, dim=-1, descending=True)
    if top_k > 0:
        vals[:, top_k:] = -math.inf
    probs = vals.softmax(dim=-1)
    keep_sorted = probs.cumsum(dim=-1) - probs <= top_p
    keep_sorted[:, 0] = True
    kept = torch.zeros_like(keep_sorted)
    return kept.scatter(-1, idx, keep_sorted)

# ---- mixture of experts -----------------------------------------------------------------

def moe_router_case(env: Env, s: Any) -> Case:
    """Decode batches: ours is the one-launch router (gate GEMV + top-k from x), theirs
    F.linear + softmax/sigmoid + topk; prefill: the top-k from given logits."""
    torch = env.torch
    d, t = s.dims, s.tokens
    sigmoid = d.scoring == "sigmoid"
    shape = moe.MoeShape(d.experts, d.top_k, d.hidden, d.inter)

    def make() -> Set:
        # float32 logits: bf16-valued ones tie often, and torch.topk's order among equal
        # values is unspecified on the GPU (ours: lower expert first); the fused router's
        # logits are bf16-valued, so its rows compare the routing weights scattered by id,
        # where a tie swapped at the k-th place is an error of one small weight
        st = {"logits": env.uniform((t, d.experts), -4, 4, torch.float32),
              "ids": torch.empty((t, d.top_k), dtype=torch.int32, device=env.device),
              "weights": torch.empty((t, d.top_k), dtype=torch.float32, device=env.device),
              "counter": torch.zeros(1, dtype=torch.int32, device=env.device)}
        if s.fused_gate:
            st["x"] = env.uniform((t, d.hidden))
            st["w"] = env.uniform((d.experts, d.hidden), -2 / math.sqrt(d.hidden),
                                  2 / math.sqrt(d.hidden))
        if sigmoid:
            st["bias"] = env.uniform((d.experts,), -0.1, 0.1, torch.float32)
        return st

    def ours(st: Set, stream: Stream) -> None:
        routing = moe.Routing(d.scoring, True, 1.0, env.ptr(st["bias"]) if sigmoid else 0)
        if s.fused_gate:
            moe.gate_topk(env.kc, stream, env.ptr(st["x"]), env.ptr(st["w"]),
                          env.ptr(st["logits"]), env.ptr(st["ids"]), env.ptr(st["weights"]),
                          env.ptr(st["counter"]), t, shape, routing)
            return
        moe.topk(env.kc, stream, env.ptr(st["logits"]), env.ptr(st["ids"]),
                 env.ptr(st["weights"]), t, d.experts, d.top_k, routing)

    def theirs(st: Set) -> Any:
        logits = (torch.nn.functional.linear(st["x"], st["w"]).float() if s.fused_gate
                  else st["logits"])
        if sigmoid:
            scores = logits.sigmoid()
            ids = torch.topk(scores + st["bias"], d.top_k, dim=-1).indices
            w = scores.gather(1, ids)
        else:
            w, ids = torch.topk(torch.softmax(logits, dim=-1), d.top_k, dim=-1)
        return ids, w / w.sum(dim=-1, keepdim=True)

    def dense(ids: Any, w: Any) -> Any:
        """Weights scattered into [tokens, experts]: a wrong expert is a large error."""
        return torch.zeros((t, d.experts), device=env.device).scatter_(1, ids.long(), w)

    label = ("sigmoid + bias, topk, gather, w / sum" if sigmoid
             else "softmax, topk, w / sum")
    if s.fused_gate:
        label = "F.linear, " + label
    return Case(s, make, ours, [Variant(label, theirs)],
                lambda o, th, r: [("weights", dense(o["ids"], o["weights"]), dense(*r))],
                outputs=("ids", "weights"))


def _moe_routing(env: Env, d: Any, t: int) -> tuple[Any, Any]:
    """(ids i32 [t, k], weights f32 [t, k]) of kernel_shapes.MoeExperts' balanced routing."""
    torch = env.torch
    offset = int(env.randint(d.experts, (1,)).item())
    ids = (torch.arange(t * d.top_k, device=env.device) + offset) % d.experts
    w = env.uniform((t, d.top_k), 0.1, 1.0, torch.float32)
    return ids.view(t, d.top_k).to(torch.int32), w / w.sum(dim=-1, keepdim=True)


def _grouped_mm(env: Env) -> Callable[..., Any] | None:
    """torch._grouped_mm where this torch has it and it runs here (bf16, sm_90), else None."""
    torch = env.torch
    fn = getattr(torch, "_grouped_mm", None)
    if fn is None:
        return None
    # the call shapes of moe_experts_case: [N, K] weights transposed, an empty group
    a = torch.ones((32, 64), dtype=torch.bfloat16, device=env.device)
    w = torch.ones((3, 48, 64), dtype=torch.bfloat16, device=env.device)
    try:
        out = fn(a, w.transpose(-2, -1), offs=torch.tensor([16, 16, 32], dtype=torch.int32,
                                                           device=env.device))
        if tuple(out.shape) != (32, 48) or float(out[0, 0]) != 64.0:
            return None
        return fn
    except (RuntimeError, NotImplementedError, TypeError):
        return None


def moe_experts_case(env: Env, s: Any) -> Case:
    torch, F = env.torch, env.torch.nn.functional
    d, t = s.dims, s.tokens
    shape = moe.MoeShape(d.experts, d.top_k, d.hidden, d.inter)
    layout = moe.scratch_layout(shape, t)
    grouped_mm = _grouped_mm(env)

    def make() -> Set:
        ids, w = _moe_routing(env, d, t)
        st = {"x": env.uniform((t, d.hidden)), "ids": ids, "weights": w,
              "w_bf16": w.to(torch.bfloat16),
              "w_gu": env.uniform((d.experts, 2 * d.inter, d.hidden),
                                  -3 / math.sqrt(d.hidden), 3 / math.sqrt(d.hidden)),
              "w_d": env.uniform((d.experts, d.hidden, d.inter),
                                 -3 / math.sqrt(d.inter), 3 / math.sqrt(d.inter)),
              "out": torch.empty((t, d.hidden), dtype=torch.bfloat16, device=env.device)}
        for name in ("act", "y", "sorted_slots", "tile_expert"):
            st[name] = torch.empty(max(getattr(layout, name), 16), dtype=torch.uint8,
                                   device=env.device)
        # PyTorch's dispatch, built here (outside the timed region) from the known routing:
        # per hit expert its tokens and their slot positions; and the expert-sorted order
        flat = ids.reshape(-1).long()
        order = torch.sort(flat, stable=True).indices
        st["tok_sorted"] = order // d.top_k
        st["w_sorted"] = w.reshape(-1)[order].to(torch.bfloat16)
        st["offs"] = torch.cumsum(torch.bincount(flat, minlength=d.experts), 0).to(torch.int32)
        st["dispatch"] = [(e, (flat == e).nonzero().squeeze(1) // d.top_k,
                           (flat == e).nonzero().squeeze(1) % d.top_k)
                          for e in flat.unique().tolist()]
        return st

    def ours(st: Set, stream: Stream) -> None:
        p = {name: env.ptr(st[name]) for name in ("act", "y", "sorted_slots", "tile_expert")}
        scratch = moe.MoeScratch(p["act"], p["y"], p["sorted_slots"], p["tile_expert"],
                                 max_tokens=t)
        moe.experts(env.kc, stream, env.ptr(st["x"]), env.ptr(st["w_gu"]), env.ptr(st["w_d"]),
                    env.ptr(st["ids"]), env.ptr(st["weights"]), env.ptr(st["out"]), t, shape,
                    scratch)

    def loop(st: Set) -> Any:  # transformers' Qwen3MoeExperts.forward, dispatch precomputed
        out = torch.zeros((t, d.hidden), dtype=torch.bfloat16, device=env.device)
        for e, tok, pos in st["dispatch"]:
            g, u = F.linear(st["x"][tok], st["w_gu"][e]).chunk(2, dim=-1)
            y = F.linear(F.silu(g) * u, st["w_d"][e]) * st["w_bf16"][tok, pos, None]
            out.index_add_(0, tok, y)
        return out

    variants = [Variant("loop over experts: torch.mm per expert, index_add_", loop,
                        "PyTorch's routing dispatch (per-expert token lists, sort order) is "
                        "built outside the timed region; ours aligns on the device")]
    if grouped_mm is not None:
        def grouped(st: Set) -> Any:
            gu = grouped_mm(st["x"][st["tok_sorted"]], st["w_gu"].transpose(-2, -1),
                            offs=st["offs"])
            g, u = gu.chunk(2, dim=-1)
            y = grouped_mm(F.silu(g) * u, st["w_d"].transpose(-2, -1), offs=st["offs"])
            out = torch.zeros((t, d.hidden), dtype=torch.bfloat16, device=env.device)
            return out.index_add_(0, st["tok_sorted"], y * st["w_sorted"][:, None])

        variants.append(Variant("torch._grouped_mm x2, gather, index_add_", grouped,
                                variants[0].note))
    route = "decode kernels" if moe.uses_decode_kernels(t) else "align + grouped GEMMs + combine"
    return Case(s, make, ours, variants, lambda o, th, r: [("out", o["out"], r)],
                outputs=("out",), note=f"ours: ops.moe.experts ({route})")


# ---- the hybrid (Gated-DeltaNet) families: transformers' torch implementations as baseline -

def _qwen3_5_torch() -> Any:
    """transformers' Qwen3.5 module: its torch fallbacks of the conv, the delta rule and the
    gated norm are the baseline (flash-linear-attention / causal-conv1d are not installed)."""
    warnings.filterwarnings("ignore", message=".*falling back to its reference PyTorch.*")
    from transformers.models.qwen3_5 import modeling_qwen3_5
    return modeling_qwen3_5


def ring_rows(start: int, count: int, kernel: int) -> list[int]:
    """Rows of our conv ring (the input at position p in row p % kernel) holding the
    `count` inputs before position `start`, oldest first: transformers keeps those as a
    plain [.., count] window."""
    return [p % kernel for p in range(start - count, start)]


def conv1d_case(env: Env, s: Any) -> Case:
    torch, F = env.torch, env.torch.nn.functional
    hf = _qwen3_5_torch()
    b, t_, c, k = s.seqs, s.tokens, s.channels, s.kernel
    decode = t_ == 1
    start = 100 if decode else 0  # decode continues a sequence; prefill starts one

    def make() -> Set:
        # ours: a ring [slots, k, C]; transformers: the window [batch, C, k - 1]
        ring = env.uniform((b, k, c))
        window = ring[:, ring_rows(start, k - 1, k)]
        return {"x": env.uniform((b * t_, c)), "w": env.uniform((c, k), -0.5, 0.5),
                "state": ring, "hf_state": window.transpose(1, 2).contiguous(),
                "slots": torch.arange(b, dtype=torch.int32, device=env.device),
                "cu_q": torch.arange(0, b * t_ + 1, t_, dtype=torch.int32, device=env.device),
                "kv_lens": torch.full((b,), start + t_, dtype=torch.int32, device=env.device),
                "out": torch.empty((b * t_, c), dtype=torch.bfloat16, device=env.device)}

    def ours(st: Set, stream: Stream) -> None:
        linear_attention.conv1d_silu(env.kc, stream, env.ptr(st["x"]), c, env.ptr(st["w"]),
                                     env.ptr(st["state"]), env.ptr(st["slots"]),
                                     env.ptr(st["cu_q"]), env.ptr(st["kv_lens"]),
                                     env.ptr(st["out"]), b, c, k, t_)

    def theirs(st: Set) -> Any:
        x = st["x"].view(b, t_, c).transpose(1, 2)
        if decode:  # causal_conv1d_update: state rolls in place
            return hf.causal_conv1d_update(x, st["hf_state"], st["w"], None, "silu")
        return F.silu(F.conv1d(x, st["w"].unsqueeze(1), padding=k - 1, groups=c)[..., :t_])

    def compare(o: Set, t: Set, r: Any) -> list:
        out = [("out", o["out"], r.transpose(1, 2).reshape(b * t_, c))]
        if decode:
            window = o["state"][:, ring_rows(start + t_, k - 1, k)]
            out.append(("state", window, t["hf_state"].transpose(1, 2)))
        return out

    label = ("causal_conv1d_update (transformers torch fallback)" if decode
             else "F.conv1d(groups=C) + F.silu (transformers causal_conv1d_fn fallback)")
    return Case(s, make, ours, [Variant(label, theirs)], compare, outputs=("out",),
                mutated=("state", "hf_state"))


def delta_rule_case(env: Env, s: Any) -> Case:
    torch, F = env.torch, env.torch.nn.functional
    hf = _qwen3_5_torch()
    b, t_, hk, hv, dk, dv = s.seqs, s.tokens, s.key_heads, s.value_heads, s.key_dim, s.value_dim
    row = 2 * hk * dk + hv * dv
    start = 0 if s.chunked else 100  # prefill starts fresh; decode continues a state

    def make() -> Set:
        return {"qkv": env.uniform((b * t_, row)), "ba": env.uniform((b * t_, 2 * hv), -2, 2),
                "a_log": env.uniform((hv,), -4.0, -0.7), "dt_bias": env.uniform((hv,), 0.5, 1.5),
                "state": env.normal((b, hv, dk, dv), 0.1).float().contiguous(),
                "slots": torch.arange(b, dtype=torch.int32, device=env.device),
                "cu_q": torch.arange(0, b * t_ + 1, t_, dtype=torch.int32, device=env.device),
                "kv_lens": torch.full((b,), start + t_, dtype=torch.int32, device=env.device),
                "out": torch.empty((b * t_, hv * dv), dtype=torch.bfloat16, device=env.device)}

    def ours(st: Set, stream: Stream) -> None:
        linear_attention.gated_delta_rule(
            env.kc, stream, env.ptr(st["qkv"]), row, env.ptr(st["ba"]), 2 * hv,
            env.ptr(st["a_log"]), env.ptr(st["dt_bias"]), env.ptr(st["state"]),
            env.ptr(st["slots"]), env.ptr(st["cu_q"]), env.ptr(st["kv_lens"]),
            env.ptr(st["out"]), b, hk, hv, dk, dv, recurrent=not s.chunked)

    def theirs(st: Set) -> Any:
        """Qwen3_5GatedDeltaNet.forward from the conv output to the rule's output."""
        x = st["qkv"].view(b, t_, row)
        q = x[..., :hk * dk].reshape(b, t_, hk, dk)
        k = x[..., hk * dk:2 * hk * dk].reshape(b, t_, hk, dk)
        v = x[..., 2 * hk * dk:].reshape(b, t_, hv, dv)
        ba = st["ba"].view(b, t_, 2 * hv)
        beta = ba[..., :hv].sigmoid()
        g = -st["a_log"].float().exp() * F.softplus(ba[..., hv:].float() + st["dt_bias"])
        q = q.repeat_interleave(hv // hk, dim=2)
        k = k.repeat_interleave(hv // hk, dim=2)
        if s.chunked:
            return hf.torch_chunk_gated_delta_rule(q, k, v, g=g, beta=beta, initial_state=None,
                                                   output_final_state=True,
                                                   use_qk_l2norm_in_kernel=True)
        return hf.torch_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta,
                                                   initial_state=st["state"],
                                                   output_final_state=True,
                                                   use_qk_l2norm_in_kernel=True)

    def compare(o: Set, t: Set, r: Any) -> list:
        out, state = r
        return [("out", o["out"], out.reshape(b * t_, hv * dv)), ("state", o["state"], state)]

    name = ("torch_chunk_gated_delta_rule" if s.chunked
            else "torch_recurrent_gated_delta_rule")
    cores = ("tensor cores" if linear_attention.chunk_uses_tensor_cores(env.kc, dk)
             else "CUDA cores")
    return Case(s, make, ours,
                [Variant(f"{name} (transformers; gates + repeat_interleave included)", theirs)],
                compare, outputs=("out",), mutated=("state",),
                note=f"ours: products on {cores} (ATLAS_GDN_CHUNK_TC)" if s.chunked else "")


def gated_norm_case(env: Env, s: Any) -> Case:
    torch = env.torch
    hf = _qwen3_5_torch()
    t_, h, d = s.tokens, s.heads, s.dim
    module = hf.Qwen3_5RMSNormGated(d, eps=EPS).to(device=env.device, dtype=torch.bfloat16)

    def make() -> Set:
        return {"x": env.uniform((t_, h * d)), "z": env.uniform((t_, h * d), -3, 3),
                "w": env.uniform((d,), 0.5, 1.5),
                "out": torch.empty((t_, h * d), dtype=torch.bfloat16, device=env.device)}

    def ours(st: Set, stream: Stream) -> None:
        gating.gated_rmsnorm(env.kc, stream, env.ptr(st["x"]), env.ptr(st["z"]), h * d,
                             env.ptr(st["w"]), env.ptr(st["out"]), t_, h, d, EPS)

    def theirs(st: Set) -> Any:
        with torch.no_grad():
            module.weight.copy_(st["w"])
            return module(st["x"].view(-1, d), st["z"].view(-1, d))

    return Case(s, make, ours, [Variant("Qwen3_5RMSNormGated (transformers)", theirs)],
                lambda o, t, r: [("out", o["out"], r.view(t_, h * d))], outputs=("out",))


def gdn_decode_case(env: Env, s: Any) -> Case:
    """Our fused decode step against the three transformers ops it replaces, as
    Qwen3_5GatedDeltaNet.forward runs them for one cached token; with s.tokens > 1 a
    verification's run of that many tokens per sequence (each token's state into an out slot
    of its own, as the speculating runner launches it) against the same ops over the tokens."""
    torch, F = env.torch, env.torch.nn.functional
    hf = _qwen3_5_torch()
    b, hk, hv, dk, dv, k, n = (s.seqs, s.key_heads, s.value_heads, s.key_dim, s.value_dim,
                               s.kernel, s.tokens)
    conv = 2 * hk * dk + hv * dv
    row = conv + hv * dv + 2 * hv
    start = 100  # every sequence continues: both states are read
    pool = b if n == 1 else b * (n + 1)   # the sequences' slots, then each token's out slot
    last = (torch.arange(b) if n == 1 else b + n * torch.arange(b) + n - 1).tolist()
    norm = hf.Qwen3_5RMSNormGated(dv, eps=EPS).to(device=env.device, dtype=torch.bfloat16)

    def make() -> Set:
        i32 = dict(dtype=torch.int32, device=env.device)
        proj = env.uniform((b * n, row))
        proj[:, conv + hv * dv:] = env.uniform((b * n, 2 * hv), -2, 2)
        ring = env.uniform((pool, k, conv))
        slots = torch.arange(b, **i32).repeat_interleave(n)
        return {"proj": proj, "w": env.uniform((conv, k), -0.5, 0.5), "ring": ring,
                "hf_conv": ring[:b, ring_rows(start, k - 1, k)].transpose(1, 2).contiguous(),
                "a_log": env.uniform((hv,), -4.0, -0.7), "dt_bias": env.uniform((hv,), 0.5, 1.5),
                "norm_w": env.uniform((dv,), 0.5, 1.5),
                "state": env.normal((pool, hv, dk, dv), 0.1).float().contiguous(),
                "slots": slots, "outs": slots if n == 1 else torch.arange(b, pool, **i32),
                "cu_q": torch.arange(b * n + 1, **i32),
                "kv_lens": start + 1 + torch.arange(n, **i32).repeat(b),
                "out": torch.empty((b * n, hv * dv), dtype=torch.bfloat16, device=env.device)}

    def ours(st: Set, stream: Stream) -> None:
        linear_attention.gdn_decode(
            env.kc, stream, env.ptr(st["proj"]), row, env.ptr(st["w"]), env.ptr(st["ring"]),
            env.ptr(st["a_log"]), env.ptr(st["dt_bias"]), env.ptr(st["norm_w"]),
            env.ptr(st["state"]), env.ptr(st["slots"]), env.ptr(st["outs"]), env.ptr(st["cu_q"]),
            env.ptr(st["kv_lens"]), env.ptr(st["out"]), b * n, hk, hv, dk, dv, k, EPS)

    def theirs(st: Set) -> Any:
        p = st["proj"].view(b, n, row)
        x = hf.causal_conv1d_update(p[..., :conv].transpose(1, 2), st["hf_conv"], st["w"],
                                    None, "silu").transpose(1, 2)
        q = x[..., :hk * dk].reshape(b, n, hk, dk).repeat_interleave(hv // hk, dim=2)
        kk = x[..., hk * dk:2 * hk * dk].reshape(b, n, hk, dk).repeat_interleave(hv // hk,
                                                                               dim=2)
        v = x[..., 2 * hk * dk:].reshape(b, n, hv, dv)
        beta = p[..., conv + hv * dv:conv + hv * dv + hv].sigmoid()
        g = -st["a_log"].float().exp() * F.softplus(p[..., conv + hv * dv + hv:].float()
                                                    + st["dt_bias"])
        core, state = hf.torch_recurrent_gated_delta_rule(
            q, kk, v, g=g, beta=beta, initial_state=st["state"][:b], output_final_state=True,
            use_qk_l2norm_in_kernel=True)
        with torch.no_grad():
            norm.weight.copy_(st["norm_w"])
            out = norm(core.reshape(-1, dv), p[..., conv:conv + hv * dv].reshape(-1, dv))
        return out, state

    def compare(o: Set, t: Set, r: Any) -> list:
        out, state = r
        window = o["ring"][last][:, ring_rows(start + n, k - 1, k)]
        return [("out", o["out"], out.reshape(b * n, hv * dv)),
                ("state", o["state"][last], state),
                ("conv_state", window, t["hf_conv"].transpose(1, 2))]

    return Case(s, make, ours,
                [Variant("causal_conv1d_update + torch_recurrent_gated_delta_rule + "
                         "Qwen3_5RMSNormGated (transformers)", theirs)],
                compare, outputs=("out",), mutated=("ring", "hf_conv", "state"),
                note="ours: one launch for conv, norms, delta rule and gated norm"
                + (f" over {n} tokens per sequence" if n > 1 else ""))


BUILDERS: dict[Any, Callable[[Env, Any], Case]] = {
    ks.Family.RMSNORM: norm_case, ks.Family.ADD_RMSNORM: norm_case,
    ks.Family.QK_NORM_ROPE_KV: rope_case, ks.Family.KV_APPEND: rope_case,
    ks.Family.SILU_MUL: silu_case, ks.Family.EMBEDDING: embedding_case,
    ks.Family.DECODE_GEMV: linear_case, ks.Family.PREFILL_GEMM: linear_case,
    ks.Family.DECODE_BATCHED_GEMV: linear_case,
    ks.Family.DECODE_GEMM_SM90: linear_case,
    ks.Family.DECODE_GEMV_FP8: quant_linear_case, ks.Family.DECODE_GEMV_NVFP4: quant_linear_case,
    ks.Family.PREFILL_ATTENTION: prefill_attention_case,
    ks.Family.DECODE_ATTENTION: decode_attention_case,
    ks.Family.DECODE_ATTENTION_ROPE: decode_attention_rope_case,
    ks.Family.SAMPLING: sampling_case, ks.Family.GREEDY: sampling_case,
    ks.Family.MOE_ROUTER: moe_router_case, ks.Family.MOE_DECODE: moe_experts_case,
    ks.Family.MOE_GROUPED: moe_experts_case,
    ks.Family.CONV1D: conv1d_case, ks.Family.DELTA_CHUNK: delta_rule_case,
    ks.Family.DELTA_STEP: delta_rule_case, ks.Family.GATED_RMSNORM: gated_norm_case,
    ks.Family.GDN_DECODE: gdn_decode_case,
}


# ---- checking and timing ----------------------------------------------------------------

def check(env: Env, case: Case, variant: Variant) -> float:
    """Worst relative error of ours against one PyTorch variant on fresh copies of set 0;
    raises when any output is off (NaN, an unwritten poisoned element, or past tolerance)."""
    torch = env.torch
    ours_set = {k: (v.clone() if k in case.mutated else v) for k, v in case.sets[0].items()}
    theirs_set = {k: (v.clone() if k in case.mutated else v) for k, v in case.sets[0].items()}
    for name in case.outputs:
        t = ours_set[name] = ours_set[name].clone()
        t.fill_(-1 if not t.is_floating_point() else float("nan"))
    case.ours(ours_set, env.stream())
    env.finish()
    result = variant.run(theirs_set)
    env.sync()
    worst = 0.0
    for name, ours, ref in case.compare(ours_set, theirs_set, result):
        if case.exact:
            bad = int((ours.reshape(-1) != ref.reshape(-1)).sum())
            err = bad / max(ref.numel(), 1)
            if bad:
                raise AssertionError(f"{name}: {bad}/{ref.numel()} rows differ")
        else:
            err = rel_error(torch, ours, ref)
            tol = variant.tol if variant.tol is not None else tolerance(torch, ours)
            if not err <= tol:
                raise AssertionError(f"{name}: relative error {err:.3g} (tolerance {tol:g})")
        worst = max(worst, err)
    return worst


@dataclass
class Timing:
    us: float
    spread: float     # (p90 - p10) / median of the replays
    iters: int
    copies: int
    graph: bool


def time_cuda(env: Env, step: Callable[[int], None], copies: int, repeats: int) -> Timing:
    """Median microseconds per iteration of `step(set index)` captured into a CUDA graph of
    `iters` iterations that cycle through the input sets (eager if capture fails)."""
    torch = env.torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: library handles, workspaces, module loads
        for i in range(max(3, copies)):
            step(i % copies)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(copies):
        step(i)
    end.record()
    torch.cuda.synchronize()
    eager_us = max(start.elapsed_time(end) * 1e3 / copies, 1e-3)  # an upper bound
    iters = min(MAX_ITERS, max(copies, math.ceil(GRAPH_TARGET_US / eager_us)))
    iters = max(copies, iters // copies * copies)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for i in range(iters):
                step(i % copies)
        run = graph.replay
        captured = True
    except Exception as exc:  # an op that cannot be captured: time it eagerly
        print(f"    (graph capture failed, timing eagerly: {type(exc).__name__}: {exc})")
        torch.cuda.synchronize()

        def run() -> None:
            for i in range(iters):
                step(i % copies)
        captured = False
    run()
    run()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(repeats)]
    torch.cuda.synchronize()
    for a, b in pairs:
        a.record()
        run()
        b.record()
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) * 1e3 / iters for a, b in pairs)
    del graph
    return _timing(times, iters, copies, captured)


def time_host(env: Env, step: Callable[[int], None], copies: int, repeats: int) -> Timing:
    """The dry run's timer: wall clock of eager calls (it exercises the flow, not speed)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(copies):
            step(i)
        env.finish()
        times.append((time.perf_counter() - t0) * 1e6 / copies)
    return _timing(sorted(times), copies, copies, False)


def _timing(times: list[float], iters: int, copies: int, graph: bool) -> Timing:
    med = statistics.median(times)
    p10, p90 = times[len(times) // 10], times[(len(times) * 9) // 10]
    return Timing(med, (p90 - p10) / med if med > 0 else 0.0, iters, copies, graph)


# ---- rows -------------------------------------------------------------------------------

@dataclass
class Row:
    family: str
    shape: str
    dims: str
    torch_op: str
    passed: bool
    error: str = ""
    rel_err: float = float("nan")
    ours_us: float = float("nan")
    torch_us: float = float("nan")
    speedup: float = float("nan")
    ours_rate: float = float("nan")
    torch_rate: float = float("nan")
    unit: str = ""
    ours_fraction: float = float("nan")
    torch_fraction: float = float("nan")
    floor_us: float = float("nan")
    bytes: int = 0
    flops: int = 0
    copies: int = 0
    iters: int = 0
    cold: bool = True
    ours_spread: float = float("nan")
    torch_spread: float = float("nan")
    graph: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.family} {self.shape}"


def run_case(env: Env, shape: Any, ceilings: Any, repeats: int, l2_bytes: int,
             max_copies: int = MAX_COPIES) -> list[Row]:
    """Rows of one shape (one per PyTorch variant); a failure becomes FAIL rows."""
    base = dict(family=shape.family.value, shape=shape.label, dims=shape.describe(),
                bytes=shape.bytes_moved(), flops=shape.flops())
    case = None
    try:
        case = BUILDERS[shape.family](env, shape)
        copies = rotation_copies(shape.bytes_moved(), ROTATE_BYTES, max_copies)
        case.sets = [case.make_set() for _ in range(copies)]
        timer = time_cuda if env.cuda else time_host
        errors = [check(env, case, v) for v in case.variants]
        ours = timer(env, lambda i: case.ours(case.sets[i], env.stream()), copies, repeats)
        rows = []
        for variant, err in zip(case.variants, errors):
            theirs = timer(env, lambda i, v=variant: v.run(case.sets[i]), copies, repeats)
            a_ours = ks.achieved(shape, ours.us, ceilings)
            a_theirs = ks.achieved(shape, theirs.us, ceilings)
            rows.append(Row(**base, torch_op=variant.full_label, passed=True, rel_err=err,
                            ours_us=ours.us, torch_us=theirs.us, speedup=theirs.us / ours.us,
                            ours_rate=a_ours.rate, torch_rate=a_theirs.rate, unit=a_ours.unit,
                            ours_fraction=a_ours.fraction, torch_fraction=a_theirs.fraction,
                            floor_us=a_ours.floor_us, copies=copies, iters=ours.iters,
                            cold=copies * shape.bytes_moved() > l2_bytes,
                            ours_spread=ours.spread, torch_spread=theirs.spread,
                            graph=ours.graph and theirs.graph,
                            notes=[n for n in (case.note, variant.note) if n]))
        return rows
    except Exception as exc:  # recorded as this shape's failure; the table goes on
        detail = f"{type(exc).__name__}: {exc}"
        tb = traceback.extract_tb(exc.__traceback__)
        if tb:
            detail += f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})"
        labels = [v.full_label for v in case.variants] if case else ["-"]
        return [Row(**base, torch_op=label, passed=False, error=detail) for label in labels]
    finally:
        if case is not None:
            case.sets.clear()
        if env.cuda:
            env.torch.cuda.empty_cache()


# ---- ceilings ---------------------------------------------------------------------------

def measure_ceilings(env: Env, repeats: int) -> Any:
    """Device copy bandwidth (4 GiB buffers, bytes read + written) and bf16 matmul rate
    (8192^3 through torch.matmul), each the median of `repeats` timed runs."""
    torch = env.torch
    nbytes = 4 << 30
    src = torch.empty(nbytes, dtype=torch.uint8, device=env.device).random_(1, 255,
                                                                           generator=env.gen)
    dst = torch.empty_like(src)
    copy_us = median_eager_us(torch, lambda: dst.copy_(src), repeats)
    del src, dst
    n = 8192
    a, b = env.uniform((n, n)), env.uniform((n, n))
    mm_us = median_eager_us(torch, lambda: torch.matmul(a, b), repeats)
    del a, b
    torch.cuda.empty_cache()
    return ks.Ceilings(2 * nbytes / (copy_us * 1e-6), 2 * n ** 3 / (mm_us * 1e-6))


def median_eager_us(torch: Any, fn: Callable[[], Any], repeats: int,
                    between: Callable[[], Any] | None = None) -> float:
    """Median us of `fn` between two CUDA events over `repeats` eager calls, `between()`
    (when given) enqueued before each call, outside the events."""
    for _ in range(10):  # clocks up, workspaces allocated
        fn()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(repeats)]
    for a, b in pairs:
        if between is not None:
            between()
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in pairs)


# ---- output -----------------------------------------------------------------------------

def _f(x: float, spec: str) -> str:
    return "-" if x != x else format(x, spec)


def table_lines(rows: list[Row]) -> list[str]:
    """The table as Markdown (also the console form): one line per row, notes as footnotes."""
    notes: list[str] = []
    lines = ["| kernel | shape | dims | PyTorch | ours us | torch us | speedup | ours rate | "
             "% ceil | torch % | note |", "|" + "---|" * 11]
    for r in rows:
        marks = []
        for n in r.notes:
            if n not in notes:
                notes.append(n)
            marks.append(str(notes.index(n) + 1))
        if not r.cold:
            marks.append("L2")
        if not r.graph and r.passed:
            marks.append("eager")
        if r.passed:
            lines.append(f"| {r.family} | {r.shape} | {r.dims} | {r.torch_op} | "
                         f"{_f(r.ours_us, '.2f')} | "
                         f"{_f(r.torch_us, '.2f')} | {_f(r.speedup, '.2f')}x | "
                         f"{_f(r.ours_rate, '.1f')} {r.unit} | "
                         f"{_f(100 * r.ours_fraction, '.0f')}% | "
                         f"{_f(100 * r.torch_fraction, '.0f')}% | {','.join(marks)} |")
        else:
            lines.append(f"| {r.family} | {r.shape} | {r.dims} | {r.torch_op} | FAIL | | | | | | "
                         f"{r.error[:160]} |")
    lines.append("")
    lines += [f"[{i + 1}] {n}" for i, n in enumerate(notes)]
    lines.append("[L2] the rotated input sets fit in L2: the time includes L2 hits "
                 "(tiny kernels whose activations are L2-resident in a real step too)")
    return lines


def summary(rows: list[Row]) -> dict[str, float]:
    timed = [r.speedup for r in rows if r.passed]
    metrics: dict[str, float] = {"rows_timed": len(timed),
                                 "rows_failed": sum(not r.passed for r in rows)}
    if timed:
        metrics.update(ks.speedup_summary(timed))
    return metrics


def _json_value(x: Any) -> Any:
    return None if isinstance(x, float) and x != x else x


def write_results(out_dir: Path, record: dict[str, Any], rows: list[Row]) -> tuple[Path, Path]:
    stamp = record["date"].replace("-", "").replace(":", "").replace("T", "-")[:15]
    base = out_dir / f"kernel_table-{stamp}-{record['git_commit']}"
    out_dir.mkdir(parents=True, exist_ok=True)
    data = {**record, "rows": [{k: _json_value(v) for k, v in vars(r).items()} for r in rows]}
    json_path, md_path = base.with_suffix(".json"), base.with_suffix(".md")
    json_path.write_text(json.dumps(data, indent=1) + "\n")
    dev, c = record["device"], record["ceilings"]
    losses = [r for r in rows if r.passed and r.speedup < 1]
    md = [f"# Kernel table: Atlas vs PyTorch ({dev.get('name', '?')})", "",
          f"* date {record['date']}, commit `{record['git_commit']}`, PTX set "
          f"`{record['ptx_set']}`",
          f"* GPU {dev.get('name')}, driver {dev.get('nvidia_driver')}, CUDA "
          f"{dev.get('driver_cuda_version')}, torch {record['torch']}",
          f"* ceilings{' (measured)' if record['ceilings_measured'] else ' (assumed)'}: "
          f"copy {c['copy_gbs']:.0f} GB/s, bf16 matmul {c['bf16_tflops']:.0f} TFLOP/s",
          f"* method: {record['method']}",
          f"* speedup = torch us / ours us; metrics: "
          + ", ".join(f"{k} {v:.3g}" for k, v in record["metrics"].items()), "",
          *table_lines(rows), "", "## Losses (speedup < 1)", ""]
    md += [f"* {r.name} vs {r.torch_op}: {r.speedup:.2f}x (ours {r.ours_us:.2f} us, "
           f"{100 * r.ours_fraction:.0f}% of the {r.unit} ceiling; torch "
           f"{100 * r.torch_fraction:.0f}%)" for r in losses] or ["* none"]
    failed = [r for r in rows if not r.passed]
    md += ["", "## Failures", ""] + [f"* {r.name} vs {r.torch_op}: {r.error}"
                                      for r in failed] if failed else []
    md_path.write_text("\n".join(md) + "\n")
    return json_path, md_path


# ---- main -------------------------------------------------------------------------------

def select_shapes(args: argparse.Namespace) -> list[Any]:
    if args.dry_run:
        shapes = ks.table_shapes(TINY, (TINY,), ks.TableScale(decode_batches=(1, 3),
                                                           prefill_tokens=40,
                                                           attention_seqs=(17, 64),
                                                           histories=(48, 200),
                                                           long_decode=((2, 300),),
                                                           long_prefill=(80,),
                                                           moe_batches=(1, 3, 20),
                                                           latency_decode=((1, 40), (3, 90)),
                                                           throughput_decode=((4, 150),),
                                                           verify_decode=((1, 40, 3),
                                                                          (3, 90, 2)),
                                                           batched_decode=((8, 100),)),
                                (TINY_MOE,), (TINY_MOE_ROUTER,), hybrid=TINY_HYBRID,
                                quant_widths=(), decode_gemm_widths=(),
                                latency_heads=TINY_LATENCY_HEADS,
                                batched_heads=TINY_LATENCY_HEADS)
    else:
        shapes = ks.table_shapes()
    if args.quick:
        shapes = [s for s in shapes if s.quick]
    if args.select:
        shapes = [s for s in shapes if any(sel in f"{s.family.value} {s.label} {s.describe()}"
                                           for sel in args.select)]
    return shapes


def open_env(args: argparse.Namespace) -> tuple[Env, dict[str, Any], str]:
    import torch

    if args.dry_run:
        from atlas.runtime.host import HostBackend
        return (Env(torch, HostBackend(), False, args.seed),
                {"name": "cpu (dry run: HostBackend reference kernels)"}, "host-reference")
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible to torch (use --dry-run on a CPU)")
    from atlas.runtime.cuda import CudaBackend

    torch.empty(1, device="cuda")  # torch first: both then share the primary context
    wanted = None
    if args.ptx_dir is None:  # the set running model directory --model (own or baseline leaf)
        from atlas.kernels.registry import load_registry
        wanted = load_registry().select_model_dir("hopper", args.model, "bf16")[0].target.name
    sources = [s for s in load_sources(args.ptx_dir, "hopper") if wanted in (None, s.name)]
    if not sources:
        raise SystemExit(f"no hopper PTX set for model {args.model}")
    backend = CudaBackend(modules=sources[0].modules)
    info = {**backend.device_info(), "nvidia_driver": nvidia_driver_version(),
            "torch_cuda": torch.version.cuda}
    return Env(torch, backend, True, args.seed), info, sources[0].name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer shapes and repeats")
    ap.add_argument("--repeats", type=int, help="timed graph replays per side (default 100, "
                    "quick 30)")
    ap.add_argument("-k", dest="select", action="append", help="only shapes whose family/label "
                    "contains this (repeat -k for any of several)")
    ap.add_argument("--out-dir", type=Path, help="where the JSON and Markdown go (default "
                    "bench/results; a temporary directory for --dry-run)")
    ap.add_argument("--ptx-dir", type=Path, help="*.ptxset.json or *.ptx files (default: the "
                    "built kernel registry)")
    ap.add_argument("--model", default="qwen3-8b", help="model directory (kernels/hopper/"
                    "<model>) whose PTX set to time")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dry-run", action="store_true", help="CPU self-test of this script: tiny "
                    "shapes, HostBackend kernels, CPU torch, wall-clock times")
    args = ap.parse_args(argv)
    repeats = args.repeats or (30 if args.quick else 100)
    if args.dry_run:
        repeats = args.repeats or 3

    env, device, ptx_set = open_env(args)
    shapes = select_shapes(args)
    print(f"device: {device}\nPTX set: {ptx_set}; {len(shapes)} shapes, {repeats} repeats")
    if env.cuda:
        ceilings = measure_ceilings(env, 5 if args.quick else 20)
        l2_bytes = int(getattr(env.torch.cuda.get_device_properties(0), "L2_cache_size",
                               60 << 20))
    else:
        ceilings = ks.Ceilings(4267e9, 790e12)
        l2_bytes = 60 << 20
    print(f"ceilings: copy {ceilings.copy_bytes_per_s / 1e9:.0f} GB/s (read + write), "
          f"bf16 matmul {ceilings.bf16_flops_per_s / 1e12:.0f} TFLOP/s; L2 {l2_bytes >> 20} MiB",
          flush=True)

    rows: list[Row] = []
    for shape in shapes:
        new = run_case(env, shape, ceilings, repeats, l2_bytes,
                       MAX_COPIES if env.cuda else DRY_RUN_COPIES)
        rows += new
        for r in new:
            print(f"  {r.name:<44} {r.torch_op[:40]:<40} " + (
                f"ours {r.ours_us:9.2f} us  torch {r.torch_us:9.2f} us  {r.speedup:6.2f}x  "
                f"{r.ours_rate:8.1f} {r.unit} ({100 * r.ours_fraction:.0f}%)"
                if r.passed else f"FAIL {r.error}"), flush=True)
        if env.cuda and not _alive(env):
            rows.append(Row("ABORTED", "device context lost", "", "-", False,
                            error=f"after {shape.label}; later shapes were not run"))
            break

    now = dt.datetime.now(dt.timezone.utc)
    record = {
        "suite": "kernel-table", "date": now.isoformat(timespec="seconds"),
        "git_commit": git_commit(), "device": device, "ptx_set": ptx_set,
        "torch": env.torch.__version__, "dry_run": args.dry_run, "quick": args.quick,
        "ceilings": {"copy_gbs": ceilings.copy_bytes_per_s / 1e9,
                     "bf16_tflops": ceilings.bf16_flops_per_s / 1e12},
        "ceilings_measured": env.cuda, "l2_bytes": l2_bytes,
        "method": (f"CUDA graph of back-to-back iterations per side on one stream, input sets "
                   f"rotated past {ROTATE_BYTES >> 20} MiB (at most {MAX_COPIES} sets), "
                   f"median of {repeats} replays between CUDA events; ours checked against "
                   f"PyTorch before timing" if env.cuda else
                   f"dry run: eager calls timed by the host clock, median of {repeats}; ours "
                   f"(numpy reference kernels) checked against CPU PyTorch"),
        "metrics": summary(rows),
    }
    out_dir = args.out_dir or (Path(tempfile.mkdtemp(prefix="kernel_table-")) if args.dry_run
                               else REPO / "bench" / "results")
    json_path, md_path = write_results(out_dir, record, rows)
    print()
    print("\n".join(table_lines(rows)))
    print(f"\nmetrics: {record['metrics']}\nwrote {json_path} and {md_path}")
    return 0 if rows and all(r.passed for r in rows) else 1


def _alive(env: Env) -> bool:
    try:
        env.torch.cuda.synchronize()
        return True
    except Exception:  # a sticky CUDA error: every later launch would fail too
        return False


if __name__ == "__main__":
    sys.exit(main())
