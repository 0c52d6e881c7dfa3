"""Benchmark-only synthetic weights: a model from its `config.json` and a seed, generated on
the device at load.

A full-size checkpoint does not always fit the benchmark machine's disk (Qwen3-30B-A3B is
61 GB in bf16; a fresh one-GPU machine has about 60 GB free), and its numbers would not
change a throughput measurement. This source stands in for `WeightStore` in the loader:
`validate` accepts the plan, `upload` fills each tensor with the `fill_normal_bf16` kernel
(nothing is read from disk, nothing crosses PCIe). It is never used unless asked for by
name (`load_runner(..., synthetic_seed=N)`, `atlas serve --synthetic-weights N`, the
benchmark scripts); a model served from it answers gibberish by construction.

The distribution is tools/make_fixtures.py's (which imports `init_std` from here, so the
two cannot drift): linear weights N(0, 1 / fan_in), twice that std for the projections that
write the residual stream, embeddings and LM head N(0, (1.6 / sqrt(hidden))^2), RMSNorm
weights 1 + N(0, 0.1^2), biases N(0, 0.1^2), attention sinks N(0, 1); float32 tensors (a
router's score-correction bias) are zeros, as transformers initializes them. Each tensor's
values are a pure function of (seed, name).
A config.json with a `quantization_config` gets quantized weights instead (FP8 / NVFP4 codes
and scales of the same standard deviations: runtime/synthetic_quant.py).
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Callable, Iterable, Mapping, Sequence

from ..core.dtype import DType
from ..core.quant_config import CheckpointQuant
from .gpu import DevicePtr, GpuBackend
from .ops import KernelCache
from .ops.fill_random import fill_normal
from .synthetic_quant import E4M3_ONE, QuantizedNames, QuantPools, holds, scale_tensor
from .weights import LoadReport, ProgressFn, TensorInfo, WeightError, st_dtype_name

#: std multiplier for the projections that write the residual stream
RESIDUAL_WRITE_GAIN = 2.0
#: names of the projections that write the residual stream (per-expert or stacked)
RESIDUAL_WRITERS = ("o_proj.weight", "down_proj.weight", "experts.down_proj", ".w2.weight")
EMBEDDING_NAMES = ("embed_tokens.weight", "lm_head.weight")
NORM_STD = 0.1
#: the Qwen2 family's q/k/v projection biases, N(0, 0.1^2): without them a tiny model's
#: logits move visibly (cosine ~0.8), and larger ones (0.2+) make its greedy text repeat;
#: gpt-oss's o_proj, router and per-expert biases ([experts, n]) draw the same
BIAS_NAMES = ("q_proj.bias", "k_proj.bias", "v_proj.bias", "o_proj.bias", "router.bias",
              "gate_up_proj_bias", "down_proj_bias")
BIAS_STD = 0.1
#: gpt-oss's per-head attention sinks (a logit beside the scores, whose std is near 1)
SINK_NAMES = ("self_attn.sinks",)
SINK_STD = 1.0
#: a hybrid model's Gated-DeltaNet per-head scalars, (mean, std) of their normal draw: decay
#: A = exp(A_log) around 0.1 (state kept over tens of tokens, like make_fixtures'
#: hybrid_param) and dt_bias 1 + noise
HYBRID_SCALARS = {"A_log": (math.log(0.1), 0.5), "dt_bias": (1.0, NORM_STD)}
#: the one RMSNorm weight of a hybrid model applied as w, not (1 + w)
PLAIN_GATED_NORM = "linear_attn.norm.weight"


def init_std(name: str, shape: Sequence[int], hidden: int) -> float | None:
    """Standard deviation of a random weight, or None for an RMSNorm weight (1 + noise).

    fan_in is the last dimension: [out, in] matrices and stacked experts [E, out, in] alike.
    """
    if name.endswith(BIAS_NAMES):
        return BIAS_STD
    if name.endswith(SINK_NAMES):
        return SINK_STD
    if len(shape) == 1:
        if not name.endswith("norm.weight"):
            raise ValueError(f"unexpected 1-D parameter {name}: neither an RMSNorm weight nor "
                             "a bias")
        return None
    if name.endswith(EMBEDDING_NAMES):
        return 1.6 / math.sqrt(hidden)
    gain = RESIDUAL_WRITE_GAIN if name.endswith(RESIDUAL_WRITERS) else 1.0
    return gain / math.sqrt(shape[-1])


def tensor_key(seed: int, name: str) -> int:
    """The 64-bit RNG stream of one tensor: independent of load order and of other tensors."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little")


