"""Tensor parallelism on the CPU: two real processes over the host collectives give the
same logits (bf16 tolerance) and the same greedy tokens as one process, the weight plan
splits each tensor on the right axis, and a split the model cannot take is refused."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os

import numpy as np
import pytest

from atlas.comm import CommError, WorldSpec
from atlas.core.config import ModelConfig
from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.factory import loader_for_config
from atlas.model.load import load_runner
from atlas.model.loaders.dense import UnsupportedModelError
from atlas.model.parallel import check_tensor_parallel, shard_plan
from atlas.model.parallel_executor import TensorParallelExecutor
from atlas.runtime.weights import WeightStore
from parallel_support import (FIXTURES, PROMPTS, assert_same_as_one_process, free_port,
                              generate, run_two_ranks)


@pytest.mark.parametrize("model", ["tiny-qwen3", "tiny-llama"])
def test_tp2_matches_tp1(model: str) -> None:
    assert_same_as_one_process(run_two_ranks(model), generate(model, 1, 0, 0))


def test_shard_plan_splits_rows_and_columns() -> None:
    cfg = ModelConfig.from_hf(FIXTURES / "tiny-qwen3")
    plan = loader_for_config(cfg).plan(cfg)
    shapes = {s.name: s.shape for s in plan.slots}
    store = WeightStore(FIXTURES / "tiny-qwen3")
    for rank in range(2):
        sharded = shard_plan(plan, rank, 2)
        local = {s.name: s.shape for s in sharded.plan.slots}
        p = "model.layers.0."
        q_rows, h = shapes[p + "self_attn.q_proj.weight"]
        assert local[p + "self_attn.q_proj.weight"] == (q_rows // 2, h)
        assert local[p + "self_attn.o_proj.weight"] == (h, q_rows // 2)
        assert local[p + "mlp.down_proj.weight"] == (h, cfg.intermediate_size // 2)
        assert local["lm_head.weight"] == (cfg.vocab_size // 2, h)
        assert local["model.embed_tokens.weight"] == shapes["model.embed_tokens.weight"]
        assert local[p + "input_layernorm.weight"] == (h,)
        # the sliced read returns exactly that block of the whole tensor
        for name in (p + "self_attn.o_proj.weight", p + "self_attn.k_proj.weight"):
            rows, cols = sharded.slices[name]
            np.testing.assert_array_equal(store.read_slice(name, rows, cols),
                                          store.read(name)[rows, cols])


def test_shard_plan_splits_the_qkv_biases_with_their_rows() -> None:
    """A Qwen2 rank holds the biases of its own q and KV heads, in [q | k | v] order."""
    cfg = ModelConfig.from_hf(FIXTURES / "tiny-mistral")  # 6 q heads, 2 KV heads of dim 64
    cfg = dataclasses.replace(cfg, model_type="qwen2", qkv_bias=True)
    plan = loader_for_config(cfg).plan(cfg)
    p = "model.layers.1.self_attn."
    for rank in range(2):
        sharded = shard_plan(plan, rank, 2)
        bias = [s for s in sharded.plan.slots if s.buffer == "l1.qkv_bias"]
        assert [(s.name, s.shape) for s in bias] == [
            (p + "q_proj.bias", (192,)), (p + "k_proj.bias", (64,)), (p + "v_proj.bias", (64,))]
        assert sharded.slices[p + "k_proj.bias"][0] == slice(64 * rank, 64 * (rank + 1))


def test_fused_phi3_projections_are_refused_naming_the_tensor() -> None:
    """Phi-3's one qkv_proj tensor holds q, k and v: a plain row split would give a rank the
    wrong heads, so the split is refused rather than guessed."""
    cfg = ModelConfig.from_hf(FIXTURES / "tiny-phi3")
    with pytest.raises(UnsupportedModelError, match=r"split model\.layers\.0\.self_attn\."
                                                    r"qkv_proj\.weight"):
        shard_plan(loader_for_config(cfg).plan(cfg), 0, 2)


def test_indivisible_kv_heads_are_refused() -> None:
    cfg = ModelConfig.from_hf(FIXTURES / "tiny-qwen3")  # 2 KV heads
    check_tensor_parallel(cfg, 2)
    with pytest.raises(UnsupportedModelError, match="num_key_value_heads=2"):
        check_tensor_parallel(cfg, 4)


def test_hybrid_model_is_refused() -> None:
    cfg = ModelConfig.from_hf(FIXTURES / "tiny-qwen3_5")
    with pytest.raises(UnsupportedModelError, match="linear-attention"):
        check_tensor_parallel(cfg, 2)


def _load_then_exit(model: str, port: int) -> None:
    """A worker that joins the group and loads its shard, then dies without serving."""
    load_runner(FIXTURES / model, backend="host", max_seq_len=64, max_batch_size=2,
                world=WorldSpec(1, 2, "127.0.0.1", port, timeout_s=60))
    os._exit(3)


def test_lost_worker_fails_the_executor_with_its_rank() -> None:
    ctx = mp.get_context("fork")
    port = free_port()
    worker = ctx.Process(target=_load_then_exit, args=("tiny-qwen3", port))
    worker.start()
    runner = load_runner(FIXTURES / "tiny-qwen3", backend="host", max_seq_len=64,
                         max_batch_size=2, world=WorldSpec(0, 2, "127.0.0.1", port, 60))
    worker.join(timeout=30)
    assert worker.exitcode == 3
    failures: list[str] = []
    exe = TensorParallelExecutor(runner, on_failure=failures.append)
    prompt = PROMPTS[0]
    with pytest.raises(CommError, match="rank 1"):
        exe.execute([SeqChunk(0, prompt, 0, [0, 1], GREEDY, history=PenaltyHistory(prompt))])
    assert len(failures) == 1 and "rank 1" in failures[0]
    with pytest.raises(CommError, match="group failed"):  # no step runs on a broken group
        exe.execute([SeqChunk(0, prompt, 0, [0, 1], GREEDY, history=PenaltyHistory(prompt))])
    exe.release(0)  # the engine ends the failed batch: local state only, no group call
    assert len(failures) == 1
    exe.close()  # no stop message to a dead group: returns


def test_moe_model_is_pointed_at_expert_parallelism() -> None:
    cfg = ModelConfig.from_hf(FIXTURES / "tiny-qwen3-moe")
    with pytest.raises(UnsupportedModelError, match="--expert-parallel-size 2"):
        check_tensor_parallel(cfg, 2)


def test_whole_projection_qk_norm_is_refused_even_with_experts_split() -> None:
    """MiniMax-M2 normalizes q over all heads: a rank holding some heads cannot; experts
    alone may be split."""
    cfg = ModelConfig.from_hf(FIXTURES / "tiny-minimax-m2")
    with pytest.raises(UnsupportedModelError, match="over all heads"):
        check_tensor_parallel(cfg, 2, experts_sharded=True)
    check_tensor_parallel(cfg, 1, experts_sharded=True)
