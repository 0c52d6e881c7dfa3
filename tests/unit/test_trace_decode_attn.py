"""tools/gpu/trace_decode_attn.py: how it reads the traced twins' stamps (synthetic traces
laid out as attention_twins.cu writes them) and fits the time-vs-keys line."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from atlas.runtime.ops import attention

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu" / "trace_decode_attn.py"
PHASES = attention.TRACE_PHASES


@pytest.fixture(scope="module")
def tool():
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("trace_decode_attn", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["trace_decode_attn"] = module  # dataclasses resolve annotations through it
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["trace_decode_attn"]
        sys.path.remove(str(SCRIPT.parent))


def block(start_ns: int, sm: int, keyed: bool, offsets_us: dict[str, float],
          mhz: float = 1000.0) -> np.ndarray:
    """One block's trace words: phase p at start + offset (ns and cycles at `mhz`)."""
    words = np.zeros(attention.TRACE_WORDS, np.int64)
    cyc0 = 5_000_000 + 17 * sm  # an SM's own counter: any origin
    for name, us in {"start": 0.0, **offsets_us}.items():
        p = PHASES.index(name)
        words[p] = start_ns + round(us * 1e3)
        words[attention.TRACE_CYCLES_WORD + p] = cyc0 + round(us * mhz)
    words[attention.TRACE_SM_WORD] = sm
    words[attention.TRACE_KEYED_WORD] = int(keyed)
    return words


def test_summarize_medians_keyed_blocks_and_times_after_the_previous_end(tool) -> None:
    full = {"kv_len": 0.5, "prologue": 1.0, "loaded": 1.5, "waited": 2.0, "q_ready": 3.0,
            "round1": 4.0, "keys_done": 5.0, "block_merged": 6.0, "arrived": 6.5, "merged": 7.0,
            "end": 8.0}
    t = np.stack([
        block(10_000, 0, True, full),
        block(10_400, 0, True, {k: v * 2 for k, v in full.items()}),   # overlaps block 0
        block(10_200, 1, True, {k: v * 3 for k, v in full.items()}),
        block(10_100, 2, False, {"kv_len": 0.3, "end": 0.4}),          # no keys: exits
    ])
    prev = np.stack([block(1_000, 5, True, {"end": 8.5})])            # ends at 9,500 ns
    line = tool.summarize(t, prev, 1000.0)
    assert line.phases == pytest.approx([v * 2 for v in full.values()])
    assert (line.keyed, line.sms, line.per_sm) == (3, 3, 2)
    assert line.first == pytest.approx(0.5)                  # 10,000 - 9,500 ns
    assert line.span == pytest.approx((10_200 + 24_000 - 9_500) / 1e3)
    assert line.wait == pytest.approx((10_400 + 4_000 - 9_500) / 1e3)
    assert line.block_us == pytest.approx(16.0)
    assert line.late == pytest.approx(0.4)                   # keyed block 1 at 10,400 ns
    alone = tool.summarize(t, None, 1000.0)                  # relative to its own first start
    assert alone.first == 0.0 and alone.span == pytest.approx(24.2)


def test_a_phase_no_block_reached_is_nan_and_the_clock_comes_from_long_blocks(tool) -> None:
    t = np.stack([block(0, 0, True, {"waited": 1.0, "end": 6.0}, mhz=1500.0),
                  block(0, 1, True, {"waited": 1.0, "end": 7.0}, mhz=1500.0)])
    line = tool.summarize(t, None, 1500.0)
    assert line.phases[PHASES.index("waited") - 1] == pytest.approx(1.0)
    assert math.isnan(line.phases[PHASES.index("round1") - 1])
    assert tool.sm_clock_mhz([t]) == pytest.approx(1500.0)
    short = np.stack([block(0, 0, True, {"end": 2.0}, mhz=1500.0)])  # < 5 us: not measured
    assert tool.sm_clock_mhz([short]) == tool.DEFAULT_SM_MHZ


def test_fit_uses_the_keys_past_the_short_splits(tool) -> None:
    pts = [(64, 50.0), (512, 50.0)] + [(k, 3.0 + 0.002 * k) for k in (1024, 2048, 4096, 8192)]
    intercept, slope = tool.fit(pts)
    assert intercept == pytest.approx(3.0) and slope == pytest.approx(0.002)
    assert all(math.isnan(x) for x in tool.fit([(64, 1.0), (1024, 2.0)]))


def test_dry_run_traces_every_mode_and_fits_the_curves(tool, capsys) -> None:
    """The whole flow on the host: every (shape, mode) line, the batch-64 stand-in, the
    curves and their fits (the host has no clock: its stamps read zero, shown as '-')."""
    pytest.importorskip("torch")
    assert tool.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith(("tiny b", "tiny-d256 b"))]
    # 2 geometries x 2 key counts x 4 batch-1 modes + batch 3's alone, b2b and swept
    assert len(lines) == 2 * 2 * 4 + 3
    assert {ln.split()[4] for ln in lines} == {"alone", "b2b", "gemv", "graph", "swept"}
    assert "decode_attn_rope_cluster" in out and "decode_attn_cluster" in out
    assert out.count("fit keys >= 1024") == 4


def test_block_lines_name_the_launch_s_last_block_against_its_median(tool, tmp_path) -> None:
    """--dump's per-block report: run 2's alone / graph launches only, the last-ending block
    (here the merging one, 4 us past the others' arrival) against the median keyed block,
    read back from the .npz the way --blocks reads it."""
    full = {"waited": 1.0, "block_merged": 6.0, "arrived": 6.5, "merged": 7.0, "end": 7.1}
    merging = {**full, "merged": 11.0, "end": 11.1}
    t = np.stack([block(10_000, 0, True, full), block(10_200, 1, True, merging),
                  block(10_100, 2, True, {k: v + 0.5 for k, v in full.items()}),
                  block(10_050, 3, False, {"end": 0.3})])
    path = tmp_path / "dump.npz"
    np.savez(path, **{"k|538|graph|2": t, "k|538|graph|1": t, "k|538|b2b|2": t})
    assert tool.main(["--blocks", str(path)]) == 0
    with np.load(path) as dump:
        lines = tool.block_lines(dict(dump))
    assert len(lines) == 4 and lines[0].startswith("k graph keys 538: 3 keyed of 4 blocks")
    assert "last block 1 (keyed 1, SM 1) vs median keyed block 2" in lines[0]
    last, median = lines[1].split(), lines[2].split()
    assert "merged=11.20" in last and "end=11.30" in last and "arrived=6.70" in last
    assert "merged=7.60" in median and "round1=nan" in median
    assert lines[3] == "  keyed ends (us): 7.10 7.70 11.30"
