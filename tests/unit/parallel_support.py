"""Shared by the tensor- and expert-parallel tests: one greedy run of two sequences (a
prefill of both in one step, then decode steps), in one process or as every rank of a
two-process group over the host collectives."""

from __future__ import annotations

import multiprocessing as mp
import socket
from pathlib import Path

import numpy as np

from atlas.comm import WorldSpec
from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROMPTS = ([3, 17, 42, 99, 5], [200, 1, 77])
DECODE_STEPS = 4

Run = tuple[np.ndarray, list, int]  # prefill logits, tokens of every step, weight bytes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def generate(model: str, world: int, rank: int, port: int, expert_parallel: bool = False,
             prompts: tuple[list[int], ...] = PROMPTS, synthetic_seed: int | None = None,
             tensor_parallel: bool | None = None) -> Run:
    """Prefill the prompts in one step, then decode them greedily; the prefill logits,
    every token drawn, and the weight bytes this rank loaded."""
    runner = load_runner(FIXTURES / model, backend="host", max_seq_len=64, max_batch_size=2,
                         world=WorldSpec(rank, world, "127.0.0.1", port, timeout_s=60),
                         expert_parallel=expert_parallel, synthetic_seed=synthetic_seed,
                         tensor_parallel=tensor_parallel)
    blocks = {0: [0, 1], 1: [2, 3]}
    steps = [SeqChunk(i, p, 0, blocks[i], GREEDY, history=PenaltyHistory(p))
             for i, p in enumerate(prompts)]
    toks = [runner.execute(steps)]
    logits = runner.read_logits(2).copy()
    for n in range(DECODE_STEPS):
        steps = [SeqChunk(i, [toks[-1][i]], len(p) + n, blocks[i], GREEDY, rng_position=n + 1)
                 for i, p in enumerate(prompts)]
        toks.append(runner.execute(steps))
    return logits, toks, runner.info.weights_bytes


def _rank_main(out: "mp.Queue", rank: int, *args: object) -> None:
    out.put((rank, generate(args[0], 2, rank, *args[1:])))  # type: ignore[arg-type]


def run_two_ranks(model: str, expert_parallel: bool = False,
                  prompts: tuple[list[int], ...] = PROMPTS,
                  synthetic_seed: int | None = None,
                  tensor_parallel: bool | None = None) -> dict[int, Run]:
    """Both ranks of a two-process group (forked), each rank's run."""
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank_main, args=(out, r, model, port, expert_parallel, prompts,
                                                  synthetic_seed, tensor_parallel))
             for r in range(2)]
    for p in procs:
        p.start()
    got = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    return got


def assert_same_as_one_process(got: dict[int, Run], ref: Run) -> None:
    """Every rank drew the single process's tokens from logits equal to its up to bf16
    rounding (the partial sums round to bf16 before the all-reduce), and both ranks hold
    the very same full logits (so they sample identically)."""
    ref_logits, ref_toks, _ = ref
    for rank, (logits, toks, _) in got.items():
        assert toks == ref_toks, f"rank {rank} drew different tokens"
        np.testing.assert_allclose(logits, ref_logits, atol=0.08, rtol=0.02)
        assert np.argmax(logits, -1).tolist() == np.argmax(ref_logits, -1).tolist()
    np.testing.assert_array_equal(got[0][0], got[1][0])
