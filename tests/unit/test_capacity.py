"""The default batch a runner is sized for (model/capacity.py)."""

from atlas.model.capacity import (AUTO_MAX_BATCH_CUDA, AUTO_MAX_BATCH_HOST,
                                  auto_max_batch_size)

GIB = 1 << 30


def test_attention_models_get_the_full_default_on_cuda() -> None:
    assert auto_max_batch_size("cuda", 0, 60 * GIB) == AUTO_MAX_BATCH_CUDA == 256


def test_host_backend_gets_a_handful() -> None:
    assert auto_max_batch_size("host", 0, 60 * GIB) == AUTO_MAX_BATCH_HOST
    assert auto_max_batch_size("host", 64 << 20, 60 * GIB) == AUTO_MAX_BATCH_HOST


def test_recurrent_state_bounds_the_slots_by_a_quarter_of_the_memory() -> None:
    # Qwen3.5-35B-A3B-like: 64 MiB of state per sequence, 16 GiB left after the weights
    # -> a quarter is 4 GiB = 64 slots, one of them the graph padding rows'
    assert auto_max_batch_size("cuda", 64 << 20, 16 * GIB) == 63
    # plenty of memory: capped at the default
    assert auto_max_batch_size("cuda", 64 << 20, 200 * GIB) == AUTO_MAX_BATCH_CUDA
    # nothing left: still one slot (the KV planner then fails, naming the bytes)
    assert auto_max_batch_size("cuda", 64 << 20, -5) == 1
