"""The GPU engine benchmarks (speculative decoding, prefix cache) run end to end on the host
backend with the tiny fixture, so the GPU session's one call does not fail on a script bug."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "tiny-qwen3"


def run(script: str, out: Path, *args: str, model: Path = FIXTURE) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "py")}
    subprocess.run([sys.executable, str(ROOT / "tools" / "gpu" / script), "--model",
                    str(model), "--backend", "host", "--out", str(out), *args],
                   check=True, env=env, capture_output=True, timeout=300)
    return json.loads(out.read_text())


def test_bench_spec_reports_step_costs_and_oracle_passes(tmp_path):
    res = run("bench_spec.py", tmp_path / "spec.json", "--batches", "1,2", "--prompt", "16",
              "--new", "12", "--steps", "2", "--max-k", "2", "--k", "2", "--accept", "0.7,1")
    assert set(res["step_cost"]) == {"1", "2"}
    # the plain tok/s of a runner built without speculation, measured first
    assert set(res["fused_plain_tok_s"]) == {"1", "2"}
    assert all(t > 0 for t in res["fused_plain_tok_s"].values())
    assert {"plain_ms", "k1_ratio", "k2_ratio"} <= set(res["step_cost"]["1"])
    for row in res["throughput"].values():
        assert [(p["token_rate"], p["k"]) for p in row["passes"]] == [
            (0.7, 2), (0.7, "policy"), (1.0, 2), (1.0, "policy")]
        assert row["passes"][0]["expected_tokens_per_step"] == pytest.approx(1 + 0.7 + 0.49)
        assert row["plain_tok_s"] > 0
        # rows are invariant on the host: every pass reproduces the plain greedy output
        assert row["reference"] == "plain"
        assert all(p["exact"] and p["same_as_plain"] == p["same_as_reference"] == 1.0
                   for p in row["passes"])
        fixed = row["passes"][2]   # a perfect oracle: every draft accepted
        assert fixed["token_acceptance"] == 1.0 and fixed["draft_acceptance"] == 1.0
        assert 0 < row["passes"][0]["token_acceptance"] < 1


def test_bench_spec_pools_each_pass_over_several_prompt_sets(tmp_path):
    """--prompts N: every tok/s pass decodes N sets of random prompts in turn, and its
    tokens and acceptance counts are the sets' pooled (N times one set's tokens here: each
    sequence decodes `new` tokens whatever its prompt)."""
    args = ("--batches", "1", "--prompt", "16", "--new", "12", "--steps", "2", "--max-k",
            "2", "--k", "2", "--accept", "0.5,1", "--no-fused-baseline")
    one = run("bench_spec.py", tmp_path / "one.json", *args)["throughput"]["1"]
    res = run("bench_spec.py", tmp_path / "three.json", *args, "--prompts", "3")
    three = res["throughput"]["1"]
    assert res["prompts"] == three["prompts"] == 3 and one["prompts"] == 1
    assert [p["tokens"] for p in three["passes"]] == [3 * p["tokens"] for p in one["passes"]]
    for p in three["passes"]:
        assert p["same_as_plain"] == p["same_as_reference"] == 1.0
        assert p["tok_s"] > 0
    # the fixed-K passes verify every step; the policy's follow the host's measured step
    # costs (a K the timing does not repay decodes plainly), so no count is asserted there
    fixed = [p for p in three["passes"] if p["k"] != "policy"]
    assert len(fixed) == 2 and all(p["verify_steps"] > 0 for p in fixed)
    perfect = three["passes"][2]   # every draft of every set accepted
    assert perfect["token_acceptance"] == perfect["draft_acceptance"] == 1.0
    # pooled counts: more verification steps than one set's, a rate strictly inside (0, 1)
    assert three["passes"][0]["verify_steps"] > one["passes"][0]["verify_steps"]
    assert 0 < three["passes"][0]["token_acceptance"] < 1


def test_bench_spec_step_cost_only_skips_the_oracle_passes(tmp_path):
    res = run("bench_spec.py", tmp_path / "spec.json", "--batches", "1", "--prompt", "16",
              "--new", "12", "--steps", "2", "--max-k", "2", "--k", "2", "--step-cost-only",
              "--no-fused-baseline")
    assert {"k1_ratio", "k2_ratio"} <= set(res["step_cost"]["1"])
    assert "throughput" not in res and "fused_plain_tok_s" not in res


def test_bench_spec_runs_on_synthetic_weights_from_a_config_alone(tmp_path):
    """--synthetic-seed: the model directory holds only config.json (the device makes the
    weights), as bench_moe.synthetic_model_dir writes it for full-size configs."""
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "config.json").write_text((FIXTURE / "config.json").read_text())
    res = run("bench_spec.py", tmp_path / "spec.json", "--batches", "1", "--prompt", "16",
              "--new", "12", "--steps", "2", "--max-k", "1", "--k", "1", "--step-cost-only",
              "--no-fused-baseline", "--synthetic-seed", "0", model=cfg)
    assert res["step_cost"]["1"]["k1_ratio"] > 0


def test_profile_decode_compares_a_verification_step_with_a_plain_one(tmp_path):
    res = run("profile_decode.py", tmp_path / "profile.json", "--context", "16", "--verify", "2")
    verify = res["verify"]
    assert verify["k"] == 2 and verify["rows"] == 3
    assert verify["gpu_ms"] > 0 and verify["wall_ms"] > 0
    # the verification step's host phases, each timed on every timed step
    phases = verify["host_phases_us"]
    assert set(phases) == {"schedule", "commit", "launch", "collect", "upload_inputs",
                           "sampler_prepare"}
    assert all(us > 0 for us in phases.values())
    assert phases["launch"] > phases["upload_inputs"]
    assert res["gpu_ms"] > 0 and res["async_wall_ms"] > 0
    # per-kernel rows come from CUPTI: none on the host backend
    assert verify["kernels"] == [] and res["kernels"] == []
    # the graph's keys: the prompt and every token decoded before the profile, not --context
    keys = res["attention_keys"]
    assert keys["kv_lens_min"] > 16 + 50 and keys["kv_lens_max"] == keys["kv_lens_min"]
    tiny = json.loads((FIXTURE / "config.json").read_text())
    per_key = (tiny["num_key_value_heads"] * tiny.get("head_dim", tiny["hidden_size"]
                                                      // tiny["num_attention_heads"]) * 2 * 2)
    assert keys["kv_bytes_per_layer"] == keys["kv_lens_min"] * per_key


def test_bench_spec_drafts_with_the_mtp_head(tmp_path):
    res = run("bench_spec.py", tmp_path / "spec.json", "--batches", "1", "--prompt", "16",
              "--new", "6", "--steps", "1", "--max-k", "2", "--k", "2", "--mtp",
              "--no-fused-baseline",
              model=ROOT / "tests" / "fixtures" / "tiny-qwen3_5-mtp")
    assert "fused_plain_tok_s" not in res
    row = res["mtp"]["1"]
    assert row["same_as_plain"] == 1.0 and row["tok_s"] > 0
    assert 0 <= row["token_acceptance"] <= 1 and row["verify_steps"] > 0
    # a hybrid model verifies in row-invariant graphs too (its Gated-DeltaNet layers token
    # by token): the oracle drafts the plain output, and every pass reproduces it
    row = res["throughput"]["1"]
    assert res["invariant_rows"] > 0 and row["reference"] == "plain"
    assert all(p["exact"] and p["same_as_plain"] == 1.0 for p in row["passes"])


def test_bench_prefix_warm_turns_hit_the_whole_prefix(tmp_path):
    res = run("bench_prefix.py", tmp_path / "prefix.json", "--prefix", "96", "--turn", "8",
              "--reps", "1")
    assert res["warm_hit_tokens"] == 96 and len(res["cold_ttft_ms"]) == 1
    assert res["warm_over_cold"] > 0


def test_bench_grammar_decode_times_constrained_and_plain_steps(tmp_path):
    res = run("bench_grammar_decode.py", tmp_path / "grammar.json", "--vocab", "bytes",
              "--batches", "1,2", "--steps", "3", "--warmup", "2", "--prompt-len", "8",
              "--margin", "120")
    assert [r["batch"] for r in res["rows"]] == [1, 2]
    for row in res["rows"]:
        assert row["plain_tok_s"] > 0 and row["constrained_tok_s"] > 0
        assert row["ratio"] == row["constrained_tok_s"] / row["plain_tok_s"]


def test_bench_mixed_step_times_full_prompt_chunks_beside_decodes(tmp_path):
    res = run("bench_mixed_step.py", tmp_path / "mixed.json", "--batch", "2", "--context", "16",
              "--max-seq-len", "128", "--budgets", "8,12", "--prompt", "40", "--reps", "1")
    assert [r["budget"] for r in res["rows"]] == [8, 12]
    for row in res["rows"]:
        # the prompt takes what the two decode tokens leave: 40 tokens in chunks of 6 / 10
        assert row["prompt_tokens_per_step"] == row["budget"] - 2
        assert row["mixed_steps"] == 40 // row["prompt_tokens_per_step"]
        assert row["decode_ms"] > 0 and row["mixed_ms"] >= 0


def test_profile_comparison_pairs_each_kernel_with_its_single_row_twin(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tools" / "gpu"))
    import profile_decode

    def rows(*pairs):
        return [{"kernel": k, "calls_per_step": c, "us_per_step": us} for k, c, us in pairs]

    got = profile_decode.compare_rows(
        rows(("gemv_bf16_single", 144, 3000.0), ("gemv_bf16_f32_single", 1, 290.0),
             ("decode_attn_rope_cluster_bf16", 36, 470.0)),
        rows(("gemv_ring_bf16", 144, 3100.0), ("gemv_ring_bf16_f32", 1, 300.0),
             ("decode_attn_rope_cluster_bf16", 36, 600.0), ("silu_mul_bf16", 36, 50.0)))
    assert [(r["family"], r["extra_us"]) for r in got] == [
        ("decode_attn_rope_cluster_bf16", 130.0), ("gemv_bf16", 100.0),
        ("silu_mul_bf16", 50.0), ("gemv_bf16_f32", 10.0)]
    assert got[1]["plain_calls"] == got[1]["verify_calls"] == 144


@pytest.mark.parametrize("batch, context", [(64, 1536), (64, 512), (24, 24), (1, 512)])
def test_profiled_sequences_outlast_the_prefill_of_the_batch(monkeypatch, batch, context):
    """profile_decode's max_tokens (`step_tokens`) covers what the first sequences decode
    while the later prompts prefill: with the real scheduler every sequence is decoding once
    the last prompt is done, and then still has the timed steps left. A flat 64 tokens left
    62 of 64 at 1,536-token contexts (the H200 run of 2026-12-02)."""
    monkeypatch.syspath_prepend(str(ROOT / "tools" / "gpu"))
    import profile_decode
    from atlas.core.sampling import GREEDY
    from atlas.engine.block_manager import BlockManager
    from atlas.engine.request import EngineRequest
    from atlas.engine.scheduler import Scheduler
    from atlas.engine.scheduling_policy import FifoPolicy
    from atlas.runtime.kv_cache import BlockAllocator

    def decoding_after_prefill(max_tokens: int) -> tuple[int, int]:
        """(sequences decoding, fewest tokens any has left) once every one has sampled."""
        seq_len, blocks = context + max_tokens + 16, batch * -(-(context + max_tokens + 16) // 16)
        sched = Scheduler(BlockManager(BlockAllocator(blocks), blocks, 16), FifoPolicy(),
                          max_num_seqs=batch, max_seq_len=seq_len,
                          max_prefill_tokens=max(context, batch))
        for i in range(batch):
            sched.add(i, EngineRequest([7 + (i * 31 + j) % 1000 for j in range(context)],
                                       GREEDY, max_tokens), 0.0)
        while sched.waiting or any(not s.output_ids for s in sched.running):
            plan = sched.schedule(0.0)
            sched.commit(plan, [5 if c.sample else None for c in plan.chunks], 0.0)
        return len(sched.running), min(max_tokens - len(s.output_ids) for s in sched.running)

    tokens = profile_decode.step_tokens(batch, context, max(context, batch))
    running, left = decoding_after_prefill(tokens)
    assert running == batch and left >= 5 + profile_decode.TIMED_STEPS
    if batch > 8:  # the flat budget it replaces
        assert decoding_after_prefill(profile_decode.TIMED_STEPS + 14)[0] < batch


def test_critical_path_charges_each_kernel_its_end_past_the_latest_end(monkeypatch):
    """profile_decode's critical path: PDL-overlapped records (a kernel starting before its
    predecessor ends) are charged only what they add to the step's end, grouped by the kernel
    launched before, so the charges add up to the span and the same GEMV after two different
    kernels gets two rows."""
    monkeypatch.syspath_prepend(str(ROOT / "tools" / "gpu"))
    import profile_decode

    recs = [(0.0, 10.0, "gemv"), (8.0, 15.0, "attn"), (12.0, 20.0, "gemv"),
            (19.0, 21.0, "norm"), (20.5, 30.0, "gemv")]
    rows = {(r["kernel"], r["after"]): r for r in profile_decode.critical_path(recs[::-1], 1)}
    assert rows[("attn", "gemv")]["us_per_call"] == 5.0
    assert rows[("attn", "gemv")]["lead_us"] == 2.0
    after_attn, after_norm = rows[("gemv", "attn")], rows[("gemv", "norm")]
    assert (after_attn["us_per_call"], after_attn["lead_us"]) == (5.0, 3.0)
    assert (after_norm["us_per_call"], after_norm["lead_us"]) == (9.0, 0.5)
    assert rows[("norm", "gemv")]["us_per_call"] == 1.0
    assert sum(r["us_per_step"] for r in rows.values()) == 30.0 - 10.0


def test_step_boundaries_measure_the_span_between_replays_and_the_copies_in_it(monkeypatch):
    """profile_decode's async trace: records cut into replays of the graph's launch order
    (a leading partial replay skipped), the span from a replay's last end to the next one's
    first start, and the copies starting inside it with their offsets; copies inside a
    replay are not the boundary's."""
    monkeypatch.syspath_prepend(str(ROOT / "tools" / "gpu"))
    import profile_decode

    order = ["embed", "gemv", "sample"]
    recs = [(0.0, 4.0, "sample"),                                   # a partial replay
            (10.0, 12.0, "embed"), (11.0, 20.0, "gemv"), (19.0, 22.0, "sample"),
            (23.0, 25.0, "Memcpy DtoH"), (26.0, 27.0, "Memcpy HtoD"),
            (30.0, 32.0, "embed"), (31.0, 40.0, "gemv"), (35.0, 36.0, "Memcpy HtoD"),
            (39.0, 41.0, "sample"), (43.0, 44.0, "Memcpy DtoH"),
            (46.0, 48.0, "embed"), (47.0, 50.0, "gemv"), (49.0, 52.0, "sample")]
    got = profile_decode.step_boundaries(recs[::-1], order)
    assert got["boundaries"] == 2
    assert got["span_us"] == (8.0 + 5.0) / 2
    dtoh, htod = got["records"]["Memcpy DtoH"], got["records"]["Memcpy HtoD"]
    assert (dtoh["calls"], dtoh["us_per_call"], dtoh["starts_after_us"]) == (1.0, 1.5, 1.5)
    assert (htod["calls"], htod["us_per_call"], htod["starts_after_us"]) == (0.5, 1.0, 4.0)
