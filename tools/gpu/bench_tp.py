#!/usr/bin/env python3
"""Tensor-parallel measurements for the multi-GPU machine (and a one-GPU harness check).

    # a random checkpoint with the Qwen3-32B shapes (--layers of its 64, default 16)
    bench_tp.py checkpoint --out /tmp/atlas_ckpt/qwen3-32b-16l --layers 16
    # batch-1 greedy decode, TP=1 then TP=2, same checkpoint, same process tree
    bench_tp.py decode --model DIR --tp 1,2 --out tp_decode.json
    # all-reduce latency at decode message sizes (bf16 [tokens, hidden]); --world 1 runs
    # NCCL with one rank, so the harness is exercised on a one-GPU machine
    bench_tp.py allreduce --world 2 --hidden 5120 --out allreduce.json

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
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

from atlas.comm import ReduceOp, WorldSpec, connect_world  # noqa: E402
from atlas.core.dtype import DType  # noqa: E402

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

def _decode_rank(model: str, backend: str, world: WorldSpec, prompt_len: int, steps: int,
                 out: "mp.Queue | None") -> None:
    """One rank: load its shard; rank 0 drives prefill + timed greedy decode."""
    from atlas.core.sampling import GREEDY
    from atlas.model.batch import PenaltyHistory, SeqChunk
    from atlas.model.load import load_runner
    from atlas.model.parallel_executor import TensorParallelExecutor, serve_worker

    max_seq = prompt_len + steps + 16
    runner = load_runner(Path(model), backend=backend, max_seq_len=max_seq, max_batch_size=1,
                         max_prefill_tokens=max(prompt_len, 16), world=world)
    if world.rank != 0:
        serve_worker(runner)
        return
    exe: Any = TensorParallelExecutor(runner) if world.world_size > 1 else runner
    prompt = [(7 * i + 3) % runner.vocab_size for i in range(prompt_len)]
    blocks = list(range(-(-max_seq // runner.block_size)))
    tok = exe.execute([SeqChunk(1, prompt, 0, blocks, GREEDY,
                                history=PenaltyHistory(prompt))])[0]
    prefill_logits = runner.read_logits(1)[0].copy()
    tokens, times = [tok], []
    for i in range(steps):
        t0 = time.perf_counter()
        tok = exe.execute([SeqChunk(1, [tok], prompt_len + i, blocks, GREEDY,
                                    rng_position=i + 1)])[0]
        times.append(time.perf_counter() - t0)
        tokens.append(tok)
    exe.release(1)
    if world.world_size > 1:
        exe.close()
    warm = times[min(8, len(times) // 4):]
    result = {"tp": world.world_size, "tok_s": 1.0 / statistics.median(warm),
              "step_ms_median": 1e3 * statistics.median(warm),
              "weights_bytes_per_rank": runner.info.weights_bytes, "tokens": tokens}
    if out is not None:
        out.put((result, prefill_logits))


def decode(model: str, backend: str, tps: list[int], prompt_len: int, steps: int) -> dict:
    ctx = mp.get_context("spawn")
    results, logits = [], {}
    for tp in tps:
        q: mp.Queue = ctx.Queue()
        port = _free_port()
        procs = [ctx.Process(target=_decode_rank, args=(model, backend, WorldSpec(
            r, tp, "127.0.0.1", port, 600.0), prompt_len, steps, q if r == 0 else None))
            for r in range(tp)]
        for p in procs:
            p.start()
        res, logits[tp] = q.get(timeout=1200)
        for p in procs:
            p.join(120)
            if p.exitcode != 0:
                raise SystemExit(f"TP={tp} rank process exited with {p.exitcode}")
        results.append(res)
        print(f"TP={tp}: {res['tok_s']:.1f} tok/s ({res['step_ms_median']:.3f} ms/step), "
              f"{res['weights_bytes_per_rank'] / 1e9:.2f} GB weights per rank", flush=True)
    report: dict[str, Any] = {"model": model, "backend": backend, "prompt_len": prompt_len,
                              "steps": steps, "runs": results}
    if backend == "cuda":
        bw = copy_bandwidth_gbs()
        report["copy_gbs_one_gpu"] = bw
        for r in results:
            r["bandwidth_fraction"] = r["weights_bytes_per_rank"] * r["tok_s"] / (bw * 1e9)
            print(f"TP={r['tp']}: {100 * r['bandwidth_fraction']:.1f}% of one GPU's copy "
                  f"bandwidth ({bw:.0f} GB/s) per rank")
    by_tp = {r["tp"]: r for r in results}
    if 1 in by_tp:
        for tp, r in by_tp.items():
            if tp != 1:
                report[f"speedup_tp{tp}"] = r["tok_s"] / by_tp[1]["tok_s"]
                same = r["tokens"] == by_tp[1]["tokens"]
                a, b = logits[1].astype(np.float64), logits[tp].astype(np.float64)
                cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
                report[f"tokens_match_tp{tp}"] = same
                report[f"prefill_logits_cosine_tp{tp}"] = cos
                print(f"TP={tp} / TP=1 speedup {report[f'speedup_tp{tp}']:.2f}x; "
                      f"greedy tokens {'identical' if same else 'DIFFER'}; prefill logits "
                      f"cosine {cos:.6f}")
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
                    iters: int, out: "mp.Queue | None") -> None:
    from atlas.runtime.backend_select import make_backend
    gpu = make_backend(backend, ordinal=world.cuda_device if backend == "cuda" else 0)
    if backend == "cuda":  # NCCL even for one rank (connect_world would give SingleComm)
        from atlas.comm.nccl import NcclComm
        from atlas.comm.transport import Star
        comm = NcclComm(Star.connect(world.rank, world.world_size, world.master_addr,
                                     world.master_port, world.timeout_s))
    else:
        comm = connect_world(world, gpu)
    s = gpu.create_stream()
    rows = []
    for t in tokens:
        count = t * hidden
        buf = gpu.alloc(DType.BF16.nbytes(count))
        gpu.memset(buf, 0, DType.BF16.nbytes(count))
        for _ in range(5):
            comm.all_reduce(buf, count, DType.BF16, s, ReduceOp.SUM)
        comm.barrier()
        e0, e1 = gpu.create_event(), gpu.create_event()
        gpu.record_event(e0, s)
        for _ in range(iters):
            comm.all_reduce(buf, count, DType.BF16, s, ReduceOp.SUM)
        gpu.record_event(e1, s)
        us = 1e3 * gpu.event_elapsed_ms(e0, e1) / iters
        rows.append({"tokens": t, "bytes": DType.BF16.nbytes(count), "us": us})
        gpu.free(buf)
    comm.barrier()
    comm.close()
    if out is not None:
        out.put(rows)


def allreduce(backend: str, world: int, hidden: int, tokens: list[int], iters: int) -> dict:
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_allreduce_rank, args=(
        backend, WorldSpec(r, world, "127.0.0.1", port, 300.0), hidden, tokens, iters,
        q if r == 0 else None)) for r in range(world)]
    for p in procs:
        p.start()
    rows = q.get(timeout=600)
    for p in procs:
        p.join(60)
    print(f"all-reduce bf16, world {world} ({backend}), hidden {hidden}, NCCL_NVLS_ENABLE="
          f"{os.environ.get('NCCL_NVLS_ENABLE')}")
    for r in rows:
        print(f"  {r['tokens']:5d} tokens  {r['bytes']:>10d} B  {r['us']:9.2f} us")
    return {"backend": backend, "world": world, "hidden": hidden, "rows": rows}


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
    de.add_argument("--tp", default="1,2")
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
    ar.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "checkpoint":
        make_checkpoint(args.out, args.layers, args.seed)
        return 0
    if args.cmd == "decode":
        report = decode(args.model, args.backend, [int(x) for x in args.tp.split(",")],
                        args.prompt_len, args.steps)
    else:
        report = allreduce(args.backend, args.world, args.hidden,
                           [int(x) for x in args.tokens.split(",")], args.iters)
    report["commit"] = os.environ.get("ATLAS_COMMIT", "unknown")
    report["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    if args.cmd == "decode" and args.min_cosine is not None:
        low = {k: v for k, v in report.items()
               if k.startswith("prefill_logits_cosine") and v < args.min_cosine}
        if low:
            print(f"FAIL: {low} below {args.min_cosine}")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