class SyntheticWeights:
    """Stands in for `WeightStore`: every planned tensor exists, made on the device."""

    def __init__(self, hidden_size: int, seed: int, zero_centred_norms: bool = False,
                 quant: CheckpointQuant = CheckpointQuant(), experts: int = 0) -> None:
        """`zero_centred_norms`: the model applies its RMSNorm weights as (1 + w) (the hybrid
        families), so they are drawn around 0 instead of 1. `quant`: the config's
        quantization (its linears are made quantized); `experts`: the config's expert count
        (a quantized model holds its experts per expert)."""
        self.hidden_size = hidden_size
        self.seed = seed
        self.zero_centred_norms = zero_centred_norms
        self.quant = quant
        self.experts = experts
        self._expected: dict[str, tuple[DType | str, tuple[int, ...]]] = {}
        self._rms: dict[str, float] = {}  # quantized code pools' rms, by format (upload)

    def __contains__(self, name: object) -> bool:
        """Any tensor can be made, so the loader picks the stacked expert layout (one fill
        per projection instead of one per expert); a quantized model holds the published
        per-expert layout instead."""
        return isinstance(name, str) and (not self.quant.quantized or holds(name, self.experts))

    def stored_dtypes(self) -> Mapping[str, str]:
        """Tensor name -> stored dtype, for the loader's linear plan (bf16 unless quantized)."""
        return QuantizedNames(self.quant) if self.quant.quantized else {}

    def validate(self, expected: Mapping[str, tuple[DType | str, Sequence[int]]]) -> list[str]:
        """Record the plan's tensors; bf16 and float32 can be made, and with a quantization
        its codes and E4M3 scales."""
        kinds = ("BF16", "F32") + (("U8", "F8_E4M3") if self.quant.quantized else ())
        what = ("bf16 and float32" if not self.quant.quantized
                else f"bf16, float32 and {self.quant.format} codes and scales")
        for name, (dtype, shape) in expected.items():
            if st_dtype_name(dtype) not in kinds:
                raise WeightError(f"synthetic weights: tensor {name!r} is {dtype}; only "
                                  f"{what} tensors can be generated")
            self._expected[name] = (dtype, tuple(shape))
        return []

    def _scale(self, name: str) -> tuple[TensorInfo, object]:
        """A host-read per-tensor scale of a quantized weight (FP8 `weight_scale_inv` /
        `weight_scale`, NVFP4 `weight_scale_2`)."""
        base = name.rsplit(".", 1)[0] + ".weight"
        if not self.quant.quantized or base not in self._expected:
            raise WeightError(f"synthetic weights: no host tensor {name!r}")
        _, shape = self._expected[base]
        full = (shape[0], shape[1] * 2) if self.quant.format == "nvfp4" else shape
        std = init_std(base, full, self.hidden_size)
        assert std is not None
        return scale_tensor(self.quant, name, full, std, self._pool_rms())

    def _pool_rms(self) -> float:
        """The rms of the code pool `upload` tiles from (the same seeded pool)."""
        if self.quant.format not in self._rms:
            self._rms[self.quant.format] = QuantPools.rms_of(self.quant, self.seed)
        return self._rms[self.quant.format]

    def info(self, name: str) -> TensorInfo:
        return self._scale(name)[0]

    def read(self, name: str) -> object:
        return self._scale(name)[1]

    def upload(self, backend: GpuBackend, names: Iterable[str] | None = None,
               dst: Mapping[str, DevicePtr] | Callable | None = None,
               progress: ProgressFn | None = None, fast: bool = True) -> LoadReport:
        """Fill each tensor at `dst[name]` (a mapping: the loader places every tensor)."""
        if not isinstance(dst, Mapping):
            raise WeightError("synthetic weights: upload needs each tensor's destination")
        wanted = list(self._expected if names is None else names)
        kc, stream = KernelCache(backend), backend.default_stream()
        t0, done = time.perf_counter(), 0
        total = sum(self._nbytes(n) for n in wanted)
        pools = QuantPools(backend, self.quant, self.seed) if self.quant.quantized else None
        for i, name in enumerate(wanted):
            dtype, shape = self._expected[name]
            count = math.prod(shape)
            kind = st_dtype_name(dtype)
            if kind == "F32":
                backend.memset(dst[name], 0, 4 * count, stream)
            elif kind == "F8_E4M3" and not name.endswith(".weight"):  # NVFP4 group scales
                backend.memset(dst[name], E4M3_ONE, count, stream)
            elif kind in ("U8", "F8_E4M3"):  # codes (disjoint from what the stream fills)
                assert pools is not None
                pools.tile(dst[name], count, tensor_key(self.seed, name))
            else:
                mean, std = self.normal_params(name, shape)
                fill_normal(kc, stream, dst[name], count, tensor_key(self.seed, name), mean, std)
            done += self._nbytes(name)
            if progress is not None:
                progress(i + 1, len(wanted), done, total, time.perf_counter() - t0)
        backend.synchronize(stream)
        if pools is not None:
            pools.free()
        return LoadReport({n: dst[n] for n in wanted}, {"synthetic": "device"}, done,
                          time.perf_counter() - t0)

    def upload_as(self, backend: GpuBackend, name: str, shape: Sequence[int],
                  dst: DevicePtr) -> None:
        """Fill `dst` with bf16 values of tensor `name` drawn as if it had `shape`: a buffer
        the loader converts on the host from a checkpoint (model/loaders/dense.HostTransform,
        e.g. gpt-oss's [in, out] experts), made directly in the layout the kernels read, so
        its fan-in is that layout's last axis."""
        kc, stream = KernelCache(backend), backend.default_stream()
        mean, std = self.normal_params(name, shape)
        fill_normal(kc, stream, dst, math.prod(shape), tensor_key(self.seed, name), mean, std)
        backend.synchronize(stream)

    def upload_slice(self, backend: GpuBackend, name: str, rows: slice, dst: DevicePtr,
                     cols: slice | None = None) -> None:
        """`tensor[rows, cols]` of tensor `name` (its leading axis by the flattened rest, as
        `WeightStore.read_slice` reads it) at `dst`, row-major: a tensor- or expert-parallel
        rank's share. The whole tensor is made in scratch and the block copied, so the rank
        holds exactly the values one process would."""
        _, shape = self._expected[name]
        row_bytes = self._nbytes(name) // shape[0]
        item = row_bytes // max(1, math.prod(shape[1:]))
        r0, r1, _ = rows.indices(shape[0])
        c0, c1, _ = (cols or slice(None)).indices(row_bytes // item)
        scratch = backend.alloc(self._nbytes(name))
        try:
            self.upload(backend, [name], {name: scratch})
            if (c0, c1) == (0, row_bytes // item):  # whole rows: one copy
                backend.copy_d2d(dst, scratch + r0 * row_bytes, (r1 - r0) * row_bytes)
            else:
                width = (c1 - c0) * item
                for i, r in enumerate(range(r0, r1)):
                    backend.copy_d2d(dst + i * width, scratch + r * row_bytes + c0 * item, width)
            backend.synchronize()
        finally:
            backend.free(scratch)

    def normal_params(self, name: str, shape: Sequence[int]) -> tuple[float, float]:
        """(mean, std) of a bf16 tensor's normal draw."""
        for suffix, params in HYBRID_SCALARS.items():
            if name.endswith(suffix):
                return params
        std = init_std(name, shape, self.hidden_size)
        if std is not None:
            return 0.0, std
        centred = self.zero_centred_norms and not name.endswith(PLAIN_GATED_NORM)
        return (0.0 if centred else 1.0), NORM_STD

    def _nbytes(self, name: str) -> int:
        dtype, shape = self._expected[name]
        size = {"F32": 4, "U8": 1, "F8_E4M3": 1}.get(st_dtype_name(dtype), 2)
        return size * math.prod(shape)
