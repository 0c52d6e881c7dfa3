#!/usr/bin/env python3
"""Decode/prefill benchmark of Atlas against transformers on one checkpoint (GPU machine).

Prints a table and writes JSON: the measured device-copy bandwidth, Atlas batch-1/8/32
decode tok/s (512-token prompt, 256 new tokens, greedy; each step is `EngineCore.step`, the
scheduler included, as the server runs it), Atlas prefill tok/s for a
2,048-token prompt, the bandwidth fraction (bytes a batch-1 step reads: the weights less the
unread embedding table, plus the KV cache) * tok/s / copy GB/s, and the same
shapes through transformers eager and transformers + StaticCache + torch.compile.
This is a benchmark script, not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from atlas.bench.decode_bytes import decode_bytes_per_step  # noqa: E402
from atlas.core.config import ModelConfig  # noqa: E402
from atlas.core.sampling import GREEDY  # noqa: E402
from atlas.engine.request import EngineRequest  # noqa: E402
from engine_decode import start_decoding, stop_all  # noqa: E402


def copy_bandwidth_gbs() -> float:
    """Device-to-device copy of 4 GiB, bytes read + written, median of 10 (torch events)."""
    import torch

    n = 4 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    a.random_(0, 255)
    times = []
    for _ in range(12):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    del a, b
    torch.cuda.empty_cache()
    return 2 * n / statistics.median(times[2:]) / 1e9


def atlas_bench(model_dir: Path, batches: list[int], prompt_len: int, new_tokens: int,
                prefill_len: int, seed: int, backend: str = "cuda",
                async_scheduling: bool = True, **load_kwargs) -> dict:
    """Prefill and decode tok/s through the engine core (what the server runs per step);
    `load_kwargs` go to load_runner (e.g. synthetic_seed)."""
    from atlas.engine.core import EngineCore
    from atlas.model.load import load_runner

    max_batch = max(batches)
    # slack past prompt + new tokens: sequences prefilled early decode while later ones fill
    runner = load_runner(model_dir, backend=backend,
                         max_seq_len=max(prompt_len + new_tokens + 64, prefill_len + 16),
                         max_batch_size=max_batch, max_prefill_tokens=prefill_len,
                         gpu_memory_utilization=0.85, fast_load=True, progress=None,
                         **load_kwargs)
    rng = np.random.default_rng(seed)
    vocab = runner.vocab_size
    out: dict = {"weights_bytes": runner.info.weights_bytes, "decode": {},
                 "load_s": runner.info.load_s}

    # prefill tok/s: one sequence of prefill_len tokens, one step (it samples one token),
    # committed by the same call (synchronous steps)
    core = EngineCore.build(runner, max_prefill_tokens=prefill_len, max_num_seqs=1,
                            async_scheduling=False)
    times = []
    for _ in range(4):
        ids = rng.integers(100, vocab - 100, prefill_len).tolist()
        core.add(len(times), EngineRequest(ids, GREEDY, 1))
        t0 = time.perf_counter()
        core.step()
        times.append(time.perf_counter() - t0)
        assert not core.has_work
    out["prefill_tok_s"] = prefill_len / statistics.median(times[1:])

    for b in batches:
        core = start_decoding(runner, b, prompt_len, new_tokens + 64, rng,
                              async_scheduling=async_scheduling)
        core.step()  # warm
        generated = 0
        t0 = time.perf_counter()
        for _ in range(new_tokens - 1):
            generated += core.step().num_generated
        dt = time.perf_counter() - t0
        out["decode"][b] = generated / dt
        stop_all(core)
    if backend == "cuda":
        runner.backend.close()  # its memory goes back before the transformers baselines load
    return out


def hf_bench(model_dir: Path, batches: list[int], prompt_len: int, new_tokens: int,
             compiled: bool, seed: int) -> dict:
    """transformers on the same weights: eager generate(), or StaticCache + torch.compile."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).cuda().eval()
    vocab = model.config.vocab_size
    g = torch.Generator(device="cpu").manual_seed(seed)
    res: dict = {}
    for b in batches:
        ids = torch.randint(100, vocab - 100, (b, prompt_len), generator=g).cuda()
        if not compiled:
            with torch.inference_mode():
                model.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                model(ids)
                torch.cuda.synchronize()
                t_prefill = time.perf_counter() - t0
                t0 = time.perf_counter()
                model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                               do_sample=False)
                torch.cuda.synchronize()
                dt = time.perf_counter() - t0 - t_prefill
            res[b] = b * (new_tokens - 1) / dt
        else:
            res[b] = _compiled_decode(model, ids, new_tokens)
    del model
    torch.cuda.empty_cache()
    return res


