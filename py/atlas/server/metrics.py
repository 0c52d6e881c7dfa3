"""Server metrics, kept in memory and rendered as Prometheus text for GET /metrics.

Updated from the engine thread (tokens, pool use) and the event loop (requests, TTFT), so
every update takes one lock; reading renders a consistent snapshot.
"""

from __future__ import annotations

import threading
from collections import defaultdict

#: counters the engine core reports (`EngineCore.counters`): name -> (type, help)
ENGINE_COUNTERS = {
    "prefix_cache_queries_total": ("counter", "Prompt tokens looked up in the prefix cache."),
    "prefix_cache_hits_total": ("counter", "Prompt tokens found in the prefix cache."),
    "prefix_cache_blocks": ("gauge", "KV blocks held by the prefix cache."),
    "prefix_cache_evictions_total": ("counter", "Cached KV blocks evicted for space."),
    "prefix_cache_state_snapshots": ("gauge", "Recurrent-state snapshots held (hybrid models)."),
    "prefix_cache_state_restores_total": ("counter",
                                          "Prefix-cache hits restored from a state snapshot."),
    "prefix_cache_state_saves_total": ("counter", "Recurrent-state snapshots taken."),
    "prefix_cache_state_evictions_total": ("counter", "State snapshots evicted for space."),
    "spec_draft_tokens_total": ("counter", "Tokens proposed by the speculative drafter."),
    "spec_accepted_tokens_total": ("counter", "Drafted tokens the verification accepted."),
    "spec_verify_steps_total": ("counter", "Speculative verification chunks run."),
    "spec_mean_accepted_length": ("gauge", "Drafts accepted per verification step."),
    "spec_token_acceptance": ("gauge", "Per-token draft acceptance the draft policy uses "
                              "(accepted / (accepted + rejections), with a 0.7 prior)."),
}

TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
        self.total += 1
        self.sum += value


