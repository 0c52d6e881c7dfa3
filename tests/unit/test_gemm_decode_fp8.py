"""The decode GEMM on Hopper's FP8 tensor cores (gemm_decode_fp8): the exactness of its x
split (a numpy model of the kernel's stage_x against every bf16 value), its check cases on the
host reference (launch builder and reference agree with the float64 oracle), the routes that
send FP8 products to it (switch, outputs, preconditions) and their launch geometry, and the
kernel constants the builder mirrors. There is no GPU in CI; the device check is
tools/gpu/check_kernels.py -m gemm_decode_fp8 over the same cases."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, f32_to_fp8_e4m3, fp8_e4m3_to_f32
from atlas.core.quant import Fp8ScaleMap
from atlas.runtime.cases import gemm_decode_fp8 as case_defs
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul_fp8_wgmma, matmul_quant
from atlas.runtime.ops.matmul_quant import Fp8Weight, QuantLinear
from atlas.runtime.ops.routes import KernelRoutes
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

SOURCE = Path(__file__).resolve().parents[2] / "kernels/hopper/common/gemm_decode_fp8.cu"


def _kernel_x(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """stage_x of gemm_decode_fp8.cu for one 128-value tile x (f32 of bf16 values): the
    tile's exponent a, hi and mid as E4M3 codes."""
    amax = np.float32(np.abs(x).max())
    e = int((amax.view(np.uint32) >> 23) & 0xFF) - 127
    a = 0 if amax == 0 else max(-126, min(126, 7 - e))
    v = (x * np.float32(2.0 ** a)).astype(np.float32)
    hi = f32_to_fp8_e4m3(v)
    mid = f32_to_fp8_e4m3(((v - fp8_e4m3_to_f32(hi)) * np.float32(16)).astype(np.float32))
    return np.int32(a), hi, mid


def _rebuilt(x: np.ndarray) -> np.ndarray:
    a, hi, mid = _kernel_x(x)
    return (fp8_e4m3_to_f32(hi).astype(np.float64) + fp8_e4m3_to_f32(mid) / 16.0) * 2.0 ** -a


def test_x_split_is_exact_down_to_two_to_the_minus_13_of_the_tile_max() -> None:
    """Every finite bf16 value x, in a tile whose largest |x| is 2^E (any E the format has),
    comes back exactly from hi + mid / 16 wherever |x| >= 2^(E - 13); below, the error stays
    under 2^(E - 16) (what the kernel's header promises)."""
    bits = np.arange(0, 0x7F80, dtype=np.uint32).astype(np.uint16)  # every positive finite
    values = bf16_bits_to_f32(bits)
    for top_exp in (-100, -6, 0, 7, 15, 100):
        top = np.float32(2.0 ** top_exp)
        keep = values <= top
        x = np.concatenate([values[keep], -values[keep]])
        pad = (-len(x)) % 127
        x = np.concatenate([x, np.zeros(pad, np.float32)]).reshape(-1, 127)
        tiles = np.concatenate([np.full((len(x), 1), top, np.float32), x], axis=1)
        back = np.stack([_rebuilt(t) for t in tiles])
        err = np.abs(back - tiles.astype(np.float64))
        big = np.abs(tiles) >= 2.0 ** (top_exp - 13)
        assert not err[big].any(), top_exp
        assert err.max() <= 2.0 ** (top_exp - 16), top_exp


CASES = [case_defs.gemm_decode_fp8_case(np.random.default_rng(97), *shape)
         for shape in case_defs.FP8_WGMMA_SHAPES if shape[1] * shape[2] * shape[3] <= 2 ** 24]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_the_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_cases_cover_widths_splits_outputs_and_layouts() -> None:
    shapes = case_defs.FP8_WGMMA_SHAPES
    assert {matmul_fp8_wgmma.wgmma_cols(m) for _, m, *_ in shapes} == {8, 16}
    assert {s for *_, s in shapes} >= {None, 1, 2, 3, 4, 5, 6, 7, 8}
    assert {o for *_, o, _ in shapes} == {"bf16", "f32", "swiglu"}
    assert {lay for lay, *_ in shapes} == {"block", "channel", "tensor"}
    assert any(n % 64 for _, _, n, *_ in shapes) and any(k % 128 for _, _, _, k, *_ in shapes)


def test_traced_twins_compute_the_same_product_on_the_host() -> None:
    for split in (1, 2, 3, 4):
        case = case_defs.gemm_decode_fp8_case(np.random.default_rng(split), "block", 2, 300,
                                              1024, split=split, traced=True)
        result = check(HostBackend(), case)
        assert result.passed, result.detail
    with pytest.raises(ValueError, match="no traced entry"):
        dev = _Fp8Mock()
        matmul_fp8_wgmma.gemm_fp8_traced(KernelCache(dev), 0, dev.alloc(4096 * 2),
                                         _weight(dev, 4096, 4096), dev.alloc(8192), 1, 5,
                                         dev.alloc(64))