def _compiled_decode(model, ids, new_tokens: int) -> float:
    import torch
    from transformers import StaticCache

    b, p = ids.shape
    try:
        cache = StaticCache(config=model.config, max_cache_len=p + new_tokens + 8)
    except TypeError:
        cache = StaticCache(config=model.config, max_batch_size=b, max_cache_len=p + new_tokens + 8,
                            device="cuda", dtype=torch.bfloat16)
    fwd = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    with torch.inference_mode():
        pos = torch.arange(p, device="cuda")
        logits = model(ids, past_key_values=cache, cache_position=pos, use_cache=True).logits
        tok = logits[:, -1].argmax(-1, keepdim=True)
        t_compile = time.perf_counter()
        for i in range(3):  # compile + warm
            cp = torch.tensor([p + i], device="cuda")
            tok = fwd(tok, past_key_values=cache, cache_position=cp,
                      use_cache=True).logits[:, -1].argmax(-1, keepdim=True).clone()
        torch.cuda.synchronize()
        print(f"[hf-compiled] compile+warm {time.perf_counter() - t_compile:.1f}s", file=sys.stderr)
        t0 = time.perf_counter()
        for i in range(3, new_tokens):
            cp = torch.tensor([p + i], device="cuda")
            tok = fwd(tok, past_key_values=cache, cache_position=cp,
                      use_cache=True).logits[:, -1].argmax(-1, keepdim=True).clone()
        torch.cuda.synchronize()
        return b * (new_tokens - 3) / (time.perf_counter() - t0)


def bytes_read_per_token(model: Path, weights_bytes: int, context: int) -> float:
    """What a batch-1 decode step reads: every weight but the embedding table (one row of it;
    the whole table when it is tied to the LM head, which reads it) plus the KV cache at the
    mean context of the timed tokens. Works for quantized checkpoints too: the embedding
    table stays bf16 there."""
    cfg = ModelConfig.from_hf(model)
    table = 0 if cfg.tie_word_embeddings else cfg.vocab_size * cfg.hidden_size * 2
    kv = decode_bytes_per_step(cfg, context)["kv_cache"]
    return float(weights_bytes - table + cfg.hidden_size * 2 + kv)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--hf", default="eager,compiled", help="comma list: eager,compiled or none")
    ap.add_argument("--hf-batches", default="1")
    ap.add_argument("--hf-new", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-async-scheduling", action="store_true",
                    help="commit every decode step before planning the next")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    batches = [int(x) for x in a.batches.split(",")]
    result: dict = {"model": str(a.model), "date": time.strftime("%Y-%m-%d"),
                    "commit": os.environ.get("ATLAS_COMMIT", "unknown")}
    result["copy_gbs"] = copy_bandwidth_gbs()
    result["async_scheduling"] = not a.no_async_scheduling
    result["atlas"] = atlas_bench(a.model, batches, a.prompt, a.new, a.prefill, a.seed,
                                  async_scheduling=not a.no_async_scheduling)
    hf_modes = [m for m in a.hf.split(",") if m and m != "none"]
    hf_batches = [int(x) for x in a.hf_batches.split(",")]
    for mode in hf_modes:
        result[f"hf_{mode}"] = hf_bench(a.model, hf_batches, a.prompt, a.hf_new,
                                        mode == "compiled", a.seed)
    wb = result["atlas"]["weights_bytes"]
    read = bytes_read_per_token(a.model, wb, a.prompt + a.new // 2)
    result["atlas"]["bytes_per_token_b1"] = read
    print(f"\n== {a.model.name}: weights {wb / 1e9:.2f} GB, read per batch-1 token "
          f"{read / 1e9:.2f} GB, device copy "
          f"{result['copy_gbs']:.0f} GB/s, Atlas prefill {a.prefill} tok: "
          f"{result['atlas']['prefill_tok_s']:.0f} tok/s")
    print(f"{'batch':>5} {'atlas tok/s':>12} {'% copy BW':>10} " +
          " ".join(f"{'hf_' + m:>14}" for m in hf_modes))
    for b in batches:
        tps = result["atlas"]["decode"][b]
        frac = read * tps / (result["copy_gbs"] * 1e9) if b == 1 else float("nan")
        hf_cols = " ".join(f"{result['hf_' + m].get(b, float('nan')):>14.1f}" for m in hf_modes)
        print(f"{b:>5} {tps:>12.1f} {100 * frac:>9.1f}% {hf_cols}")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