class ServerMetrics:
    def __init__(self, model: str) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str], int] = defaultdict(int)
        # rendered from the start, so a dashboard can alert on them before the first one
        self._finishes: dict[str, int] = defaultdict(int, {"abort": 0, "error": 0})
        self.prompt_tokens = 0
        self.generated_tokens = 0
        self.preemptions = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.decode_tok_per_s = 0.0
        self.kv_utilization = 0.0
        self.running = 0
        self.waiting = 0
        self.state_slots_used = 0
        self.state_slots_total = 0
        self.engine_counters: dict[str, float] = {}
        #: (tokens the KV pool holds, its format label, bytes per token); None: not known
        self.kv_pool: tuple[int, str, float] | None = None

    def record_request(self, api: str, status: int) -> None:
        with self._lock:
            self._requests[(api, str(status))] += 1

    def record_finish(self, reason: str) -> None:
        """A generation ended: stop, length, tool_calls, stop_sequence, abort (the client
        went away) or error (the engine failed it)."""
        with self._lock:
            self._finishes[reason] += 1

    def record_ttft(self, seconds: float) -> None:
        with self._lock:
            self.ttft.observe(seconds)

    def record_prompt(self, tokens: int) -> None:
        with self._lock:
            self.prompt_tokens += tokens

    def record_step(self, *, generated: int, seconds: float, kv_utilization: float,
                    running: int, waiting: int, preemptions: int,
                    state_slots: tuple[int, int] = (0, 0)) -> None:
        """One engine step. Decode throughput is an exponential moving average of the
        tokens each step produced over its duration. `state_slots`: (held, total) of a
        hybrid model's recurrent-state pool, which bounds its running batch like KV blocks."""
        with self._lock:
            self.generated_tokens += generated
            if seconds > 0 and generated:
                rate = generated / seconds
                self.decode_tok_per_s = rate if self.decode_tok_per_s == 0 else (
                    0.9 * self.decode_tok_per_s + 0.1 * rate)
            self.kv_utilization = kv_utilization
            self.running = running
            self.waiting = waiting
            self.preemptions = preemptions
            self.state_slots_used, self.state_slots_total = state_slots

    def record_engine_counters(self, counters: dict[str, float]) -> None:
        """The engine core's feature counters (names in ENGINE_COUNTERS), after a step."""
        with self._lock:
            self.engine_counters = dict(counters)

    def render(self) -> str:
        m = f'model="{_escape(self.model)}"'
        with self._lock:
            lines = [
                "# HELP atlas_requests_total Finished HTTP requests by API and status.",
                "# TYPE atlas_requests_total counter",
                *(f'atlas_requests_total{{api="{api}",status="{status}",{m}}} {n}'
                  for (api, status), n in sorted(self._requests.items())),
                "# HELP atlas_generations_finished_total Generations by finish reason; abort: "
                "the client disconnected, error: the engine failed the request.",
                "# TYPE atlas_generations_finished_total counter",
                *(f'atlas_generations_finished_total{{finish="{reason}",{m}}} {n}'
                  for reason, n in sorted(self._finishes.items())),
                "# HELP atlas_prompt_tokens_total Prompt tokens admitted.",
                "# TYPE atlas_prompt_tokens_total counter",
                f"atlas_prompt_tokens_total{{{m}}} {self.prompt_tokens}",
                "# HELP atlas_tokens_generated_total Tokens sampled.",
                "# TYPE atlas_tokens_generated_total counter",
                f"atlas_tokens_generated_total{{{m}}} {self.generated_tokens}",
                "# HELP atlas_ttft_seconds Time to first token.",
                "# TYPE atlas_ttft_seconds histogram",
                *(f'atlas_ttft_seconds_bucket{{le="{b}",{m}}} {c}'
                  for b, c in zip(self.ttft.buckets, self.ttft.counts)),
                f'atlas_ttft_seconds_bucket{{le="+Inf",{m}}} {self.ttft.total}',
                f"atlas_ttft_seconds_sum{{{m}}} {self.ttft.sum}",
                f"atlas_ttft_seconds_count{{{m}}} {self.ttft.total}",
                "# HELP atlas_decode_throughput_tok_per_sec Tokens per second of recent steps.",
                "# TYPE atlas_decode_throughput_tok_per_sec gauge",
                f"atlas_decode_throughput_tok_per_sec{{{m}}} {self.decode_tok_per_s:.3f}",
                "# HELP atlas_kv_pool_utilization_ratio Fraction of KV blocks in use.",
                "# TYPE atlas_kv_pool_utilization_ratio gauge",
                f"atlas_kv_pool_utilization_ratio {self.kv_utilization:.6f}",
                "# HELP atlas_active_sequences Sequences in the running batch.",
                "# TYPE atlas_active_sequences gauge",
                f"atlas_active_sequences {self.running}",
                "# HELP atlas_waiting_sequences Sequences queued for admission.",
                "# TYPE atlas_waiting_sequences gauge",
                f"atlas_waiting_sequences {self.waiting}",
                "# HELP atlas_preemptions_total Sequences preempted for KV space.",
                "# TYPE atlas_preemptions_total counter",
                f"atlas_preemptions_total {self.preemptions}",
                "# HELP atlas_state_slots_in_use Recurrent-state slots held by sequences "
                "(hybrid models).",
                "# TYPE atlas_state_slots_in_use gauge",
                f"atlas_state_slots_in_use {self.state_slots_used}",
                "# HELP atlas_state_slots_total Recurrent-state slots in the pool (0: the "
                "model keeps no recurrent state).",
                "# TYPE atlas_state_slots_total gauge",
                f"atlas_state_slots_total {self.state_slots_total}",
            ]
            if self.kv_pool is not None:
                tokens, label, per_token = self.kv_pool
                lines += ["# HELP atlas_kv_pool_tokens Tokens the KV pool holds.",
                          "# TYPE atlas_kv_pool_tokens gauge",
                          f'atlas_kv_pool_tokens{{dtype="{label}"}} {tokens}',
                          "# HELP atlas_kv_bytes_per_token KV bytes per token, all layers.",
                          "# TYPE atlas_kv_bytes_per_token gauge",
                          f'atlas_kv_bytes_per_token{{dtype="{label}"}} {per_token:g}']
            for name, value in self.engine_counters.items():
                kind, text = ENGINE_COUNTERS[name]
                lines += [f"# HELP atlas_{name} {text}", f"# TYPE atlas_{name} {kind}",
                          f"atlas_{name} {value:g}"]
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
