"""tools/gpu/moe_layer_check.py on the host backend: it hooks every sparse layer of a real
prefill, reads the layer's buffers back and recomputes router, top-k and experts. On the host
every kernel is its reference, so each stage must agree exactly; a wrong buffer shape,
address or dtype in the tool shows up as a nonzero error or a crash here, not on the GPU."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "tiny-qwen3-moe"


def _tool():
    spec = importlib.util.spec_from_file_location(
        "moe_layer_check", REPO / "tools" / "gpu" / "moe_layer_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_sparse_layer_matches_its_references_on_host(tmp_path: Path) -> None:
    out = tmp_path / "layers.json"
    assert _tool().main(["--model", str(FIXTURE), "--backend", "host", "--out", str(out)]) == 0
    layers = json.loads(out.read_text())
    prompt = len(np.load(FIXTURE / "golden.npz")["input_ids"].reshape(-1))
    assert len(layers) == 1  # layer 1 is dense (mlp_only_layers)
    r = layers[0]
    assert r["tokens"] == prompt
    assert r["topk_id_mismatch_count"] == 0
    for stage in ("router_logits", "topk_weights", "experts_out"):
        assert r[f"{stage}_rel_err"] == 0.0, stage


def test_a_wrong_expert_output_is_reported() -> None:
    """The experts' output compared with a reference that used other routing weights."""
    tool = _tool()
    rng = np.random.default_rng(0)
    e, k, h, i, t = 4, 2, 32, 16, 5
    x = rng.standard_normal((t, h))
    ids = np.stack([rng.permutation(e)[:k] for _ in range(t)]).astype(np.int32)
    w = np.full((t, k), 0.5, np.float32)
    w_gu = (rng.standard_normal((e, 2 * i, h)).astype(np.float32).view(np.uint32) >> 16
            ).astype(np.uint16)
    w_down = (rng.standard_normal((e, h, i)).astype(np.float32).view(np.uint32) >> 16
              ).astype(np.uint16)
    same = tool.reference_experts(x, ids, w, w_gu, w_down, i)
    other = tool.reference_experts(x, ids, w * np.float32(1.5), w_gu, w_down, i)
    assert tool._rel(same, same)[0] == 0.0
    assert tool._rel(other, same)[0] > 0.1
