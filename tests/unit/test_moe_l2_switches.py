"""The batch-1 MoE L2 twins are wired into the model's decode graph: with ATLAS_MOE_DOWN_L2=1
and ATLAS_MOE_GATE_UP_L2=1 the mock backend's captured batch-1 decode step launches
moe_gate_up_gemv_l2_bf16_single, and without them the kernel it replaces. The tiny
checkpoint's intermediate size is no multiple of 256, so its down launch is the row-group
kernel either way: the down switch must not reach it (tests/unit/test_moe_kernels.py
test_down_kernel_choice covers the GEMV-shaped down's twin)."""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("on", [False, True])
def test_decode_graph_takes_the_l2_twins_when_switched_on(on: bool, monkeypatch) -> None:
    for key in ("ATLAS_MOE_DOWN_L2", "ATLAS_MOE_GATE_UP_L2"):
        monkeypatch.setenv(key, "1" if on else "0")
    runner = load_runner(FIXTURES / "tiny-qwen3-moe", backend="mock", max_seq_len=64,
                         max_batch_size=4, max_prefill_tokens=32)
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    (replay,) = dev.graph_launches
    moe = [r for r in replay.graph if r.func.startswith(("moe_gate_up", "moe_down"))]
    gate_up = {r.func for r in moe if r.func.startswith("moe_gate_up")}
    down = [r for r in moe if r.func.startswith("moe_down")]
    assert moe and len(down) == len(moe) // 2
    assert gate_up == {"moe_gate_up_gemv_l2_bf16_single" if on else "moe_gate_up_gemv_bf16_single"}
    assert {r.func for r in down} == {"moe_down_add_rmsnorm_bf16"}
