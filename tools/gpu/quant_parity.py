#!/usr/bin/env python3
"""A quantized checkpoint against its dequantized bf16 twin (atlas.engine.quant_parity).

    python3 tools/gpu/quant_parity.py --quantized DIR --reference DIR [--backend cuda] [--out F]

Prefills a 128-token prompt (the dequantize + GEMM route: must match to cosine 0.99999)
and feeds 8 tokens one step at a time (the quantized GEMV: cosine >= 0.9995, see
atlas.engine.quant_parity for why); argmax agreement is reported. Prints one line; exit
status 1 on failure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "py"))

from atlas.engine.quant_parity import compare_quantized  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quantized", type=Path, required=True)
    ap.add_argument("--reference", type=Path, required=True)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    vocab = json.loads((a.reference / "config.json").read_text())["vocab_size"]
    rng = np.random.default_rng(a.seed)
    prompt = rng.integers(100, vocab - 100, 128).tolist()
    decode = rng.integers(100, vocab - 100, 8).tolist()
    r = compare_quantized(a.quantized, a.reference, prompt, decode, a.backend,
                          max_num_blocks=64, gpu_memory_utilization=0.5)
    print(f"{r['model']:<28} vs {r['reference']}: prefill cosine {r['prefill_cosine']:.7f}  "
          f"decode min cosine {r['decode_min_cosine']:.6f}  "
          f"argmax {sum(r['argmax_match'])}/{len(r['argmax_match'])}  max|dlogit| "
          f"{r['max_abs_err']:.4f}  {'PASS' if r['passed'] else 'FAIL'}")
    if a.out:
        a.out.write_text(json.dumps(r, indent=2) + "\n")
    return 0 if r["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
