"""Startup: model directory -> a ready ModelRunner, in the order the design gives.

config.json -> loader (the model_type match) -> kernel target -> backend with that PTX set
-> weight validation (before any upload) -> weights -> scratch arena -> KV pool -> sampler
-> preflight -> graphs. Every failure here is one clear line naming what is wrong.
"""

from __future__ import annotations


import contextlib
import logging
import sys
import time
from collections.abc import Container
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, ContextManager

import numpy as np
import structlog

from ..comm import WorldSpec, connect_world
from ..core.config import ModelConfig
from ..core.dtype import DType
from ..core.quant_config import CheckpointQuant
from ..core.target import KernelTarget
from ..kernels.registry import KernelsNotFound, load_registry
from ..runtime.backend_select import kernel_hardware, make_backend, resolve_kind
from ..runtime.buffers import BufferArena
from ..runtime.gpu import DevicePtr, GpuBackend
from ..runtime.kv_cache import KvCacheConfig, PagedKvCache, parse_kv_dtype
from ..runtime.ops import KernelCache
from ..runtime.ops.attention_long import gated_pays, late_trigger_pays, slides
from ..runtime.ops.norm import norm_late_pays
from ..runtime.ops.decode_persistent import PersistentTables, build_tables
from ..runtime.ops.kv_quant import DEFAULT_CALIBRATION_TOKENS, E4M3_MAX, kv_format
from ..runtime.ops.matmul_quant import Bf16Linear, LinearWeight
from ..runtime.ops.routes import KernelRoutes
from ..runtime.sampler import Sampler
from ..runtime.synthetic_weights import SyntheticWeights
from ..runtime.weights import WeightError, WeightStore
from .capacity import auto_max_batch_size
from .expert_parallel import (ExpertShard, check_expert_parallel, expert_shard_plan,
                              upload_experts)
from .factory import loader_for_config
from .gated_deltanet import GatedDeltaNetWeights, conv_state_bytes, delta_state_bytes
from .loaders.dense import HostTransform
from .loaders.hybrid import Qwen35Loader, RowMove
from .loaders.linear_plan import build_linear, read_host_scales
from .batch import MAX_TOP_LOGPROBS
from .kv_scales import checkpoint_kv_scales
from .model import (DenseDecoderModel, DenseMlp, Dims, KvStage, LayerWeights, MlpBlock,
                    persistent_pointers)
from .moe import MoeBuffers, build_mlp
from .moe_quant import build_quant_mlp, expert_scratch_bytes
from .windows import WindowError, binding_windows, check_windows
from .mtp import (MtpHead, MtpProposer, bind_mtp_buffers, fc_half_moves, mtp_layer_index,
                  plan_mtp, reserve_mtp_buffers)
from .parallel import (TensorParallel, check_tensor_parallel, shard_config, shard_plan,
                       upload_shards)
from .preflight import preflight
from .rope import cos_sin_table, identity_cos_sin, longrope_uses_long_factors
from .runner import ModelRunner, RunnerInfo, RunnerLimits, plan_step_buffers, step_layout

QUANT = "bf16"
#: prefix-cache state snapshots of a hybrid model (the book's --ssm-cache-slots default)
DEFAULT_SSM_CACHE_SLOTS = 16

ProgressFn = Callable[..., None]
#: wraps a long startup step without a progress count ("preflight", graph capture) so the
#: caller can show that it runs; the CLI draws it, tests and tools pass nothing
StepFn = Callable[[str], ContextManager[None]]
_log = logging.getLogger(__name__)


class StartupError(RuntimeError):
    """The model cannot be served as configured (the message says why)."""


def _check_long_routes(cfg: ModelConfig, dims: Dims, kv_dtype: DType,
                       kc: KernelCache) -> None:
    """Refuse what padded heads (dims.padded: Phi-3-mini's 96 computed at 128) and attention
    sinks (gpt-oss) cannot run on: the bf16-pool kernels only (the only ones that write
    compact rows / take sinks: prefill, the long decode kernel, the combine), decoding on the
    long kernel only (the routes a sliding window needs, for the same reason: no other decode
    kernel takes the argument)."""
    needs: list[tuple[str, str, str]] = []  # (what, its verbs)
    if dims.padded:
        needs.append((f"head_dim {dims.head_dim} (attention computed at {dims.attn_dim}, "
                      "padded)", "runs", "needs"))
    if cfg.attention_sinks:
        needs.append((f"{cfg.model_type}'s attention sinks", "run", "need"))
    for what, runs, need in needs:
        if kv_dtype is not DType.BF16:
            raise StartupError(f"{what} {runs} on bf16 KV pools only: use --kv-cache-dtype "
                               "bf16")
        if not slides(kc, dims.attn_dim):
            raise StartupError(f"{what} {need} the long decode attention kernel "
                               "(attention_long: Hopper targets, ATLAS_DECODE_ATTN_LONG on)")


