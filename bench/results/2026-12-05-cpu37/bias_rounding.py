"""Qwen2's q/k/v biases: one rounding (the bias added to the float32 sums, as gpt-oss's
`ModelConfig.bias_in_f32` path does) against two (bias_add_bf16 on the bf16 product, Atlas's
default), each against transformers' goldens of the tiny Qwen2 fixtures on the host backend:
prefill of the first token, then every other prompt token as one batch-1 decode step, each
position's logits against the golden's. Run from the repo root:
`PYTHONPATH=py python3 bench/results/2026-12-05-cpu37/bias_rounding.py`."""
import sys, numpy as np
from pathlib import Path
sys.path.insert(0, "py")
from atlas.core import config as C
from atlas.engine.parity import prefill_then_force
from atlas.model.load import load_runner
for name in ("tiny-qwen2", "tiny-qwen2-swa", "tiny-qwen2-moe"):
    d = Path("tests/fixtures") / name
    g = dict(np.load(d / "golden.npz"))
    ids = [int(x) for x in g["input_ids"]]
    want = g["logits"].astype(np.float64)
    res = {}
    for one in (False, True):
        C.ModelConfig.bias_in_f32 = property(lambda self, one=one: one or self.model_type in C.GPT_OSS_MODEL_TYPES)
        r = load_runner(d, backend="host", max_seq_len=64, max_batch_size=1, max_prefill_tokens=32, fast_load=True, progress=None)
        got = np.stack(list(prefill_then_force(r, ids[:1], ids[1:])))
        err = np.abs(got - want)
        cos = (got * want).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(want, axis=-1)
        res[one] = (err.mean(), err.max(), 1 - cos.mean())
        print(f"{name:16s} {'one rounding' if one else 'two roundings'}: mean|d| {err.mean():.5f} max {err.max():.4f} 1-cos {1-cos.mean():.3e}", flush=True)
