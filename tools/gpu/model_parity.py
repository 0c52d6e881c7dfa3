#!/usr/bin/env python3
"""Atlas vs transformers on one checkpoint with goldens (golden.npz from tools/make_fixtures.py).

Compares the last-position logits of the prompt (max abs error, cosine similarity) and the
greedy continuation token by token. Works on any backend (`--backend host` for the tiny CPU
fixtures, `cuda` on the GPU machine). Prints one line per model and writes JSON with --out.
With --tail (goldens with `*_tail_logits` controls: full-size configs made on the GPU
machine) it also prints the distribution over the prompt's last positions of 1 - cosine
for Atlas, transformers SDPA and eager, against eager and float32 (engine.parity
tail_distribution): the comparison to read MoE parity by, where near-tie routing makes one
position a noisy draw.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from atlas.engine.parity import compare_with_golden, tail_distribution  # noqa: E402


def _print_tail(tail: dict) -> None:
    if not tail:
        print("    (no *_tail_logits controls in this golden)")
        return
    print(f"    last {tail['positions']} positions, 1 - cosine "
          f"(min / p10 / median / p90 / max, argmax agreement):")
    for name in ("atlas", "transformers_sdpa", "transformers_eager"):
        for ref, d in tail.get(name, {}).items():
            print(f"      {name:<19} {ref:<9} {d['min']:.2e} / {d['p10']:.2e} / "
                  f"{d['median']:.2e} / {d['p90']:.2e} / {d['max']:.2e}  "
                  f"argmax {d['argmax_agree']:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", type=Path, action="append", required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--tail", action="store_true",
                    help="also the last positions' distribution against the controls")
    a = ap.parse_args()
    rows, ok = [], True
    for model in a.model:
        golden = dict(np.load(model / "golden.npz"))
        r = compare_with_golden(model, golden, backend=a.backend)
        rows.append(r)
        for miss in r["teacher_forced_misses"]:
            print(f"    step {miss['step']}: ours {miss['ours']} vs {miss['want']} "
                  f"(transformers' top-2 margin {miss['golden_margin']:.4f})")
        ok &= r["passed"]
        print(f"{model.name:<24} max|dlogit| {r['max_abs_err']:.4f}  cosine {r['cosine']:.6f}  "
              f"argmax {'same' if r['argmax_match'] else 'DIFF'}  greedy "
              f"{r['greedy_match']}/{r['greedy_total']} identical  teacher-forced "
              f"{r['teacher_forced_match']}/{r['teacher_forced_total']}  "
              f"{'PASS' if r['passed'] else 'FAIL'}")
        if "cosine_vs_f32" in r:
            c, e, g = r["cosine_vs_f32"], r["max_abs_err_vs_f32"], r["greedy_identical_prefix"]
            print("    vs transformers float32: " + ", ".join(
                f"{k} cosine {c[k]:.6f} max {e[k]:.4f}" for k in c))
            print("    greedy identical prefix: " + ", ".join(f"{k} {v}" for k, v in g.items()))
        if a.tail:
            r["tail"] = tail_distribution(model, golden, backend=a.backend)
            _print_tail(r["tail"])
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(rows, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