def _log_longrope_choice(cfg: ModelConfig, max_seq_len: int) -> None:
    """LongRoPE's factor set is fixed per engine by its context (rope.py says why): log
    which one the table takes and how to get the other, since transformers switches per
    sequence and a user comparing the two should know. A structlog line on stderr, where
    `atlas serve` and `atlas generate` print their logs."""
    scaling = cfg.rope_scaling
    if not scaling or scaling.get("rope_type") != "longrope":
        return
    original = scaling["original_max_position_embeddings"]
    log = structlog.wrap_logger(structlog.PrintLogger(sys.stderr), logger_name="atlas.load")
    if longrope_uses_long_factors(scaling, max_seq_len):
        log.info("longrope: long_factor at every position", max_seq_len=max_seq_len,
                 original_max_position_embeddings=original,
                 reason=f"max_seq_len {max_seq_len} > {original}; --max-seq-len {original} "
                        "or less takes the short-context factors (short_factor)")
    else:
        log.info("longrope: short_factor at every position", max_seq_len=max_seq_len,
                 original_max_position_embeddings=original,
                 reason=f"max_seq_len {max_seq_len} <= {original}")


@dataclass(frozen=True, slots=True)
class _LoadedTarget:
    target: KernelTarget | None
    closure_hash: str | None
    behavior: dict
    stamps: tuple[dict, ...] = ()


#: where multimodal checkpoints keep the vision tower (Qwen3.5's, Gemma 3's as published and
#: as transformers 5 writes them): not loaded (text-only serving), said so in the log
VISION_PREFIXES = ("model.visual.", "visual.", "vision_tower.", "model.vision_tower.",
                   "multi_modal_projector.", "model.multi_modal_projector.")


def trailing_mtp_prefixes(cfg: ModelConfig) -> tuple[str, ...]:
    """Where a checkpoint keeps the MTP layers stored after the decoder's (GLM-4.5:
    model.layers.{num_hidden_layers + i}.*, `ModelConfig.trailing_mtp_layers`): not loaded,
    said so in the log (transformers' Glm4Moe model ignores them too)."""
    first = cfg.num_hidden_layers
    return tuple(f"model.layers.{first + i}." for i in range(cfg.trailing_mtp_layers))


def _select_kernels(backend_kind: str, cfg: ModelConfig,
                    backend: GpuBackend) -> _LoadedTarget:
    """Pick the PTX set for this device and checkpoint and load it into a CUDA backend.

    The hardware is the device's (compute capability -> the set compiled for it); the host
    and mock backends run reference kernels and use the default hardware's MODEL.toml
    behavior when a build exists, and need none otherwise.
    """
    try:
        registry = load_registry()
    except KernelsNotFound:
        if backend_kind == "cuda":
            raise
        return _LoadedTarget(None, None, {})
    hw = kernel_hardware(backend_kind, backend, registry.hardware_archs())
    ptx_set, served = registry.select_model(hw, cfg.model_type, cfg.hidden_size, QUANT)
    if backend_kind == "cuda":
        if ptx_set.skipped:
            raise StartupError(f"PTX set {ptx_set.target} was built with ATLAS_SKIP_BUILD=1 "
                               "(no PTX); rebuild with nvcc: atlas kernels build")
        for name, module in ptx_set.modules.items():
            backend.load_module(name, module.ptx)  # type: ignore[attr-defined]
    stamp = {"target": ptx_set.target.name, "arch": ptx_set.arch,
             "compiler_version": ptx_set.compiler_version, "flags": list(ptx_set.flags),
             "closure_hash": ptx_set.closure_hash}
    return _LoadedTarget(ptx_set.target, ptx_set.closure_hash, dict(served.spec.behavior),
                         (stamp,))


