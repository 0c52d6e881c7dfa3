#!/usr/bin/env python3
"""Tensor-parallel measurements for the multi-GPU machine (and a one-GPU harness check).

    # a random checkpoint with the Qwen3-32B shapes (--layers of its 64, default 16)
    bench_tp.py checkpoint --out /tmp/atlas_ckpt/qwen3-32b-16l --layers 16
    # batch-1 greedy decode, TP=1 then TP=2, same checkpoint, same process tree
    bench_tp.py decode --model DIR --tp 1,2 --out tp_decode.json
    # expert parallelism: a MoE config, one GPU then EP=2, synthetic weights from seed 0
    bench_tp.py decode --model CFG_DIR --split ep,tp+ep --synthetic-seed 0 --tp 1,2 --batch 1
    # all-reduce latency at decode message sizes (bf16 [tokens, hidden]), NCCL and the
    # one-shot peer-memory kernel side by side, each call's sum checked once; --world 1 runs
    # both with one rank, so the harness is exercised on a one-GPU machine
    bench_tp.py allreduce --world 2 --hidden 5120 --impl nccl,oneshot --out allreduce.json

`decode` prints, per TP size, tok/s and the fraction of copy bandwidth the rank's weight
bytes imply (weights_per_rank * tok/s / one GPU's copy GB/s), the TP=2/TP=1 speedup, and
the greedy tokens of every TP size (they should agree: same logits up to bf16 rounding).
`--backend host --model tests/fixtures/tiny-qwen3` runs the same code on the CPU (the host
collectives), which is how this script is smoke-tested without a GPU.
A benchmark, not a test: it asserts nothing about speed. NCCL_NVLS_ENABLE=0 is set.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

from atlas.comm import HostComm, ReduceOp, SingleComm, WorldSpec  # noqa: E402
from atlas.core.dtype import DType  # noqa: E402
from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits  # noqa: E402

#: the published Qwen/Qwen3-32B text config
QWEN3_32B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
             "hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64,
             "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
             "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
             "rope_theta": 1000000, "tie_word_embeddings": False, "hidden_act": "silu",
             "attention_bias": False, "sliding_window": None, "torch_dtype": "bfloat16",
             "bos_token_id": 151643, "eos_token_id": 151645}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- checkpoint -------------------------------------------------------------------------

def make_checkpoint(out: Path, layers: int, seed: int) -> None:
    """Random bf16 weights (std 0.02, norms 1.0) in the Qwen3-32B shapes, `layers` deep.

    One random 64 MiB block is tiled into every matrix: decode speed does not depend on the
    values, and writing tens of GB must not wait on a random generator.
    """
    from atlas.core.config import ModelConfig
    from atlas.core.numerics import f32_to_bf16_bits
    from atlas.model.factory import loader_for_config
    from atlas.runtime.weights import write_safetensors

    out.mkdir(parents=True, exist_ok=True)
    cfg = {**QWEN3_32B, "num_hidden_layers": layers}
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    plan = loader_for_config(ModelConfig.from_hf(out)).plan(ModelConfig.from_hf(out))
    rng = np.random.default_rng(seed)
    block = f32_to_bf16_bits((rng.standard_normal(32 << 20) * 0.02).astype(np.float32))
    one = f32_to_bf16_bits(np.ones(1, np.float32))[0]

    def arrays():
        for s in plan.slots:
            n = int(np.prod(s.shape))
            if len(s.shape) == 1:
                yield np.full(s.shape, one, np.uint16)
            else:
                yield np.resize(block, n).reshape(s.shape)

    layout = [(s.name, "BF16", s.shape) for s in plan.slots]
    write_safetensors(out / "model.safetensors", layout, arrays())
    print(f"wrote {out} ({layers} of 64 layers)")


# ---- decode -----------------------------------------------------------------------------

@dataclass(frozen=True)
class DecodeSpec:
    """What every rank of one decode measurement loads and runs."""

    model: str
    backend: str
    prompt_len: int
    steps: int
    batch: int = 1
    #: "tp": heads, MLPs and vocabulary split; "ep": a MoE model's experts sharded, the rest
    #: replicated; "tp+ep": both over the same ranks
    split: str = "tp"
    #: weights generated on the device from this seed (the model dir needs only config.json)
    synthetic_seed: int | None = None


def _decode_rank(spec: DecodeSpec, world: WorldSpec, out: "mp.Queue | None") -> None:
    """One rank: load its shard; rank 0 drives prefill + timed greedy decode of `batch`
    sequences (distinct prompts, one prefill step each, then decode steps of all)."""
    from atlas.core.sampling import GREEDY
    from atlas.model.batch import PenaltyHistory, SeqChunk
    from atlas.model.load import load_runner
    from atlas.model.parallel_executor import TensorParallelExecutor, serve_worker

    max_seq = spec.prompt_len + spec.steps + 16
    runner = load_runner(Path(spec.model), backend=spec.backend, max_seq_len=max_seq,
                         max_batch_size=spec.batch, max_prefill_tokens=max(spec.prompt_len, 16),
                         world=world, expert_parallel="ep" in spec.split,
                         tensor_parallel=spec.split != "ep", synthetic_seed=spec.synthetic_seed)
    if world.rank != 0:
        serve_worker(runner)
        return
    exe: Any = TensorParallelExecutor(runner) if world.world_size > 1 else runner
    per_seq = -(-max_seq // runner.block_size)
    seqs = range(spec.batch)
    prompts = [[(7 * i + 3 + 11 * b) % runner.vocab_size for i in range(spec.prompt_len)]
               for b in seqs]
    blocks = [list(range(b * per_seq, (b + 1) * per_seq)) for b in seqs]
    last = []
    for b in seqs:
        last += exe.execute([SeqChunk(b, prompts[b], 0, blocks[b], GREEDY,
                                      history=PenaltyHistory(prompts[b]))])
        if b == 0:
            prefill_logits = runner.read_logits(1)[0].copy()
    tokens, times = [last[0]], []
    for i in range(spec.steps):
        t0 = time.perf_counter()
        last = exe.execute([SeqChunk(b, [last[b]], spec.prompt_len + i, blocks[b], GREEDY,
                                     rng_position=i + 1) for b in seqs])
        times.append(time.perf_counter() - t0)
        tokens.append(last[0])
    for b in seqs:
        exe.release(b)
    if world.world_size > 1:
        exe.close()
    warm = times[min(8, len(times) // 4):]
    step_s = statistics.median(warm)
    result = {"world": world.world_size, "split": spec.split,
              "batch": spec.batch, "tok_s": spec.batch / step_s, "step_ms_median": 1e3 * step_s,
              "weights_bytes_per_rank": runner.info.weights_bytes, "tokens": tokens}
    if out is not None:
        out.put((result, prefill_logits))


def decode(spec: DecodeSpec, sizes: list[int], splits: list[str],
           same_device: bool = False) -> dict:
    """Each group size in turn (1: one process, no collectives, run once), at sizes > 1 once
    per split; same weights and prompts; speedups, greedy-token agreement and prefill-logit
    cosine against size 1. `same_device`: every rank on GPU 0 over the host collectives
    (ATLAS_COMM=host, eager decode): a numerics check of the split on a one-GPU machine."""
    ctx = mp.get_context("spawn")
    results, logits = [], {}
    runs = [(size, split) for size in sizes for split in (splits if size > 1 else splits[:1])]
    for size, split in runs:
        label = f"{split.upper()}={size}"
        run_spec = replace(spec, split=split)
        q: mp.Queue = ctx.Queue()
        port = _free_port()
        procs = [ctx.Process(target=_decode_rank, args=(
            run_spec, WorldSpec(r, size, "127.0.0.1", port, 600.0,
                                device=0 if same_device else -1), q if r == 0 else None))
            for r in range(size)]
        for p in procs:
            p.start()
        res, logits[size, split] = q.get(timeout=1200)
        for p in procs:
            p.join(120)
            if p.exitcode != 0:
                raise SystemExit(f"{label} rank process exited with {p.exitcode}")
        results.append(res)
        print(f"{label} batch {spec.batch}: {res['tok_s']:.1f} tok/s "
              f"({res['step_ms_median']:.3f} ms/step), "
              f"{res['weights_bytes_per_rank'] / 1e9:.2f} GB weights per rank", flush=True)
    report: dict[str, Any] = {"model": spec.model, "backend": spec.backend,
                              "splits": splits, "batch": spec.batch,
                              "synthetic_seed": spec.synthetic_seed,
                              "prompt_len": spec.prompt_len, "steps": spec.steps, "runs": results}
    if spec.backend == "cuda":
        bw = copy_bandwidth_gbs()
        report["copy_gbs_one_gpu"] = bw
        for r in results:
            r["bandwidth_fraction"] = r["weights_bytes_per_rank"] * r["tok_s"] / (
                spec.batch * bw * 1e9)
            print(f"{r['split'].upper()}={r['world']}: {100 * r['bandwidth_fraction']:.1f}% of "
                  f"one GPU's copy bandwidth ({bw:.0f} GB/s) per rank, counting every weight "
                  "byte once per step")
    one = next((r for r in results if r["world"] == 1), None)
    if one is not None:
        base = logits[1, one["split"]].astype(np.float64)
        for r in results:
            if r["world"] == 1:
                continue
            key = f"{r['split'].replace('+', '_')}{r['world']}"
            report[f"speedup_{key}"] = r["tok_s"] / one["tok_s"]
            same = r["tokens"] == one["tokens"]
            b = logits[r["world"], r["split"]].astype(np.float64)
            cos = float(base @ b / (np.linalg.norm(base) * np.linalg.norm(b)))
            report[f"tokens_match_{key}"] = same
            report[f"prefill_logits_cosine_{key}"] = cos
            print(f"{r['split'].upper()}={r['world']} / one GPU speedup "
                  f"{report[f'speedup_{key}']:.2f}x; greedy tokens "
                  f"{'identical' if same else 'DIFFER'}; prefill logits cosine {cos:.6f}")
    return report


def copy_bandwidth_gbs(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy on GPU 0, bytes read + written, median of 10 (driver events)."""
    from atlas.runtime.cuda import CudaBackend
    gpu = CudaBackend(modules={})
    a, b = gpu.alloc(nbytes), gpu.alloc(nbytes)
    s = gpu.create_stream()
    times = []
    for _ in range(12):
        e0, e1 = gpu.create_event(), gpu.create_event()
        gpu.record_event(e0, s)
        gpu.copy_d2d(b, a, nbytes, s)
        gpu.record_event(e1, s)
        times.append(gpu.event_elapsed_ms(e0, e1) / 1e3)
    gpu.close()
    return 2 * nbytes / statistics.median(times[2:]) / 1e9


