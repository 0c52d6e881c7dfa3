#!/usr/bin/env python3
"""Why the 64-stream decode step's attention runs slower than its kernel-table row.

Qwen3-8B at batch 64 x ~1,624 keys: the staged rope-fused entry of the tensor-core decode
attention (attention_long.cu) took ~122 us a layer inside the step with PDL off (gpu24, gpu37,
gpu39: 425.8 MB of K/V a layer, 3.47 TB/s, 81% of copy), while bench_kernels' `qwen3-8b b64
hist1536 +rope` row runs it in ~102 us on 1,536 keys (3.93 TB/s, 92%). The launch, grid and
split count are the same; the inputs are not. This times the production launch on inputs that
differ from the table's one way at a time:

  table     every sequence `history` keys, all pages shuffled (bench_kernels.paged_kv)
  longer    every sequence the step's mean length (the bytes alone)
  spread    the step's lengths: sequence i holds history + spread - 1 - i keys (prefilled one
            after another, then decoded together), pages shuffled
  ordered   the step's lengths, pages in BlockAllocator order (sequence after sequence)
  engine    as ordered, in a pool of the engine's size with its table stride (max_seq_len)
  heated    the table's inputs with a bf16 GEMM of the step's gate/up shape between launches
            (201 MB of weights streamed: L2 turned over, as the step's GEMMs do between two
            layers' attention)
  cold      the table's inputs with a read-only sweep of COLD_BYTES between launches (L2
            turned over at little power, 50 more 2 MB pages touched)
  l2        the same with L2_BYTES, most of L2 (L2 turned over, 20 pages touched)
  tlb       one 4-byte read in each of TLB_PAGES 2 MB pages of a fresh buffer between
            launches (address translations turned over, L2 and power left alone)
  tiny      a one-element add between launches (another kernel, nothing else)
  l2+tab    l2, then the block tables and kv_lens read back into L2 (small sums)
  l2+small  l2, then every input but K/V read back into L2: tables, kv_lens, positions,
            slots, the qkv rows, the norm weights, the cos/sin rows
  power     square bf16 GEMMs on operands of a few MB between launches (power drawn, L2
            and translations left alone; last: the clocks take a while to recover)
Then the read-only and copy rates of a cold 2 GB stream (torch sum / copy_), the ceilings a
K/V stream that misses L2 can reach.

Each line: the median us of the launch between two CUDA events (eager, `--repeats`
launches, whatever runs between them outside the events), K/V bytes a launch, GB/s over
them. The eager loop leaves the GPU's clock to its own devices: the power variant, and
variants of several small PyTorch launches between two timed ones (l2+tab, l2+small), move
the launches after them (gpu74); compare lines of one run, and repeat the run. Run it
under ATLAS_PDL=0 and 1, and with the routes to compare.

    python3 tools/gpu/attn_step_gap.py [--repeats N]
    python3 tools/gpu/attn_step_gap.py --dry-run   # CPU: tiny shapes on the HostBackend
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_kernels import (EPS, ROPE_THETA, Env, ks, median_eager_us,  # noqa: E402
                           open_env)
from atlas.model.step_inputs import decode_splits  # noqa: E402
from atlas.runtime.gpu import Stream  # noqa: E402
from atlas.runtime.ops import attention  # noqa: E402


@dataclass(frozen=True)
class Shape:
    """The step being explained: batch x history keys on one model's heads; `spread`: how
    many more keys the first-prefilled sequence holds than the last (profile_decode's
    1,592..1,657 at --context 1536); `pool_tokens` and `max_seq_len`: the engine's pool and
    block-table reach; `gemm`: the heated variant's [rows, k] x [k, n]."""

    batch: int
    history: int
    heads: int
    kv_heads: int
    head_dim: int
    spread: int
    pool_tokens: int
    max_seq_len: int
    gemm: tuple[int, int, int]


QWEN3_8B_B64 = Shape(64, 1592, 32, 8, 128, 66, 801_296, 40_960, (64, 4096, 24_576))
TINY = Shape(3, 40, 4, 2, 64, 5, 4_096, 256, (3, 64, 96))