def load_runner(model_dir: Path, *, backend: str = "auto", max_seq_len: int | None = None,
                max_batch_size: int | None = 8, max_prefill_tokens: int = 2048,
                gpu_memory_utilization: float = 0.9, fast_load: bool = True,
                progress: ProgressFn | None = None, use_graphs: bool = True,
                max_num_blocks: int | None = None,
                batch_invariant: bool | None = None,
                step: StepFn | None = None,
                synthetic_seed: int | None = None, num_draft_tokens: int = 0,
                ssm_cache_slots: int = DEFAULT_SSM_CACHE_SLOTS, mtp: bool = False,
                world: WorldSpec | None = None, expert_parallel: bool = False,
                tensor_parallel: bool | None = None, kv_cache_dtype: str = "bf16",
                fp8_kv_calibration_tokens: int = DEFAULT_CALIBRATION_TOKENS,
                kv_high_precision_layers: int = 0) -> ModelRunner:
    """Build a ready runner. `batch_invariant` (default: on for the CPU reference backend,
    off on CUDA) fixes the decode split count across batch sizes; see RunnerLimits.
    `synthetic_seed` (benchmarks only) generates the weights on the device from that seed
    instead of reading them: the model directory needs only its config.json.
    `num_draft_tokens`: the most drafts a speculative verification chunk may carry.
    `ssm_cache_slots`: recurrent-state snapshots a hybrid model keeps for its prefix cache
    (each costs the state of one sequence; 0 turns prefix caching off for it).
    `max_batch_size=None` sizes the runner for `capacity.auto_max_batch_size` sequences.
    `mtp`: load the checkpoint's multi-token-prediction head and draft with it after every
    step (`num_draft_tokens` drafts; see mtp.py).

    With `world` of size > 1 this process is one tensor-parallel rank: it joins the group
    (the rendezvous blocks until every rank arrives), loads only its weight slices, and
    uses CUDA device `world.cuda_device` on the CUDA backend. `expert_parallel`: the group
    splits the routed experts (expert_parallel.py); `tensor_parallel` (default: when the
    experts are not split) it splits heads, MLP width and vocabulary (parallel.py). Both:
    a mixture of experts with attention split and experts sharded over the same ranks;
    expert parallelism alone replicates everything but the experts.

    `kv_cache_dtype` "bf16", "fp8" (E4M3 pools with per-(layer, kv head) K/V scales: the
    checkpoint's `k_scale`/`v_scale` when it has them, else calibrated by the first prefill
    over its first `fp8_kv_calibration_tokens` tokens, see ops.kv_quant) or "nvfp4" (E2M1
    with an E4M3 scale per 16 elements under the same per-head scales);
    `kv_high_precision_layers` N keeps the first and last N attention layers in bf16."""
    t0 = time.perf_counter()
    model_dir = Path(model_dir)
    cfg = ModelConfig.from_hf(model_dir)
    loader = loader_for_config(cfg)
    world = world or WorldSpec()
    if tensor_parallel is None:
        tensor_parallel = not expert_parallel
    ep_size = world.world_size if expert_parallel else 1
    tp_size = world.world_size if tensor_parallel else 1
    check_tensor_parallel(cfg, tp_size, experts_sharded=ep_size > 1)
    check_expert_parallel(cfg, ep_size)
    quant = CheckpointQuant.from_dir(model_dir)  # synthetic weights: made in that format
    if synthetic_seed is not None and quant.mxfp4_experts:  # bf16 experts, as MXFP4 decodes to
        quant = replace(quant, mxfp4_experts=False)
    store = (WeightStore(model_dir) if synthetic_seed is None
             else SyntheticWeights(cfg.hidden_size, synthetic_seed, cfg.is_hybrid, quant,
                                   cfg.moe.num_experts if cfg.moe else 0))
    plan = loader.plan(cfg, store, quant)
    if mtp:
        _check_mtp(cfg, loader, store, num_draft_tokens, world)
        assert isinstance(loader, Qwen35Loader)
        plan_mtp(loader, plan, cfg, store)
    unused = store.validate(plan.expected())  # every tensor checked before any device work
    scales = {buf: data for lp in plan.linears.values()
              for buf, data in read_host_scales(store, lp, quant).items()}
    vision = [n for n in unused if n.startswith(VISION_PREFIXES)]
    if vision:
        _log.warning("%s: ignoring %d vision-tower tensors (text-only serving)", model_dir,
                     len(vision))
    mtp_tensors = [n for n in unused if n.startswith(trailing_mtp_prefixes(cfg))]
    if mtp_tensors:
        _log.info("%s: ignoring %d tensors of the MTP layers after the decoder's (%s*; no "
                  "drafting with them)", model_dir, len(mtp_tensors),
                  trailing_mtp_prefixes(cfg)[0])
    limit = cfg.context_limit
    if max_seq_len is None:
        max_seq_len = min(limit[0] if limit else 4096, 8192)
    if limit and max_seq_len > limit[0]:
        raise StartupError(f"--max-seq-len {max_seq_len} exceeds the model's {limit[1]} "
                           f"{limit[0]}")
    _log_longrope_choice(cfg, max_seq_len)
    kind = resolve_kind(backend)
    dev = make_backend(kind, ordinal=world.cuda_device if kind == "cuda" else 0)
    comm = connect_world(world, dev)
    kernels = _select_kernels(kind, cfg, dev)
    num_sms = dev.device_facts().sm_count
    if batch_invariant is None:
        batch_invariant = kind != "cuda"
    local_cfg = shard_config(cfg, tp_size)  # this rank's heads and MLP width
    dims = Dims.from_config(local_cfg)

    num_experts = cfg.moe.num_experts if cfg.moe and ep_size > 1 else 0
    sharded = shard_plan(plan, world.rank, tp_size, num_experts) if tp_size > 1 else None
    experts = (expert_shard_plan(plan, cfg, world.rank, ep_size)
               if ep_size > 1 and not sharded else None)
    local_plan = sharded.plan if sharded else experts.plan if experts else plan
    offsets, total = local_plan.layout()
    linear_layers = [i for i, lt in enumerate(cfg.layer_types) if lt == "linear_attention"]
    ssm_cache_slots = ssm_cache_slots if linear_layers else 0
    if max_batch_size is None:
        la = cfg.linear_attention
        per_slot = (len(linear_layers) * (conv_state_bytes(la) + delta_state_bytes(la))
                    if la is not None and linear_layers else 0)
        # a sequence with speculation also holds K + 1 out slots (the state after each
        # token of a verification); the prefix cache's snapshots come off the budget first
        max_batch_size = auto_max_batch_size(
            kind, per_slot * (num_draft_tokens + 2 if num_draft_tokens else 1),
            int(dev.total_memory() * gpu_memory_utilization) - total
            - ssm_cache_slots * per_slot)
    limits = RunnerLimits(max_seq_len, max_batch_size, max_prefill_tokens, num_sms=num_sms,
                          batch_invariant=batch_invariant, num_draft_tokens=num_draft_tokens,
                          ssm_cache_slots=ssm_cache_slots)
    weights_base = dev.alloc(total)
    dev.memset(weights_base, 0, total)  # padding rows of a padded weight (WeightPlan.add) read 0
    dst = {s.name: weights_base + offsets[s.buffer] + s.offset for s in local_plan.slots}
    if sharded:
        upload_shards(store, dev, sharded, dst)
    elif experts:
        upload_experts(store, dev, experts, dst, progress=progress, fast=fast_load)
    else:
        store.upload(dev, list(dst), dst, progress=progress, fast=fast_load)
    ptr = {name: weights_base + off for name, off in offsets.items()}
    upload_transforms(store, dev, local_plan.transforms, ptr, model_dir)
    if isinstance(loader, Qwen35Loader):
        moves = loader.row_moves(cfg)
        stored = {n: plan.linears[n].format for n in moves if n in plan.linears}
        quantized = [n for n, fmt in stored.items() if fmt != "bf16"]
        if quantized:  # the moves copy bf16 rows; codes and their scales would move apart
            raise StartupError(f"{model_dir}: {quantized[0]} is stored {stored[quantized[0]]}; "
                               f"{cfg.model_type}'s grouped linear-attention projection is "
                               "re-ordered at load and supported in bf16 only")
        if mtp:   # fc's two column halves, as half rows of the same row bytes
            moves["mtp.fc"] = fc_half_moves(cfg.hidden_size)
        _permute_rows(dev, ptr, plan.buffers, moves, 2 * cfg.hidden_size)
    for buffer, scale in scales.items():
        dev.copy_h2d(ptr[buffer], scale)
    dev.mark_constant(weights_base, total)
    linears = {name: build_linear(lp, ptr) for name, lp in local_plan.linears.items()}
    # the LM head's f32 logits never take the dequantize + GEMM route (ops gemv_logits)
    weight_scratch = max((w.scratch_bytes(limits.max_tokens) for name, w in linears.items()
                          if name != "lm_head"), default=0)
    weight_scratch = max(weight_scratch, expert_scratch_bytes(linears, limits.max_tokens))

    arena = BufferArena()
    layout = step_layout(limits)
    max_splits = limits.decode_splits(1, dims.kv_heads)
    plan_step_buffers(arena, dims, limits, layout, max_splits, weight_scratch)
    MoeBuffers.reserve(arena, cfg, limits.max_tokens)
    rotary_dim = cfg.rotary_dim
    arena.reserve("cos_sin", DType.FP32, (max_seq_len, rotary_dim))
    if cfg.nope_layers:  # their identity table: cos 1, sin 0 at every position
        arena.reserve("cos_sin_nope", DType.FP32, (max_seq_len, rotary_dim))
    if cfg.local_rope_theta:  # Gemma 3's sliding layers rotate by their own base
        arena.reserve("cos_sin_local", DType.FP32, (max_seq_len, rotary_dim))
    vocab_local = dims.vocab // tp_size
    if tp_size > 1:
        arena.reserve("tp_logits", DType.FP32, (limits.max_sample_rows, vocab_local))
    state_slots = limits.num_state_slots
    if linear_layers:  # the recurrent-state pools: counted in arena.nbytes by the KV planner
        la = cfg.linear_attention
        assert la is not None
        arena.reserve("conv_state", DType.U8,
                      (len(linear_layers), state_slots * conv_state_bytes(la)))
        arena.reserve("delta_state", DType.U8,
                      (len(linear_layers), state_slots * delta_state_bytes(la)))
    if mtp:
        reserve_mtp_buffers(arena, limits, dims.hidden, dims.vocab)
    kv_dtype = parse_kv_dtype(kv_cache_dtype)
    if fp8_kv_calibration_tokens < 1:
        raise StartupError(f"--fp8-kv-calibration-tokens must be >= 1, got "
                           f"{fp8_kv_calibration_tokens}")
    if kv_dtype is not DType.BF16:  # the rotary kernel's bf16 K/V rows before quantizing
        arena.reserve("kv_stage", DType.BF16,
                      (2, dims.kv_heads, limits.max_tokens, dims.attn_dim))
        arena.reserve("kv_stage_slots", DType.I32, (limits.max_tokens,))
    arena.allocate(dev)
    # decode attention's split tickets start at zero; every launch leaves them zero
    dev.memset(arena["attn_counters"], 0, arena.slice("attn_counters").nbytes)
    # LongRoPE's factor set follows max_seq_len here (`_log_longrope_choice`)
    dev.copy_h2d(arena["cos_sin"], cos_sin_table(rotary_dim, cfg.rope_theta,
                                                 cfg.rope_scaling, max_seq_len))
    if cfg.nope_layers:
        dev.copy_h2d(arena["cos_sin_nope"], identity_cos_sin(rotary_dim, max_seq_len))
    if cfg.local_rope_theta:
        dev.copy_h2d(arena["cos_sin_local"], cos_sin_table(rotary_dim, cfg.local_rope_theta,
                                                           None, max_seq_len))
    # only full-attention layers have a KV cache (a hybrid model's linear layers keep state)
    attn_layers = [i for i in range(dims.layers) if i not in linear_layers]
    kv_index = {layer: n for n, layer in enumerate(attn_layers)}
    kv_cfg = KvCacheConfig.plan(
        num_layers=len(attn_layers) + mtp, num_kv_heads=dims.kv_heads, head_dim=dims.attn_dim,
        max_batch_size=max_batch_size, max_seq_len=max_seq_len,
        total_memory=dev.total_memory(), weight_bytes=total, arena_bytes=arena.nbytes,
        gpu_memory_utilization=gpu_memory_utilization, free_memory=dev.free_memory(),
        block_size=limits.block_size, max_num_blocks=max_num_blocks,
        table_rows=limits.max_sample_rows, dtype=kv_dtype,
        high_precision_layers=kv_high_precision_layers)
    kv = PagedKvCache(dev, kv_cfg)
    dev.memset(kv.k_ptrs[0], 0, kv_cfg.pool_bytes)  # padding rows read block 0: keep it finite
    kv_stage = None
    if kv_dtype is not DType.BF16:
        dev.copy_h2d(arena["kv_stage_slots"], np.arange(limits.max_tokens, dtype=np.int32))
        kv_stage = KvStage(arena["kv_stage"], arena["kv_stage_slots"], limits.max_tokens,
                           fp8_kv_calibration_tokens)
        # synthetic weights have no checkpoint scales: every layer calibrates
        ckpt = ({} if synthetic_seed is not None
                else checkpoint_kv_scales(store, attn_layers, dims.kv_heads))
        # checkpoint scales are FP8's (amax / 448); an NVFP4 head scale maps amax onto
        # 448 * 6 (its largest group scale times E2M1's largest value)
        to_pool = E4M3_MAX / kv_format(kv_dtype).qmax
        for layer, scales in ckpt.items():
            if kv.scale_ptrs[kv_index[layer]]:
                kv.set_scales(kv_index[layer], scales * np.float32(to_pool))

    routes = KernelRoutes.from_env()
    if routes.max_shared_carveout is None:  # unset: on unless the model is hybrid (routes)
        routes = replace(routes, max_shared_carveout=not linear_layers)
    if routes.decode_attn_long_late_trigger is None:  # unset: gated attention's, by its o_proj
        o_proj = next((linears[f"l{i}.o"] for i in attn_layers if f"l{i}.o" in linears), None)
        routes = replace(routes, decode_attn_long_late_trigger=o_proj is not None
                         and late_trigger_pays(o_proj.nbytes, dims.gated_attn))
    if routes.norm_late is None:  # unset: by the smallest projection after an add + norm
        after_norm = [linears[n].nbytes for i in range(dims.layers)
                      for n in (f"l{i}.qkv", f"l{i}.in_proj", f"l{i}.gate_up") if n in linears]
        routes = replace(routes, norm_late=bool(after_norm)
                         and norm_late_pays(min(after_norm)))
    if routes.decode_attn_long_gated is None:  # unset: by the qkv projection before it
        qkv = next((linears[f"l{i}.qkv"] for i in attn_layers if f"l{i}.qkv" in linears), None)
        routes = replace(routes, decode_attn_long_gated=qkv is not None
                         and gated_pays(not isinstance(qkv, Bf16Linear)))
    kc = KernelCache(dev, routes)
    windows = binding_windows(cfg, max_seq_len)
    try:
        check_windows(windows, max_seq_len, quantized_kv=kv_dtype != DType.BF16,
                      slides=slides(kc, dims.attn_dim))
    except WindowError as e:
        raise StartupError(str(e)) from None
    _check_long_routes(cfg, dims, kv_dtype, kc)
    moe_bufs = MoeBuffers.bind(arena, limits.max_tokens, dev) if cfg.moe else None
    # with attention split too, the all-reduce after every MLP sums the experts' partials
    ep = ExpertShard.of(comm, num_experts, combine=tp_size == 1) if num_experts else None
    linear = {i: _linear_weights(ptr, linears, arena, cfg, i, n, state_slots)
              for n, i in enumerate(linear_layers)}
    if mtp:   # the MTP layer's KV pool follows the main attention layers'
        kv_index[mtp_layer_index(cfg)] = len(attn_layers)

    def _moe_block(i: int) -> MlpBlock:
        """A sparse (or dense bf16) layer's MLP; quantized experts: moe_quant.py's block."""
        if f"l{i}.experts_gate_up" not in linears:
            return build_mlp(local_cfg, i, ptr, moe_bufs, ep)
        if ep is not None or moe_bufs is None:
            raise StartupError("expert parallelism does not split quantized experts yet")
        return build_quant_mlp(local_cfg, i, ptr, linears, moe_bufs)

    def layer_cos_sin(i: int) -> DevicePtr:
        """A layer's own rotary table where it is not the model's: a NoPE layer's identity,
        a Gemma 3 sliding layer's local base; 0 for the model's."""
        if i in cfg.nope_layers:
            return arena["cos_sin_nope"]
        if cfg.local_rope_theta and i < len(cfg.attention_windows) and cfg.attention_windows[i]:
            return arena["cos_sin_local"]
        return 0

    def layer_weights(i: int) -> LayerWeights:
        return LayerWeights(
            qkv=linears.get(f"l{i}.qkv"), o=linears.get(f"l{i}.o"),
            mlp=(DenseMlp(linears[f"l{i}.gate_up"], linears[f"l{i}.down"],
                          gelu=cfg.hidden_act == "gelu_pytorch_tanh")
                 if f"l{i}.gate_up" in linears else _moe_block(i)),
            in_norm=ptr[f"l{i}.in_norm"], post_norm=ptr[f"l{i}.post_norm"],
            q_norm=0 if cfg.qk_norm_whole else ptr.get(f"l{i}.q_norm", 0),
            k_norm=0 if cfg.qk_norm_whole else ptr.get(f"l{i}.k_norm", 0),
            k_cache=kv.k_cache(kv_index[i]) if i in kv_index else 0,
            v_cache=kv.v_cache(kv_index[i]) if i in kv_index else 0, linear=linear.get(i),
            kv_scales=kv.scale_ptrs[kv_index[i]] if i in kv_index else 0,
            kv_dtype=kv.layer_dtypes[kv_index[i]] if i in kv_index else DType.BF16,
            qkv_bias=ptr.get(f"l{i}.qkv_bias", 0),
            o_bias=ptr.get(f"l{i}.o_bias", 0), sinks=ptr.get(f"l{i}.sinks", 0),
            cos_sin=layer_cos_sin(i),
            whole_qk_norm=((ptr[f"l{i}.q_norm"], ptr[f"l{i}.k_norm"])
                           if cfg.qk_norm_whole and f"l{i}.q_norm" in ptr else None),
            attn_out_norm=ptr.get(f"l{i}.attn_out_norm", 0),
            mlp_out_norm=ptr.get(f"l{i}.mlp_out_norm", 0),
            window=windows[i] if i < len(windows) else 0)

    layers = [layer_weights(i) for i in range(dims.layers)]
    # tied embeddings: the rank's LM-head shard is its vocabulary rows of the whole table
    tp_rank = world.rank if tp_size > 1 else 0
    lm_head = linears.get("lm_head") or Bf16Linear(ptr["embed"] + DType.BF16.nbytes(
        tp_rank * vocab_local * dims.hidden), vocab_local, dims.hidden)
    tp = TensorParallel(comm, vocab_local, arena["tp_logits"]) if tp_size > 1 else None
    persistent: PersistentTables | None = None
    if routes.persistent_decode:  # ATLAS_PERSISTENT_DECODE=1, on the models it covers
        rows = persistent_pointers(dims, layers, tp_size > 1)
        if rows is None:
            _log.info("%s: ATLAS_PERSISTENT_DECODE=1 does not cover this model; decode "
                      "keeps the per-op kernels", model_dir)
        else:
            persistent = build_tables(dev, rows, dims.heads, dims.kv_heads)
    model = DenseDecoderModel(dims, kc, ptr["embed"], ptr["final_norm"], lm_head, layers,
                              arena["cos_sin"], limits.block_size, kv.max_blocks_per_seq, tp,
                              kv_stage, persistent)
    sampler = Sampler(dev, kc, limits.max_sample_rows, max_batch_size + 1, dims.vocab,
                      token_masks=True, max_logprobs=MAX_TOP_LOGPROBS)
    info = RunnerInfo(model_dir=model_dir, backend_kind=kind, weights_bytes=total,
                      target=kernels.target, closure_hash=kernels.closure_hash,
                      behavior=kernels.behavior, kernel_stamps=kernels.stamps)
    proposer = (MtpProposer(dev, model, MtpHead(
        ptr["mtp.fc"], ptr["mtp.norm_embed"], ptr["mtp.norm_hidden"],
        layer_weights(mtp_layer_index(cfg)), ptr["mtp.norm"]), bind_mtp_buffers(arena, dev, limits),
        num_draft_tokens, limits.block_size) if mtp else None)
    runner = ModelRunner(dev, cfg, model, kv, arena, sampler, limits, info,
                         comm if world.world_size > 1 else None, mtp=proposer)
    announce = step or (lambda _label: contextlib.nullcontext())
    with announce(f"preflight (one prefill and decode step on {kind})"):
        preflight(runner)
    kv.reset_scales()  # the synthetic prompt must not calibrate the FP8 KV scales
    if use_graphs and dev.supports_graphs and comm.capturable:
        with announce(f"capturing decode graphs ({kind})"):
            runner.capture_graphs()
    info.load_s = time.perf_counter() - t0
    return runner