# ---- all-reduce latency -----------------------------------------------------------------

def _allreduce_rank(backend: str, world: WorldSpec, hidden: int, tokens: list[int],
                    iters: int, impls: list[str], out: "mp.Queue | None") -> None:
    """Time each implementation at each size; after the timing, one call on known values
    (rank r holds r + 1 everywhere) checks the sum."""
    from atlas.comm.transport import Star
    from atlas.runtime.backend_select import make_backend
    modules = None
    if backend == "cuda" and "oneshot" in impls:  # the one-shot kernel: the baseline set
        from atlas.kernels.registry import load_registry
        ptx = load_registry().select_target("hopper", "common", "bf16")
        modules = {name: m.image() for name, m in ptx.modules.items()}
    gpu = make_backend(backend, modules, ordinal=world.cuda_device if backend == "cuda" else 0)
    star = Star.connect(world.rank, world.world_size, world.master_addr, world.master_port,
                        world.timeout_s)
    if backend == "cuda":  # NCCL even for one rank (connect_world would give SingleComm)
        from atlas.comm.nccl import NcclComm
        comm = NcclComm(star)
    else:
        comm = HostComm(gpu, star) if world.world_size > 1 else SingleComm(gpu)
    reducers = {}
    for impl in impls:
        if impl == "nccl":
            reducers[impl] = lambda buf, count, s: comm.all_reduce(buf, count, DType.BF16, s,
                                                                    ReduceOp.SUM)
        elif impl == "oneshot":
            from atlas.comm.oneshot import OneShotAllReduce
            one = OneShotAllReduce(gpu, star, max(tokens) * hidden)
            reducers[impl] = one.all_reduce
    s = gpu.create_stream()
    rows = []
    for impl, reduce in reducers.items():
        for t in tokens:
            count = t * hidden
            buf = gpu.alloc(DType.BF16.nbytes(count))
            gpu.memset(buf, 0, DType.BF16.nbytes(count))
            for _ in range(5):
                reduce(buf, count, s)
            gpu.synchronize(s)
            star.exchange(b"", lambda parts: [b""] * len(parts))
            e0, e1 = gpu.create_event(), gpu.create_event()
            gpu.record_event(e0, s)
            for _ in range(iters):
                reduce(buf, count, s)
            gpu.record_event(e1, s)
            us = 1e3 * gpu.event_elapsed_ms(e0, e1) / iters
            mine = np.full(count, world.rank + 1, np.float32)
            gpu.copy_h2d(buf, f32_to_bf16_bits(mine))
            reduce(buf, count, s)
            gpu.synchronize(s)
            got = bf16_bits_to_f32(gpu.download(buf, np.uint16, (count,)))
            want = world.world_size * (world.world_size + 1) / 2
            rows.append({"impl": impl, "tokens": t, "bytes": DType.BF16.nbytes(count),
                         "us": us, "sum_ok": bool((got == want).all())})
            gpu.free(buf)
    star.exchange(b"", lambda parts: [b""] * len(parts))
    comm.close()
    if out is not None:
        out.put(rows)