def test_trace_report_reads_the_stamps() -> None:
    """tools/gpu/trace_decode_fp8.py's report of two blocks on one SM: phases relative to
    the first start (median / max, us), the span, blocks per SM, the busiest SM's k-tiles."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "gpu"))
    import trace_decode_fp8

    stamps = np.zeros((2, matmul_fp8_wgmma.TRACE_WORDS), np.uint64)
    phases = matmul_fp8_wgmma.TRACE_PHASES
    for b, (start, staged, end) in enumerate(((1000, 2500, 9000), (1400, 2900, 11000))):
        stamps[b, phases["start"]] = start
        stamps[b, phases["x staged"]] = staged
        stamps[b, phases["end"]] = end
        stamps[b, matmul_fp8_wgmma.TRACE_SM_WORD] = 7
    stamps[:, matmul_fp8_wgmma.TRACE_WAITS["consumer waited for weights"]] = [300, 700]
    head, line, waits = trace_decode_fp8.trace_lines("qkv", stamps, 64, 4096, 2)
    assert "consumer waited for weights 0.50/0.70" in waits
    assert "producer waited for slots 0.00/0.00" in waits
    assert ("2 blocks in 1 clusters for 1 tiles on 1 SMs (max 2, min 2 a SM; busiest SM 32 "
            "k-tiles vs mean 32.0)") in head
    # persistent: 4 blocks (2 clusters) for 3 tiles, one SM each: cluster 0 has two
    stamps = np.zeros((4, matmul_fp8_wgmma.TRACE_WORDS), np.uint64)
    stamps[:, phases["start"]], stamps[:, phases["end"]] = 1000, 5000
    stamps[:, matmul_fp8_wgmma.TRACE_SM_WORD] = [0, 1, 2, 3]
    persistent = trace_decode_fp8.trace_lines("o", stamps, 192, 4096, 2)[0]
    assert "4 blocks in 2 clusters for 3 tiles on 4 SMs" in persistent
    assert "busiest SM 32 k-tiles vs mean 24.0" in persistent
    assert "span 10.00 us" in head
    assert "start 0.20/0.40" in line and "x staged 1.70/1.90" in line
    assert "waited" not in line  # never stamped: left out
    assert trace_decode_fp8.main(["--dry-run"]) == 0


def test_entry_points_match_the_abi() -> None:
    _declares_abi("gemm_decode_fp8")


def _constant(name: str) -> int:
    """A `constexpr int name = <expression>;` of the kernel source, evaluated (the constants
    it names too; gemm_decode_tile.cuh's kGroupRows and partial_pitch as defined there)."""
    match = re.search(rf"constexpr int {name} =\s*([^;]+);", SOURCE.read_text())
    assert match, name
    expr = " ".join(match.group(1).split())
    scope = {"kGroupRows": 64, "kAlign": 1024, "partial_pitch": lambda groups: 64 * groups + 4}
    for other in set(re.findall(r"\bk[A-Z]\w*", expr)) - set(scope):
        scope[other] = _constant(other)
    return int(eval(expr, scope))


def test_builder_mirrors_the_kernel_constants() -> None:
    assert _constant("kMaxStages") == matmul_fp8_wgmma.FP8_MAX_STAGES
    assert _constant("kSlotBytes") == matmul_fp8_wgmma.FP8_SLOT_BYTES
    assert _constant("kSlotScaleBytes") == matmul_fp8_wgmma.FP8_SLOT_SCALE_BYTES
    assert _constant("kXBytes") == matmul_fp8_wgmma.FP8_X_BYTES
    assert _constant("kXScaleBytes") == matmul_fp8_wgmma.FP8_X_SCALE_BYTES
    assert _constant("kKTile") == matmul_fp8_wgmma.K_TILE
    assert _constant("kTraceWords") == matmul_fp8_wgmma.TRACE_WORDS
    assert _constant("kTraceSm") == matmul_fp8_wgmma.TRACE_SM_WORD
    # the phase enum's values, in order, are TRACE_PHASES' words
    enum = re.search(r"enum Fp8Phase : int \{(.*?)\};", SOURCE.read_text(), re.S).group(1)
    names = re.findall(r"^\s*(kFp8\w+)(?: = (\d+))?,", enum, re.M)
    words, word = [], -1
    for _, value in names:
        word = int(value) if value else word + 1
        words.append(word)
    assert words == list(matmul_fp8_wgmma.TRACE_PHASES.values())
    assert _constant("kPartBytes") == matmul_fp8_wgmma.FP8_PART_BYTES
    assert {_constant("kTraceConsumerWaitNs"), _constant("kTraceProducerWaitNs")} == set(
        matmul_fp8_wgmma.TRACE_WAITS.values())
    assert _constant("kSmemBytes") == matmul_fp8_wgmma.FP8_SMEM_MAX


def test_launch_shared_memory_holds_the_ring_past_the_x_tiles() -> None:
    """The kernel derives its ring's depth from the launch's dynamic shared memory
    ((bytes - slack - x - scales - partials) / a slot and its scales): smem_bytes must give
    back exactly the asked depth, and the x tiles follow the rank's k range."""
    fp8 = matmul_fp8_wgmma
    fixed = fp8.FP8_ALIGN + fp8.FP8_X_SCALE_BYTES + fp8.FP8_PART_BYTES
    slot = fp8.FP8_SLOT_BYTES + fp8.FP8_SLOT_SCALE_BYTES
    for m, k, split, x_tiles in ((1, 4096, 2, 16 * 1024), (1, 12288, 3, 32 * 1024),
                                 (8, 4096, 2, 16 * 2048), (8, 12288, 3, 32 * 2048),
                                 (1, 4100, 1, 33 * 1024)):
        assert fp8.x_bytes(m, k, split) == x_tiles
        for stages in (2, 4, 9, 16):
            nbytes = fp8.smem_bytes(m, k, split, stages)
            assert (nbytes - fixed - x_tiles) // slot == stages
    # the sessions 56-57 form: 112 KB at batch 1's largest x (32 KB), two blocks an SM
    assert fp8.smem_bytes(1, 4096, 1, 9) == 114_688 + 512  # the x scales' 1 KB (was 512 B)
    assert fp8.smem_bytes(1, 4096, 2, 4) < 64 * 1024  # two and a 101.8 KB attention block
    with pytest.raises(ValueError, match="outside 2..16"):
        fp8.smem_bytes(1, 4096, 2, 1)


def test_persistent_grid_holds_what_the_device_holds() -> None:
    """A cluster a tile up to the clusters resident at once (the kernel loops over the
    rest); unknown residency: a cluster a tile."""
    assert matmul_fp8_wgmma.grid_blocks(6144, 2, 264) == 192  # 96 tiles: one each
    assert matmul_fp8_wgmma.grid_blocks(24576, 2, 264) == 264  # 384 tiles on 132 clusters
    assert matmul_fp8_wgmma.grid_blocks(24576, 3, 250) == 83 * 3  # whole clusters only
    assert matmul_fp8_wgmma.grid_blocks(4100, 1, None) == 65
    assert matmul_fp8_wgmma.grid_blocks(4096, 8, 4) == 8  # never below one cluster


class _Fp8Mock(MockGpuBackend):
    """A device whose loaded set has the FP8 tensor-core module, counting tensor maps."""

    def __init__(self) -> None:
        super().__init__()
        self.encoded: list[tuple[int, int, int, int]] = []

    @property
    def module_names(self) -> list[str]:
        return ["gemm_decode_fp8", "gemv_fp8", "gemv_mma_quant", "gemv_quant_direct"]

    def tensor_map_2d(self, ptr: int, rows: int, cols: int, box_rows: int,
                      box_cols: int = 64) -> bytes:
        self.encoded.append((ptr, rows, cols, box_rows))
        return super().tensor_map_2d(ptr, rows, cols, box_rows, box_cols)


def _weight(dev: MockGpuBackend, n: int, k: int, smap: Fp8ScaleMap | None = None) -> Fp8Weight:
    smap = smap or Fp8ScaleMap.block(n, k)
    return Fp8Weight(dev.alloc(n * k), dev.alloc(4 * max(1, int(np.prod(smap.shape or (1,))))),
                     n, k, smap)


def split_of(record: object) -> int:
    """The cluster split a launch record's entry name carries (1 without a suffix)."""
    _, _, split = record.func.partition("_split")
    return int(split or 1)


def _routes(on: bool) -> KernelRoutes:
    return KernelRoutes.from_env({"ATLAS_QUANT_FP8_WGMMA": "1"} if on else {})


def test_switch_sends_every_output_of_one_to_eight_rows_to_the_kernel() -> None:
    dev = _Fp8Mock()
    kc = KernelCache(dev, _routes(True))
    qkv, gate_up = _weight(dev, 6144, 4096), _weight(dev, 24576, 4096)
    x, y = dev.alloc(8 * 4096 * 2), dev.alloc(8 * 24576 * 4)
    for m in (1, 4, 5, 8):
        matmul_quant.linear_quant(kc, 0, x, qkv, y, m)
        assert matmul_quant.fuses_swiglu(kc, gate_up, m)
        matmul_quant.linear_swiglu_quant(kc, 0, x, gate_up, y, m)
        QuantLinear(qkv).linear(kc, 0, x, y, m, out_f32=True)
        plain, swiglu, logits = dev.drain_launches()
        assert plain.func.startswith("gemm_decode_fp8_bf16"), plain.func
        assert swiglu.func.startswith("gemm_decode_fp8_swiglu_bf16"), swiglu.func
        assert logits.func.startswith("gemm_decode_fp8_f32"), logits.func
        for record in (plain, swiglu, logits):
            assert record.block == (160, 1, 1)
            assert record.shared == matmul_fp8_wgmma.smem_bytes(m, 4096, split_of(record), 9)
            assert record.args["m"] == m
    # the codes seen as bf16 [n][k / 2], 64-row boxes (SwiGLU: 32, gate and up apart)
    assert (qkv.codes, 6144, 2048, 64) in dev.encoded
    assert (gate_up.codes, 24576, 2048, 32) in dev.encoded


def test_splits_follow_the_wave_rule_within_the_x_tiles() -> None:
    """Qwen3-8B at batch 1 on an H200's 132 SMs (two blocks an SM): qkv's 96 tiles split 2,
    o_proj's 64 split 4, gate_up's 384 split 2 (2.9 waves), down (96 k-tiles: no block holds
    more than 32, so 3 at least) split 4; nine rows are not this kernel's."""
    dev = _Fp8Mock()
    kc = KernelCache(dev, _routes(True))
    x, y = dev.alloc(16 * 12288 * 2), dev.alloc(16 * 24576 * 4)
    for n, k, swiglu, grid in ((6144, 4096, False, 96 * 2), (4096, 4096, False, 64 * 4),
                               (24576, 4096, True, 384 * 2), (4096, 12288, False, 64 * 4)):
        w = _weight(dev, n, k)
        if swiglu:
            matmul_quant.linear_swiglu_quant(kc, 0, x, w, y, 1)
        else:
            matmul_quant.linear_quant(kc, 0, x, w, y, 1)
        (record,) = dev.drain_launches()
        assert record.grid == (grid, 1, 1), (n, k, record.func)
    assert matmul_fp8_wgmma.fitting_splits(12288) == (3, 4, 5, 6, 7, 8)
    assert matmul_fp8_wgmma.fitting_splits(4096) == (1, 2, 3, 4, 5, 6, 7, 8)
    assert not matmul_fp8_wgmma.uses(kc, _weight(dev, 4096, 4096), 9)


def test_switch_off_or_unsupported_weights_keep_the_gemv_routes() -> None:
    dev = _Fp8Mock()
    x, y = dev.alloc(4096 * 2), dev.alloc(4096 * 4)
    for kc, w in ((KernelCache(dev, _routes(False)), _weight(dev, 4096, 4096)),
                  # a scale every 64 columns changes inside a 128-column k-tile
                  (KernelCache(dev, _routes(True)),
                   _weight(dev, 256, 4096, Fp8ScaleMap(7, 64, 6, 1, (2, 64)))),
                  # 32 * 8 k-tiles a block at most: k = 36,864 fits no split
                  (KernelCache(dev, _routes(True)), _weight(dev, 128, 36864))):
        assert not matmul_fp8_wgmma.uses(kc, w, 1)
        matmul_quant.linear_quant(kc, 0, x, w, y, 1)
        (record,) = dev.drain_launches()
        assert record.module != "gemm_decode_fp8", record.func


def test_launch_builder_refuses_what_the_kernel_cannot_do() -> None:
    dev = _Fp8Mock()
    kc = KernelCache(dev, _routes(True))
    x, y = dev.alloc(9 * 4096 * 2), dev.alloc(9 * 4096 * 2)
    w = _weight(dev, 4096, 4096)
    with pytest.raises(ValueError, match="not a product"):
        matmul_fp8_wgmma.gemm_fp8(kc, 0, x, w, y, 9)
    with pytest.raises(ValueError, match="split 2 is not one of"):  # 48 k-tiles a block
        matmul_fp8_wgmma.gemm_fp8(kc, 0, x, _weight(dev, 4096, 12288), y, 8, split=2)
    with pytest.raises(ValueError, match="even n"):
        matmul_fp8_wgmma.gemm_fp8(kc, 0, x, _weight(dev, 4097, 4096), y, 1, "swiglu")
    with pytest.raises(ValueError, match="aligned"):
        matmul_fp8_wgmma.gemm_fp8(kc, 0, x + 2, w, y, 1)