def upload_transforms(store: WeightStore | SyntheticWeights, dev: GpuBackend,
                      transforms: list[HostTransform], ptr: dict[str, DevicePtr],
                      model_dir: Path) -> None:
    """Fill each host-converted buffer (dense.HostTransform): per expert, its sources' slices
    read, converted and copied to the expert's part; a conversion's error names the tensors.
    Synthetic weights fill the converted layout directly (its values are random anyway)."""
    for t in transforms:
        base = ptr[t.buffer]
        if isinstance(store, SyntheticWeights):
            store.upload_as(dev, t.sources[0][0], (t.count, *t.part_shape), base)
            continue
        for i, e in enumerate(range(t.first, t.first + t.count)):
            rows = [store.read_slice(name, slice(e, e + 1)).reshape(shape[1:])
                    for name, _, shape in t.sources]
            try:
                part = t.convert(*rows)
                if part.shape != t.part_shape:
                    raise ValueError(f"converted to {list(part.shape)}, want "
                                     f"{list(t.part_shape)}")
            except ValueError as exc:
                names = " + ".join(repr(name) for name, _, _ in t.sources)
                raise WeightError(f"{model_dir}: tensor {names}, expert {e}: {exc}") from None
            dev.copy_h2d(base + i * t.part_bytes,
                         np.ascontiguousarray(part, dtype=np.uint16).reshape(-1))
    if transforms:
        dev.synchronize()