def allreduce(backend: str, world: int, hidden: int, tokens: list[int], iters: int,
              impls: list[str]) -> dict:
    if backend == "host" and world > 1 and "oneshot" in impls:
        raise SystemExit("the one-shot all-reduce maps peer GPU memory: --backend cuda (or "
                         "--world 1)")
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_allreduce_rank, args=(
        backend, WorldSpec(r, world, "127.0.0.1", port, 300.0), hidden, tokens, iters, impls,
        q if r == 0 else None)) for r in range(world)]
    for p in procs:
        p.start()
    rows = q.get(timeout=600)
    for p in procs:
        p.join(60)
    print(f"all-reduce bf16, world {world} ({backend}), hidden {hidden}, NCCL_NVLS_ENABLE="
          f"{os.environ.get('NCCL_NVLS_ENABLE')}")
    for r in rows:
        print(f"  {r['impl']:8s} {r['tokens']:5d} tokens  {r['bytes']:>10d} B  {r['us']:9.2f} us"
              f"  sum {'ok' if r['sum_ok'] else 'WRONG'}")
    by = {(r["impl"], r["tokens"]): r["us"] for r in rows}
    for t in tokens:
        if ("nccl", t) in by and ("oneshot", t) in by:
            print(f"  {t:5d} tokens: one-shot / NCCL time {by['oneshot', t] / by['nccl', t]:.2f}")
    return {"backend": backend, "world": world, "hidden": hidden, "rows": rows,
            "all_sums_ok": all(r["sum_ok"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ck = sub.add_parser("checkpoint")
    ck.add_argument("--out", type=Path, required=True)
    ck.add_argument("--layers", type=int, default=16)
    ck.add_argument("--seed", type=int, default=0)
    de = sub.add_parser("decode")
    de.add_argument("--model", required=True)
    de.add_argument("--backend", default="cuda", choices=["cuda", "host"])
    de.add_argument("--tp", default="1,2", help="group sizes to run (1: one process)")
    de.add_argument("--split", default="tp",
                    help="comma-separated, each run at every size > 1: tp: heads, MLPs, "
                    "vocabulary (--tensor-parallel-size); ep: a MoE model's experts, the rest "
                    "replicated (--expert-parallel-size); tp+ep: both")
    de.add_argument("--synthetic-seed", type=int, default=None,
                    help="generate the weights on the device (the model dir needs only "
                    "config.json)")
    de.add_argument("--batch", type=int, default=1)
    de.add_argument("--same-device", action="store_true",
                    help="every rank on GPU 0 over the host collectives (ATLAS_COMM=host): "
                    "checks a split's numerics on one GPU (its speed means nothing)")
    de.add_argument("--prompt-len", type=int, default=128)
    de.add_argument("--steps", type=int, default=128)
    de.add_argument("--out", type=Path)
    de.add_argument("--min-cosine", type=float, default=None,
                    help="exit 1 if a TP run's prefill logits fall below this cosine with TP=1")
    ar = sub.add_parser("allreduce")
    ar.add_argument("--backend", default="cuda", choices=["cuda", "host"])
    ar.add_argument("--world", type=int, default=2)
    ar.add_argument("--hidden", type=int, default=5120)
    ar.add_argument("--tokens", default="1,2,4,8,16,32,64,128")
    ar.add_argument("--iters", type=int, default=200)
    ar.add_argument("--impl", default="nccl,oneshot",
                    help="nccl (host collectives on --backend host), oneshot (peer-mapped "
                    "kernel), or both")
    ar.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "checkpoint":
        make_checkpoint(args.out, args.layers, args.seed)
        return 0
    if args.cmd == "decode":
        splits = args.split.split(",")
        if not set(splits) <= {"tp", "ep", "tp+ep"}:
            ap.error(f"--split {args.split}: each of tp, ep, tp+ep")
        spec = DecodeSpec(args.model, args.backend, args.prompt_len, args.steps, args.batch,
                          splits[0], args.synthetic_seed)
        if args.same_device:
            os.environ["ATLAS_COMM"] = "host"  # the spawned ranks inherit it
        report = decode(spec, [int(x) for x in args.tp.split(",")], splits, args.same_device)
        report["same_device"] = args.same_device
    else:
        report = allreduce(args.backend, args.world, args.hidden,
                           [int(x) for x in args.tokens.split(",")], args.iters,
                           args.impl.split(","))
    report["commit"] = os.environ.get("ATLAS_COMMIT", "unknown")
    report["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    if args.cmd == "allreduce" and not report["all_sums_ok"]:
        print("FAIL: an all-reduce returned a wrong sum")
        return 1
    if args.cmd == "decode" and args.min_cosine is not None:
        low = {k: v for k, v in report.items()
               if k.startswith("prefill_logits_cosine") and v < args.min_cosine}
        if low:
            print(f"FAIL: {low} below {args.min_cosine}")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
