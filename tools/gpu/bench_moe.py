#!/usr/bin/env python3
"""Mixture-of-experts benchmark (GPU machine): Qwen3-30B-A3B at full size, and Atlas vs
transformers on the 8-layer config with the same weights.

1. Device copy bandwidth (bench_decode.copy_bandwidth_gbs), measured in this run.
2. Qwen3-30B-A3B, the published config, bf16, weights generated on the device from a seed
   (runtime/synthetic_weights.py: 61 GB does not fit the machine's disk): batch-1 decode
   of 256 new tokens after a 512-token prompt; the bytes a step must read per token
   (bench/decode_bytes.py: attention, KV cache, router, the k selected experts, LM head,
   norms, embedding row), tok/s, the copy bandwidth and the fraction
   bytes * tok/s / copy bandwidth (the issue's target: >= 70%); decode at batch 8, 32, 64;
   2,048-token prefill tok/s.
3. `--small-model`: the 8-layer config's checkpoint (tools/make_fixtures.py --config
   qwen3-30b-a3b-8l): Atlas batch-1 decode and prefill, then transformers eager (and
   StaticCache + torch.compile where it runs; the failure is recorded otherwise) on the
   same weights and shapes.

`--config` benchmarks another tools/make_fixtures.py config the same way: the hybrid flagship
Qwen3.5-35B-A3B is `--config qwen3_5-35b-a3b --extra-prefill 16384 --target-tok-s 450 --hf
none` (its bytes add the linear-attention weights and recurrent state; `--extra-prefill`
lengths are measured in loads of their own, the step buffers sized for each).

`--quant nvfp4|fp8-block|fp8-tensor` makes the synthetic weights quantized in that format
(the config.json gets `atlas models quantize`'s quantization_config, and
runtime/synthetic_quant.py makes the codes and scales on the device): the projections and
per-expert experts a quantized checkpoint stores, read by the quantized kernels; bytes per
token count their codes and scales (bench/decode_bytes.py QUANT_BYTES). `--lm-head` and
`--linear-attn` quantize the LM head and the Gated-DeltaNet projections too (published
exports keep them bf16: they are 1.0 and 2.0 of Qwen3.5-35B-A3B's 4.0 GB per NVFP4 token).
Issue 12's flagship target: `--config qwen3_5-35b-a3b --quant nvfp4 --target-tok-s 900`.

A benchmark, not a test: it prints a table, writes JSON with --out, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "py"))
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "tools" / "gpu"))

from bench_decode import atlas_bench, copy_bandwidth_gbs, hf_bench  # noqa: E402

from atlas.bench.decode_bytes import decode_bytes_per_step  # noqa: E402
from atlas.core.config import ModelConfig  # noqa: E402

FULL_CONFIG = "qwen3-30b-a3b"


def synthetic_model_dir(name: str, root: Path, quant: str = "bf16", lm_head: bool = False,
                        linear_attn: bool = False) -> Path:
    """A directory holding only `name`'s config.json (tools/make_fixtures.py CONFIGS), with
    the quantization_config of `quant` unless bf16 (`lm_head`, `linear_attn`: not excluded,
    so NVFP4 / FP8-tensor synthetic weights quantize the LM head / the Gated-DeltaNet
    projections too; runtime/synthetic_quant.py)."""
    from make_fixtures import write_config

    model_dir = write_config(name, root / name).parent
    if quant != "bf16":
        from atlas.runtime.quantize import quantization_config

        cfg_file = model_dir / "config.json"
        cfg = json.loads(cfg_file.read_text())
        kept = ([] if lm_head else ["lm_head.weight"]) + (
            [] if linear_attn else ["model.layers.*.linear_attn.weight"])
        cfg["quantization_config"] = quantization_config(quant, kept)[0]
        cfg_file.write_text(json.dumps(cfg, indent=2))
    return model_dir


def traffic(model_dir: Path, context: int, batches: list[int], quant: str = "bf16",
            lm_head: bool = False, linear_attn: bool = False) -> dict[int, dict[str, float]]:
    cfg = ModelConfig.from_hf(model_dir)
    return {b: decode_bytes_per_step(cfg, context, b, quant, lm_head, linear_attn)
            for b in batches}


def hf_modes(model_dir: Path, modes: list[str], prompt: int, new: int, seed: int) -> dict:
    out: dict = {}
    for mode in modes:
        try:
            out[f"hf_{mode}"] = hf_bench(model_dir, [1], prompt, new, mode == "compiled", seed)
        except Exception as exc:  # recorded: "compiled if it runs"
            out[f"hf_{mode}"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            print(f"[hf-{mode}] failed: {out[f'hf_{mode}']['error']}", file=sys.stderr)
    return out


def print_table(result: dict, batches: list[int]) -> None:
    copy = result["copy_gbs"]
    full = result["full"]
    print(f"\n== {result['config']} {result.get('quant', 'bf16')} (synthetic weights, seed "
          f"{result['seed']}): device copy "
          f"{copy:.0f} GB/s, prefill {result['prefill']} tok: {full['prefill_tok_s']:.0f} tok/s")
    for n, tps in full.get("prefill_extra", {}).items():
        print(f"prefill {n} tok: {tps:.0f} tok/s")
    print(f"{'batch':>5} {'tok/s':>9} {'GB/token':>9} {'GB/s':>8} {'% copy BW':>10}  bytes")
    for b in batches:
        tps = full["decode"][b]
        per_token = sum(result["bytes"][b].values()) / b
        gbs = per_token * tps / 1e9
        note = "exact (k of E experts)" if b == 1 else "experts: uniform-routing estimate"
        print(f"{b:>5} {tps:>9.1f} {per_token / 1e9:>9.3f} {gbs:>8.0f} "
              f"{100 * gbs / copy:>9.1f}%  {note}")
    print("batch-1 bytes per token: " + ", ".join(
        f"{k} {v / 1e9:.3f} GB" for k, v in result["bytes"][1].items() if v))
    target = result.get("target_tok_s")
    if target and 1 in full["decode"]:
        tps = full["decode"][1]
        print(f"batch-1 decode target {target:.0f} tok/s: "
              f"{'met' if tps >= target else 'NOT met'} ({tps:.1f})")
    small = result.get("small")
    if small:
        print(f"\n== {small['model']}: Atlas vs transformers, batch 1, prompt "
              f"{result['prompt']}")
        print(f"{'engine':<14} {'decode tok/s':>12}")
        print(f"{'atlas':<14} {small['atlas']['decode'][1]:>12.1f}")
        for mode, res in small.items():
            if mode.startswith("hf_"):
                val = f"{res[1]:>12.1f}" if 1 in res else f"  {res.get('error', '?')}"
                print(f"{mode:<14} {val}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=FULL_CONFIG, help="a tools/make_fixtures.py config")
    ap.add_argument("--extra-prefill", default="",
                    help="comma list of further prefill lengths (a load each)")
    ap.add_argument("--target-tok-s", type=float, help="batch-1 decode target to report")
    ap.add_argument("--batches", default="1,8,32,64")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quant", default="bf16",
                    choices=("bf16", "nvfp4", "fp8-block", "fp8-tensor"),
                    help="synthetic weights in this format (see the module docstring)")
    ap.add_argument("--lm-head", action="store_true",
                    help="with --quant nvfp4 / fp8-tensor: the LM head quantized too")
    ap.add_argument("--linear-attn", action="store_true",
                    help="with --quant nvfp4 / fp8-tensor: the Gated-DeltaNet projections too")
    ap.add_argument("--small-model", type=Path,
                    help="the 8-layer checkpoint for the transformers comparison")
    ap.add_argument("--hf", default="eager,compiled", help="comma list: eager,compiled or none")
    ap.add_argument("--hf-new", type=int, default=64)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    batches = [int(x) for x in a.batches.split(",")]
    result: dict = {"config": a.config, "quant": a.quant + (" +lm_head" if a.lm_head else "")
                    + (" +linear_attn" if a.linear_attn else ""),
                    "target_tok_s": a.target_tok_s,
                    "date": time.strftime("%Y-%m-%d"), "seed": a.seed, "prompt": a.prompt,
                    "new": a.new, "prefill": a.prefill,
                    "commit": os.environ.get("ATLAS_COMMIT", "unknown")}
    result["copy_gbs"] = copy_bandwidth_gbs()
    with tempfile.TemporaryDirectory() as tmp:
        full_dir = synthetic_model_dir(a.config, Path(tmp), a.quant, a.lm_head, a.linear_attn)
        # the mean context over the decoded tokens
        result["bytes"] = traffic(full_dir, a.prompt + a.new // 2, batches, a.quant,
                                  a.lm_head, a.linear_attn)
        result["full"] = atlas_bench(full_dir, batches, a.prompt, a.new, a.prefill, a.seed,
                                     synthetic_seed=a.seed)
        result["full"]["prefill_extra"] = {
            n: atlas_bench(full_dir, [1], a.prompt, 8, n, a.seed,
                           synthetic_seed=a.seed)["prefill_tok_s"]
            for n in (int(x) for x in a.extra_prefill.split(",") if x)}
    if a.small_model is not None:
        small = {"model": a.small_model.name,
                 "atlas": atlas_bench(a.small_model, [1], a.prompt, a.hf_new, a.prefill,
                                      a.seed)}
        small.update(hf_modes(a.small_model, [m for m in a.hf.split(",") if m != "none"],
                              a.prompt, a.hf_new, a.seed))
        result["small"] = small
    print_table(result, batches)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