class Inputs:
    """One launch's inputs: per-sequence lengths `lens`, pages shuffled or in allocation
    order, in a pool of `pool_blocks` blocks with a table stride of `max_blocks`."""

    def __init__(self, env: Env, s: Shape, lens: list[int], shuffled: bool, pool_blocks: int,
                 max_blocks: int) -> None:
        torch, bs, d = env.torch, ks.KV_BLOCK_SIZE, s.head_dim
        self.env, self.shape, self.lens, self.max_blocks = env, s, lens, max_blocks
        nbs = [-(-n // bs) for n in lens]
        used = sum(nbs)
        ids = env.randperm(used) if shuffled else torch.arange(used, device=env.device)
        tables = torch.zeros((s.batch, max_blocks), dtype=torch.int32, device=env.device)
        at = 0
        for i, nb in enumerate(nbs):
            tables[i, :nb] = ids[at:at + nb].to(torch.int32)
            at += nb
        self.k_pool, self.v_pool = (
            torch.empty((pool_blocks, s.kv_heads, bs, d), dtype=torch.bfloat16,
                        device=env.device) for _ in range(2))
        for pool in (self.k_pool, self.v_pool):  # only the used pages need values
            pool[:used] = env.uniform((used, s.kv_heads, bs, d))
        top = max(lens)
        half = d // 2
        inv = ROPE_THETA ** (-torch.arange(0, half, device=env.device).double() / half)
        ang = torch.arange(top, device=env.device).double()[:, None] * inv[None, :]
        self.cos_sin = torch.cat([ang.cos(), ang.sin()], dim=1).float().contiguous()
        kv_lens = torch.tensor(lens, dtype=torch.int32, device=env.device)
        last_page = tables.gather(1, ((kv_lens.long() - 1) // bs)[:, None])[:, 0].long()
        self.tables, self.kv_lens = tables, kv_lens
        self.pos = kv_lens - 1
        self.slots = (last_page * bs + (kv_lens.long() - 1) % bs).to(torch.int32)
        self.qkv = env.uniform((s.batch, (s.heads + 2 * s.kv_heads) * d))
        self.qw, self.kw = env.uniform((d,), 0.5, 1.5), env.uniform((d,), 0.5, 1.5)
        reach = max_blocks * bs
        self.splits = decode_splits(s.batch, s.kv_heads, reach, env.num_sms)
        self.part_o = torch.empty((s.batch, s.heads, self.splits, d), dtype=torch.float32,
                                  device=env.device)
        self.part_ml = torch.empty((s.batch, s.heads, self.splits, 2), dtype=torch.float32,
                                   device=env.device)
        self.counters = torch.zeros((s.batch, s.heads), dtype=torch.int32, device=env.device)
        self.out = torch.empty((s.batch, s.heads, d), dtype=torch.bfloat16, device=env.device)

    @property
    def kv_bytes(self) -> int:
        s = self.shape
        return 2 * 2 * sum(self.lens) * s.kv_heads * s.head_dim

    def attend(self, stream: Stream) -> None:
        env, s, p = self.env, self.shape, self.env.ptr
        attention.decode_attention_rope(
            env.kc, stream, p(self.qkv), p(self.k_pool), p(self.v_pool), p(self.qw),
            p(self.kw), p(self.cos_sin), p(self.pos), p(self.slots), p(self.tables),
            p(self.kv_lens), p(self.part_o), p(self.part_ml), p(self.counters), p(self.out),
            s.batch, s.heads, s.kv_heads, s.head_dim, ks.KV_BLOCK_SIZE, self.max_blocks,
            self.splits, s.head_dim ** -0.5, EPS)


def variants(env: Env, s: Shape) -> list[tuple[str, Inputs]]:
    """The table's inputs and the step's, one difference at a time (the module doc)."""
    bs = ks.KV_BLOCK_SIZE
    step_lens = [s.history + s.spread - 1 - i * s.spread // s.batch for i in range(s.batch)]
    mean = round(sum(step_lens) / len(step_lens))
    own = -(-max(step_lens) // bs)
    engine_blocks = max(s.pool_tokens // bs, sum(-(-n // bs) for n in step_lens))
    return [
        ("table", Inputs(env, s, [s.history] * s.batch, True, s.batch * own, own)),
        ("longer", Inputs(env, s, [mean] * s.batch, True, s.batch * own, own)),
        ("spread", Inputs(env, s, step_lens, True, s.batch * own, own)),
        ("ordered", Inputs(env, s, step_lens, False, s.batch * own, own)),
        ("engine", Inputs(env, s, step_lens, False, engine_blocks, s.max_seq_len // bs)),
    ]


#: bytes the cold variant reads between two launches (twice the H200's L2), the l2 one's
COLD_BYTES, L2_BYTES = 100 << 20, 40 << 20
#: 2 MB pages the tlb variant touches, one 4-byte read each
TLB_PAGES = 512
#: the power variant's square GEMM (three 2 MB operands) and how many run between launches
POWER_SIDE, POWER_GEMMS = 1024, 40
#: the ceiling streams' bytes
CEILING_BYTES = 2 << 30


def launch_us(env: Env, inp: Inputs, between: Any, repeats: int) -> float:
    """Median us of `inp`'s launch between two CUDA events over `repeats` launches, with
    `between()` (or nothing) enqueued between consecutive launches outside the events."""
    if not env.cuda:
        inp.attend(env.stream())
        env.finish()
        return math.nan
    return median_eager_us(env.torch, lambda: inp.attend(env.stream()), repeats, between)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptx-dir", type=Path, help="PTX set directory (default: the registry's)")
    ap.add_argument("--model", default="qwen3-8b", help="model whose PTX set runs (registry)")
    ap.add_argument("--repeats", type=int, default=30, help="timed launches per line")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dry-run", action="store_true", help="CPU: tiny shapes, HostBackend")
    args = ap.parse_args(argv)
    env, info, ptx_set = open_env(args)
    s = TINY if args.dry_run else QWEN3_8B_B64
    torch = env.torch
    print(f"device: {info.get('name')}  PTX set: {ptx_set}  SMs: {env.num_sms}")
    print(f"batch {s.batch}, hq {s.heads} / hkv {s.kv_heads}, D {s.head_dim}: "
          f"{'variant':<8} {'us':>8} {'K/V MB':>8} {'GB/s':>7}  kernel grid")
    rows, k, n = s.gemm
    gx, gw = env.uniform((rows, k)), env.uniform((n, k), -0.05, 0.05)
    gy = torch.empty((rows, n), dtype=torch.bfloat16, device=env.device)
    side = 64 if args.dry_run else POWER_SIDE
    ha, hb = env.uniform((side, side)), env.uniform((side, side))
    hc = torch.empty((side, side), dtype=torch.bfloat16, device=env.device)
    scale = 1 if args.dry_run else 1 << 10  # the dry run's buffers: 1 KiB for each MiB
    sweep = torch.ones(COLD_BYTES // scale // 4, dtype=torch.float32, device=env.device)
    l2 = torch.ones(L2_BYTES // scale // 4, dtype=torch.float32, device=env.device)
    page = (2 << 20) // scale // 4  # f32 elements a 2 MB page
    pages = torch.ones(TLB_PAGES * page, dtype=torch.float32, device=env.device)

    def heated() -> None:
        torch.matmul(gx, gw.t(), out=gy)

    def cold() -> None:
        sweep.sum()

    def l2_sweep() -> None:
        l2.sum()

    def tlb() -> None:
        pages[::page].sum()

    def power() -> None:
        for _ in range(POWER_GEMMS):
            torch.matmul(ha, hb, out=hc)

    one = torch.zeros(1, dtype=torch.float32, device=env.device)

    def tiny() -> None:
        one.add_(1.0)

    def l2_tab() -> None:
        l2.sum()
        for t in (table.tables, table.kv_lens):
            t.sum()

    def l2_small() -> None:
        l2.sum()
        for t in (table.tables, table.kv_lens, table.pos, table.slots, table.qkv, table.qw,
                  table.kw, table.cos_sin):
            t.sum()

    sets = variants(env, s)
    table = sets[0][1]
    runs = [(name, inp, None) for name, inp in sets] + [
        ("heated", table, heated), ("cold", table, cold), ("l2", table, l2_sweep),
        ("tlb", table, tlb), ("tiny", table, tiny), ("l2+tab", table, l2_tab),
        ("l2+small", table, l2_small), ("power", table, power)]  # power last
    for name, inp, between in runs:
        us = launch_us(env, inp, between, args.repeats)
        gbs = inp.kv_bytes / (us * 1e3) if us > 0 else math.nan
        print(f"{'':>34}{name:<8} {us:>8.2f} {inp.kv_bytes / 1e6:>8.1f} {gbs:>7.0f}  "
              f"{inp.splits} split(s) x {s.kv_heads} x {s.batch}; lens "
              f"{min(inp.lens)}..{max(inp.lens)}", flush=True)
    if env.cuda:
        for line in ceilings(env, args.repeats):
            print(line, flush=True)
    return 0


def ceilings(env: Env, repeats: int) -> list[str]:
    """The read-only (sum) and copy (copy_, read + write bytes) rates of CEILING_BYTES that
    miss L2, the median of `repeats` launches between events."""
    torch = env.torch
    src = torch.ones(CEILING_BYTES // 4, dtype=torch.float32, device=env.device)
    dst = torch.empty_like(src)
    out = []
    for label, op, moved in (("read (sum)", src.sum, CEILING_BYTES),
                             ("copy (copy_)", lambda: dst.copy_(src), 2 * CEILING_BYTES)):
        us = median_eager_us(torch, op, repeats)
        out.append(f"ceiling {label}: {moved / (us * 1e3):.0f} GB/s ({us:.1f} us for "
                   f"{moved >> 20} MiB)")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
