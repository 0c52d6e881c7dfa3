"""The elementwise, normalization, rotary and sampler reference kernels agree with their
float64 oracles on the host; the rules a model relies on hold exactly; the launch builders
compute the geometry the CUDA kernels expect and reject what they cannot do; and every CUDA
entry point in these modules declares exactly the ABI's parameters."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from atlas.runtime import kernel_abi
from atlas.runtime.cases import argmax as argmax_cases  # noqa: F401 (registers)
from atlas.runtime.cases import decode_persistent as persistent_cases  # noqa: F401 (registers)
from atlas.runtime.cases import embedding as embedding_cases  # noqa: F401 (registers)
from atlas.runtime.cases import rmsnorm as rmsnorm_cases  # noqa: F401 (registers)
from atlas.runtime.cases import rope_kv as rope_kv_cases  # noqa: F401 (registers)
from atlas.runtime.cases import sampler as sampler_cases  # noqa: F401 (registers)
from atlas.runtime.cases import silu_mul as silu_mul_cases  # noqa: F401 (registers)
from atlas.runtime.gpu import ArgKind, KernelSig
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check, module_cases
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, activation, argmax, embedding, norm, rope, sampling

MODULES = ("rmsnorm", "silu_mul", "embedding", "argmax", "rope_kv", "sampler",
           "decode_persistent")
KERNEL_DIR = Path(__file__).resolve().parents[2] / "kernels" / "hopper" / "common"


CASES = module_cases(MODULES, 4321)


@pytest.fixture(scope="module")
def backend() -> HostBackend:
    return HostBackend()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(backend: HostBackend, case) -> None:
    result = check(backend, case)
    assert result.passed, result.detail


def test_every_module_has_cases() -> None:
    assert {c.module for c in CASES} == set(MODULES)


# ---- exact rules --------------------------------------------------------------------------

def _bf16(values) -> np.ndarray:
    return f32_to_bf16_bits(np.asarray(values, dtype=np.float32))


def test_argmax_lowest_index_wins_and_nan_is_ignored(backend: HostBackend) -> None:
    logits = np.array([[1, 3, 3, 2], [np.nan, -1, 5, 5], [np.nan] * 4,
                       [-np.inf, -np.inf, np.nan, -np.inf]], dtype=np.float32)
    src, out = backend.upload(logits), backend.alloc(16)
    partials, counters = (backend.alloc(n) for n in argmax.argmax_scratch_bytes(4, 4))
    argmax.argmax(KernelCache(backend), 0, src, out, partials, counters, 4, 4)
    assert backend.download(out, np.int32, 4).tolist() == [1, 2, 0, 0]


def test_embedding_out_of_range_ids_give_zero_rows(backend: HostBackend) -> None:
    table = _bf16(np.arange(1, 25).reshape(3, 8))
    ids = np.array([2, -1, 3, 0], dtype=np.int32)
    out = backend.alloc(4 * 8 * 2)
    embedding.embedding(KernelCache(backend), 0, backend.upload(ids), backend.upload(table), out,
                        4, 8, 3)
    got = bf16_bits_to_f32(backend.download(out, np.uint16, (4, 8)))
    np.testing.assert_array_equal(got, [np.arange(17, 25), np.zeros(8), np.zeros(8),
                                        np.arange(1, 9)])


def test_add_rmsnorm_writes_the_rounded_sum_back(backend: HostBackend) -> None:
    rng = np.random.default_rng(0)
    r, d = _bf16(rng.uniform(-2, 2, (2, 16))), _bf16(rng.uniform(-2, 2, (2, 16)))
    w = _bf16(np.ones(16))
    resid, out_fused, out_plain = backend.upload(r), backend.alloc(64), backend.alloc(64)
    kc = KernelCache(backend)
    norm.add_rmsnorm(kc, 0, resid, backend.upload(d), backend.upload(w), out_fused, 2, 16, 1e-6)
    summed = backend.download(resid, np.uint16, (2, 16))
    np.testing.assert_array_equal(summed, _bf16(bf16_bits_to_f32(r) + bf16_bits_to_f32(d)))
    norm.rmsnorm(kc, 0, backend.upload(summed), backend.upload(w), out_plain, 2, 16, 1e-6)
    np.testing.assert_array_equal(backend.download(out_fused, np.uint16, 32),
                                  backend.download(out_plain, np.uint16, 32))


def _rope_launch(backend: HostBackend, qkv: np.ndarray, positions, slots, hq: int, hkv: int,
                 d: int, block_size: int, cache: np.ndarray, cos_sin: np.ndarray):
    t = len(positions)
    p = {"qkv": backend.upload(qkv), "q": backend.alloc(t * hq * d * 2),
         "k": backend.upload(cache), "v": backend.upload(cache)}
    rope.qk_norm_rope_kv(KernelCache(backend), 0, p["qkv"], p["q"], p["k"], p["v"], 0, 0,
                         backend.upload(cos_sin), backend.upload(np.array(positions, np.int32)),
                         backend.upload(np.array(slots, np.int32)), t, hq, hkv, d, block_size,
                         1e-6)
    return (backend.download(p["q"], np.uint16, (t, hq, d)),
            backend.download(p["k"], np.uint16, cache.shape),
            backend.download(p["v"], np.uint16, cache.shape))


def test_rope_at_position_zero_is_identity_and_slots_address_the_pages(
        backend: HostBackend) -> None:
    hq, hkv, d, bs = 2, 1, 8, 4
    rng = np.random.default_rng(1)
    qkv = _bf16(rng.uniform(-3, 3, (2, (hq + 2 * hkv) * d)))
    cos_sin = np.concatenate([np.ones((1, d // 2)), np.zeros((1, d // 2))], 1).astype(np.float32)
    cache = np.zeros((3, hkv, bs, d), dtype=np.uint16)
    q, k, v = _rope_launch(backend, qkv, [0, 0], [9, 2], hq, hkv, d, bs, cache, cos_sin)
    heads = qkv.reshape(2, hq + 2 * hkv, d)
    np.testing.assert_array_equal(q, heads[:, :hq])
    np.testing.assert_array_equal(k[2, :, 1], heads[0, hq:hq + hkv])  # slot 9 = block 2, +1
    np.testing.assert_array_equal(v[0, :, 2], heads[1, hq + hkv:])    # slot 2 = block 0, +2
    assert np.count_nonzero(k) == np.count_nonzero(heads[:, hq:hq + hkv])


def test_rope_negative_slot_writes_no_cache_but_still_writes_q(backend: HostBackend) -> None:
    hq, hkv, d, bs = 1, 1, 4, 2
    qkv = _bf16(np.arange(1, 13, dtype=np.float32).reshape(1, 12))
    angle = 0.5
    cos_sin = np.array([[0, 0, 0, 0], [np.cos(angle)] * 2 + [np.sin(angle)] * 2], np.float32)
    cache = _bf16(np.full((1, hkv, bs, d), 7.0))
    q, k, v = _rope_launch(backend, qkv, [1], [-1], hq, hkv, d, bs, cache, cos_sin)
    np.testing.assert_array_equal(k, cache)
    np.testing.assert_array_equal(v, cache)
    c, s = np.cos(angle), np.sin(angle)
    want = [1 * c - 3 * s, 2 * c - 4 * s, 3 * c + 1 * s, 4 * c + 2 * s]
    np.testing.assert_allclose(bf16_bits_to_f32(q).reshape(-1), want, rtol=1e-2, atol=2e-2)


# ---- launch geometry and preconditions ------------------------------------------------------

def _one_launch(fn, *args):
    mock = MockGpuBackend()
    fn(KernelCache(mock), 0, *args)
    (rec,) = mock.drain_launches()
    return rec


def test_launch_geometry() -> None:
    p = 1 << 20
    rec = _one_launch(norm.rmsnorm, p, p, p, 7, 4096, 1e-6)
    assert (rec.grid, rec.block) == ((7, 1, 1), (512, 1, 1))
    rec = _one_launch(norm.add_rmsnorm, p, p, p, p, 3, 16384, 1e-6)
    assert rec.block == (1024, 1, 1)  # two 16-byte vectors per thread
    # a decode batch keeps one vector per thread; a prefill takes four (smaller blocks)
    assert _one_launch(norm.rmsnorm, p, p, p, 256, 4096, 1e-6).block == (512, 1, 1)
    rec = _one_launch(norm.add_rmsnorm, p, p, p, p, 2048, 4096, 1e-6)
    assert (rec.grid, rec.block) == ((2048, 1, 1), (128, 1, 1))
    assert _one_launch(norm.rmsnorm, p, p, p, 257, 576, 1e-6).block == (32, 1, 1)
    # embedding: a decode batch splits 4096-wide rows over four warps; a prefill row is a block
    rec = _one_launch(embedding.embedding, p, p, p, 32, 4096, 151936)
    assert (rec.grid, rec.block) == ((32, 4, 1), (32, 1, 1))
    rec = _one_launch(embedding.embedding, p, p, p, 2048, 4096, 151936)
    assert (rec.grid, rec.block) == ((2048, 1, 1), (128, 1, 1))
    rec = _one_launch(embedding.embedding, p, p, p, 65, 8200, 151936)
    assert (rec.grid, rec.block) == ((65, 3, 1), (96, 1, 1))
    rec = _one_launch(activation.silu_mul, p, p, 3, 12288)
    assert (rec.grid, rec.block) == ((3, 6, 1), (256, 1, 1))
    rec = _one_launch(rope.qk_norm_rope_kv, p, p, p, p, 0, 0, p, p, p, 5, 32, 8, 128, 16, 1e-6)
    # one warp per head, 4 heads per block: 48 heads -> 12 blocks per token
    assert (rec.grid, rec.block) == ((5, 12, 1), (128, 1, 1))
    rec = _one_launch(sampling.apply_penalties, p, p, p, p, p, p, 4, 151936, 300)
    assert rec.grid == (149, 4, 1)  # one block per 1024-token span
    rec = _one_launch(sampling.apply_penalties, p, p, p, p, p, p, 64, 151936, 300)
    assert rec.grid == (16, 64, 1)  # ~1k blocks: each strides over ~9 spans
    rec = _one_launch(sampling.apply_penalties, p, p, p, p, p, p, 2048, 300, 300)
    assert rec.grid == (1, 2048, 1)
    rec = _one_launch(sampling.sample, p, p, p, p, p, 4, 151936)
    assert (rec.grid, rec.block) == ((38, 4, 1), (512, 1, 1))  # 4096 logits per block
    rec = _one_launch(argmax.argmax, p, p, p, p, 3, 151936)
    assert (rec.grid, rec.block) == ((38, 3, 1), (256, 1, 1))


@pytest.mark.parametrize("call, message", [
    (lambda kc: norm.rmsnorm(kc, 0, 256, 256, 256, 1, 100, 1e-6), "multiple of 8"),
    (lambda kc: norm.rmsnorm(kc, 0, 256, 256, 256, 1, 1 << 17, 1e-6), "exceeds"),
    (lambda kc: norm.rmsnorm(kc, 0, 258, 256, 256, 1, 64, 1e-6), "aligned"),
    (lambda kc: activation.silu_mul(kc, 0, 256, 256, 2, 12), "multiple of 8"),
    (lambda kc: embedding.embedding(kc, 0, 256, 256, 256, 2, 4, 10), "multiple of 8"),
    (lambda kc: rope.qk_norm_rope_kv(kc, 0, 256, 256, 256, 256, 0, 0, 256, 256, 256, 1, 2, 1,
                                     65, 16, 1e-6), "even"),
    (lambda kc: rope.qk_norm_rope_kv(kc, 0, 256, 256, 256, 256, 256, 0, 256, 256, 256, 1, 2,
                                     1, 64, 16, 1e-6), "both"),
    (lambda kc: rope.qk_norm_rope_kv(kc, 0, 256, 256, 256, 256, 0, 0, 256, 256, 256, 1, 2, 1,
                                     512, 16, 1e-6), "even"),
])
def test_launch_builders_reject_what_the_kernels_cannot_do(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call(KernelCache(MockGpuBackend()))


# ---- the .cu files declare exactly the ABI ---------------------------------------------------

_ENTRY = re.compile(r'extern "C" __global__ void\s+(?:__cluster_dims__\([^)]*\)\s*)?'
                    r'(?:(?:__launch_bounds__|__maxnreg__)\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)')
_KIND_OF = {"uint32_t": ArgKind.U32, "int32_t": ArgKind.I32, "float": ArgKind.F32,
            "uint64_t": ArgKind.U64, "TensorMap": ArgKind.TMAP}


def _declared(param: str) -> tuple[str, ArgKind]:
    name = re.findall(r"\w+", param)[-1]
    if "*" in param:
        return name, ArgKind.PTR
    return name, _KIND_OF[re.findall(r"\w+", param)[-2]]


@pytest.mark.parametrize("module", MODULES)
def test_cuda_entry_points_match_the_abi(module: str) -> None:
    sigs = {s.func: s for s in vars(kernel_abi).values()
            if isinstance(s, KernelSig) and s.module == module}
    source = (KERNEL_DIR / f"{module}.cu").read_text()
    entries = {name: [_declared(p) for p in params.split(",")]
               for name, params in _ENTRY.findall(source)}
    assert set(entries) == set(sigs)
    for func, sig in sigs.items():
        assert entries[func] == [(p.name, p.kind) for p in sig.params], func
