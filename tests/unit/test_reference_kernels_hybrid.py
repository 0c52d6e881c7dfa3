"""The hybrid models' kernels on the host: conv1d, the gated delta rule (chunked and
recurrent), the gated RMSNorm, the attention output gate and the fused decode step agree
with their float64 oracles; the two delta-rule forms compute one function however a
sequence is split; the launch builders give the CUDA geometry and reject what the kernels
cannot do; and the CUDA entry points declare exactly the ABI's parameters."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.runtime.cases import conv1d as conv1d_cases  # noqa: F401 (registers)
from atlas.runtime.cases import gated_delta as gated_delta_cases
from atlas.runtime.cases import gated_rmsnorm as gated_rmsnorm_cases  # noqa: F401 (registers)
from atlas.runtime.cases import gdn_decode as gdn_decode_cases  # noqa: F401 (registers)
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check, module_cases
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, linear_attention
from atlas.runtime.reference.gated_delta import chunk_form, normalized_qk, recurrent_form
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

MODULES = ("conv1d", "gated_delta", "gated_rmsnorm", "attn_gate", "gdn_decode")


# the 4,096-token case runs in the GPU suite
CASES = module_cases(MODULES, 2024, keep=lambda case: gated_delta_cases.LONG not in case.name)


@pytest.fixture(scope="module")
def backend() -> HostBackend:
    return HostBackend()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(backend: HostBackend, case) -> None:
    result = check(backend, case)
    assert result.passed, result.detail


def test_every_module_has_cases() -> None:
    assert {c.module for c in CASES} == set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_cuda_entry_points_declare_the_abi(module: str) -> None:
    _declares_abi(module)


def _sequence(rng: np.random.Generator, t: int, h: int = 3, dk: int = 16, dv: int = 8):
    q, k = normalized_qk(rng.standard_normal((t, h, dk)), rng.standard_normal((t, h, dk)))
    v = rng.standard_normal((t, h, dv))
    g = -rng.uniform(0.0, 0.1, (t, h))
    beta = rng.uniform(0.0, 1.0, (t, h))
    return q, k, v, g, beta, rng.standard_normal((h, dk, dv))


@pytest.mark.parametrize("split", [1, 63, 64, 65, 130])
def test_chunked_form_split_anywhere_equals_the_recurrence(split: int) -> None:
    """300 tokens through the chunked form in two calls (the state carried across the split,
    as chunked prefill does) equal the token-by-token recurrence."""
    q, k, v, g, beta, s0 = _sequence(np.random.default_rng(split), 300)
    want_o, want_s = recurrent_form(q, k, v, g, beta, s0)
    o1, s1 = chunk_form(q[:split], k[:split], v[:split], g[:split], beta[:split], s0)
    o2, s2 = chunk_form(q[split:], k[split:], v[split:], g[split:], beta[split:], s1)
    np.testing.assert_allclose(np.concatenate([o1, o2]), want_o, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(s2, want_s, rtol=1e-10, atol=1e-10)


def test_recurrence_matches_the_naive_per_head_oracle() -> None:
    """The vectorized recurrence against the case module's naive loop (float64 both)."""
    rng = np.random.default_rng(7)
    heads = gated_delta_cases.Heads(hk=1, hv=2, dk=8, dv=4)
    t = 40
    q, k = rng.standard_normal((t, 1, 8)), rng.standard_normal((t, 1, 8))
    v = rng.standard_normal((t, 2, 4))
    b, a = rng.standard_normal((t, 2)), rng.standard_normal((t, 2))
    a_log, dt_bias, s0 = np.log([0.1, 0.3]), np.array([1.0, 0.5]), rng.standard_normal((2, 8, 4))
    want_o, want_s = gated_delta_cases.naive_delta_rule(q, k, v, b, a, a_log, dt_bias, s0, heads)
    from atlas.runtime.reference.gated_delta import gate_terms
    g, beta = gate_terms(b, a, a_log, dt_bias)
    qn, kn = normalized_qk(np.repeat(q, 2, axis=1), np.repeat(k, 2, axis=1))
    o, s = recurrent_form(qn, kn, v, g, beta, s0)
    np.testing.assert_allclose(o, want_o, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(s, want_s, rtol=1e-9, atol=1e-12)


def _launch(fn, *args):
    mock = MockGpuBackend()
    fn(KernelCache(mock), 0, *args)
    return mock.launches


def test_delta_rule_geometry_and_shared_memory() -> None:
    chunk = _launch(linear_attention.gated_delta_rule, 0x100, 8320, 0x200, 80, 0x300, 0x400,
                    0x500, 0x600, 0x700, 0x800, 0x900, 3, 16, 32, 128, 128, False)
    step = _launch(linear_attention.gated_delta_rule, 0x100, 8320, 0x200, 80, 0x300, 0x400,
                   0x500, 0x600, 0x700, 0x800, 0x900, 5, 16, 32, 128, 128, True)
    assert (chunk[0].grid, chunk[0].block) == ((4, 32, 3), (128, 1, 1))
    assert chunk[0].shared == linear_attention.delta_chunk_smem_bytes(128) == 133632
    assert (step[0].grid, step[0].block, step[0].shared) == ((4, 32, 5), (128, 1, 1), 0)


def test_conv_geometry_covers_channels_and_token_tiles() -> None:
    got = _launch(linear_attention.conv1d_silu, 0x100, 8320, 0x200, 0x300, 0x400, 0x500, 0x600,
                  0x700, 2, 8192, 4, 130)
    assert (got[0].grid, got[0].block) == ((64, 3, 2), (128, 1, 1))


@pytest.mark.parametrize("args, match", [
    ((0x100, 100, 0x200, 20, 0x300, 0x400, 0x500, 0x600, 0x700, 0x800, 0x900, 1, 2, 4, 16,
      48), "dv=48"),
    ((0x100, 100, 0x200, 20, 0x300, 0x400, 0x500, 0x600, 0x700, 0x800, 0x900, 1, 3, 4, 16,
      32), "multiple of hk=3"),
    ((0x100, 10, 0x200, 20, 0x300, 0x400, 0x500, 0x600, 0x700, 0x800, 0x900, 1, 2, 4, 16,
      32), "narrower"),
    ((0x100, 1000, 0x200, 20, 0x300, 0x400, 0x500, 0x600, 0x700, 0x800, 0x900, 1, 1, 1, 264,
      32), "exceeds"),
])
def test_delta_rule_rejects_unsupported_shapes(args, match) -> None:
    with pytest.raises(ValueError, match=match):
        _launch(linear_attention.gated_delta_rule, *args, False)


def test_conv_rejects_a_kernel_wider_than_the_registers_hold() -> None:
    with pytest.raises(ValueError, match="kernel=9"):
        _launch(linear_attention.conv1d_silu, 0x100, 64, 0x200, 0x300, 0x400, 0x500, 0x600,
                0x700, 1, 64, 9, 4)


def _fused(num_seqs: int, hk: int, hv: int, dk: int, dv: int, kernel: int = 4,
           pitch: int = 12352, state: int = 0x900):
    return _launch(linear_attention.gdn_decode, 0x100, pitch, 0x200, 0x300, 0x400, 0x500,
                   0x600, state, 0x1000, 0x1000, 0x1100, 0x1200, 0x1300, num_seqs, hk, hv, dk,
                   dv, kernel, 1e-6)


def test_fused_decode_geometry_is_a_cluster_of_blocks_per_value_head_and_sequence() -> None:
    """Qwen3.5-35B-A3B: 4 blocks (a cluster) x 32 value heads x 5 sequences, each of
    (128 / 8) x (32 / 4) = 128 threads; shared memory for its 288 channels' outputs, two
    16 x 32 partial-sum tiles, the scratch and the bf16 taps (72 rows of 4 channels x 4 taps,
    8 floats, each row one float longer)."""
    (got,) = _fused(5, 16, 32, 128, 128)
    assert (got.grid, got.block) == ((4, 32, 5), (128, 1, 1))
    assert got.shared == linear_attention.gdn_decode_smem_bytes(128, 128, 4) == (
        4 * (288 + 2 * 16 * 32 + 64) + 4 * 72 * 9)
    (tiny,) = _fused(2, 2, 8, 32, 32, pitch=2 * 32 * 2 + 2 * 8 * 32 + 16)
    assert tiny.block == (32, 1, 1)  # 4 x 2 = 8 state owners, padded to a warp
    # dk = 256, dv = 64: 32 x 4 = 128 state owners but 132 conv chunks of 4 channels
    assert linear_attention.gdn_decode_threads(256, 64) == 160


# 512 threads; dk % 8; dv % 16 (whole float4 groups in each of the 4 blocks); 33 groups
@pytest.mark.parametrize("dk, dv", [(256, 256), (36, 32), (32, 40), (8, 528)])
def test_fused_decode_rejects_head_dims_it_cannot_hold(dk, dv) -> None:
    assert not linear_attention.gdn_decode_fits(dk, dv, 4, 100_000)
    with pytest.raises(ValueError, match="do not fit"):
        _fused(1, 2, 4, dk, dv, pitch=100_000)


def test_fused_decode_rejects_bad_heads_a_narrow_row_and_a_misaligned_state() -> None:
    with pytest.raises(ValueError, match="multiple of hk=3"):
        _fused(1, 3, 4, 32, 32)
    with pytest.raises(ValueError, match="narrower"):
        _fused(1, 16, 32, 128, 128, pitch=12348)
    # rows must stay 8-byte aligned: the kernel moves 4 bf16 of a row at once
    assert not linear_attention.gdn_decode_fits(128, 128, 4, 12354)
    with pytest.raises(ValueError, match="do not fit"):
        _fused(1, 16, 32, 128, 128, pitch=12354)
    with pytest.raises(ValueError, match="16-byte aligned"):
        _fused(1, 16, 32, 128, 128, state=0x908)