def _check_mtp(cfg: ModelConfig, loader: object, names: Container[str],
               num_draft_tokens: int, world: WorldSpec) -> None:
    """MTP drafting needs a checkpoint with an MTP head, drafts, and one GPU."""
    if not isinstance(loader, Qwen35Loader) or not cfg.mtp_layers:
        raise StartupError(f"{cfg.model_type}: the config declares no MTP layers "
                           "(mtp_num_hidden_layers); --speculative mtp needs a Qwen3.5 / "
                           "Qwen3-Next checkpoint with its MTP head")
    if "mtp.fc.weight" not in names:
        raise StartupError("the config declares MTP layers but the checkpoint has no "
                           "mtp.fc.weight (was the MTP head stripped?)")
    if num_draft_tokens < 1:
        raise StartupError("MTP drafting needs num_draft_tokens >= 1")
    if world.world_size > 1:
        raise StartupError("MTP drafting is not supported with tensor parallelism")


def _permute_rows(dev: GpuBackend, ptr: dict[str, int], sizes: dict[str, int],
                  moves: dict[str, list[RowMove]], row_bytes: int) -> None:
    """Apply each buffer's row permutation in place, through one device scratch copy."""
    if not moves:
        return
    scratch = dev.alloc(max(sizes[name] for name in moves))
    try:
        for name, buffer_moves in moves.items():
            dev.copy_d2d(scratch, ptr[name], sizes[name])
            for m in buffer_moves:
                dev.copy_d2d(ptr[name] + m.dst * row_bytes, scratch + m.src * row_bytes,
                             m.rows * row_bytes)
        dev.synchronize()
    finally:
        dev.free(scratch)


def _linear_weights(ptr: dict[str, int], linears: dict[str, LinearWeight], arena: BufferArena,
                    cfg: ModelConfig, layer: int, index: int,
                    slots: int) -> GatedDeltaNetWeights:
    """Layer `layer`'s Gated-DeltaNet weights and its share (the index-th linear layer's) of
    the recurrent-state pools."""
    la = cfg.linear_attention
    assert la is not None
    return GatedDeltaNetWeights(
        in_proj=linears[f"l{layer}.in_proj"], conv=ptr[f"l{layer}.conv"],
        a_log=ptr[f"l{layer}.a_log"], dt_bias=ptr[f"l{layer}.dt_bias"],
        norm=ptr[f"l{layer}.gdn_norm"], out_proj=linears[f"l{layer}.out_proj"],
        conv_state=arena["conv_state"] + index * slots * conv_state_bytes(la),
        delta_state=arena["delta_state"] + index * slots * delta_state_bytes(la))
