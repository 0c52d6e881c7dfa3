"""Human-readable text for the CLI: suite listings, a run's table, the history table.
Pure formatting of the same data `--format json` prints."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from .suites import SuiteDef

# What a run's summary shows first, when the run reports it.
HEADLINE = ("output_tok_s", "aggregate_output_tok_s", "ttft_p99_ms", "weighted_total_tok_s",
            "peak_total_tok_s", "ttft_cold_p50_ms", "ttft_warm_p50_ms", "prefix_speedup",
            "tool_call_p50_ms", "tool_call_success_rate", "ttft_p50_ms", "tpot_p50_ms",
            "decode_p50_tok_s")
LEVEL_COLUMNS = (("requests", "requests"), ("out tok/s", "aggregate_output_tok_s"),
                 ("total tok/s", "aggregate_total_tok_s"), ("TTFT p50 ms", "ttft_ms.p50"),
                 ("TTFT p99 ms", "ttft_ms.p99"), ("TPOT p50 ms", "tpot_ms.p50"),
                 ("ITL p99 ms", "itl_ms.p99"))


def fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def suites_text(suites: Mapping[str, SuiteDef]) -> str:
    return table(("suite", "description"), [(s.id, s.description) for s in suites.values()])


def suite_text(suite: SuiteDef) -> str:
    rows = [(p.name, p.type, p.render(p.default), p.description) for p in suite.params]
    lines = [f"{suite.id}: {suite.description}", f"workload {suite.workload}; defined in "
             f"{suite.source}", "", table(("parameter", "type", "default", "description"),
                                         rows)]
    if suite.thresholds:
        lines += ["", "verdict thresholds: " + "; ".join(t.describe()
                                                          for t in suite.thresholds)]
    return "\n".join(lines)


def _dig(level: Mapping[str, Any], path: str) -> Any:
    value: Any = level
    for key in path.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def run_text(run: Mapping[str, Any]) -> str:
    verdict = run.get("verdict") or {}
    lines = [f"{run['suite']}  {run['run_id']}  {run.get('created_at', '')}",
             f"target {run['target']['url']}  model {run['target']['model']}  "
             f"atlas {run.get('atlas_version')}  commit {run.get('git_commit') or '-'}"
             f"{' (dirty)' if run.get('git_dirty') else ''}",
             "params " + " ".join(f"{k}={_param_text(v)}"
                                  for k, v in (run.get("params") or {}).items())]
    levels = run.get("levels") or []
    if levels:
        rows = [(lv["label"], *(fmt(_dig(lv, path)) for _, path in LEVEL_COLUMNS))
                for lv in levels]
        lines += ["", table(("level", *(name for name, _ in LEVEL_COLUMNS)), rows)]
    metrics = run.get("metrics") or {}
    shown = [m for m in HEADLINE if m in metrics]
    if shown:
        lines += ["", table(("metric", "value"), [(m, fmt(metrics[m])) for m in shown])]
    status = verdict.get("status", "none")
    lines += ["", f"verdict: {status}" + ("" if status != "none" else " (no thresholds)")]
    lines += [f"  {failure}" for failure in verdict.get("failures") or ()]
    return "\n".join(lines)


def _param_text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def history_text(runs: Sequence[Mapping[str, Any]]) -> str:
    if not runs:
        return "no stored runs"
    rows = []
    for run in runs:
        metrics = run.get("metrics") or {}
        headline = next((m for m in HEADLINE if m in metrics), None)
        rows.append((run["run_id"], run.get("created_at", ""), run["suite"],
                     run.get("source", ""), run.get("target", {}).get("model", ""),
                     (run.get("verdict") or {}).get("status", "none"),
                     f"{headline}={fmt(metrics[headline])}" if headline else "-"))
    return table(("run", "created", "suite", "source", "model", "verdict", "headline"), rows)
