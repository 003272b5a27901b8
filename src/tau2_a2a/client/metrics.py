"""Per-request protocol metrics, their aggregates, and the file beside tau2's results.

Records travel inside the trajectory (`AssistantMessage.raw_data["a2a"]`), so
tau2 saves them with each simulation as it finishes: a killed run keeps them.
The metrics file is derived from the results file and can be rebuilt anytime.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

RAW_DATA_KEY = "a2a"
METRICS_SUFFIX = "_a2a_metrics.json"


@dataclass
class RequestRecord:
    """One A2A request: what it cost and how it ended. Failed requests too."""

    turn: int
    attempt: int
    method: str
    endpoint: str
    protocol_version: str
    context_id: str | None
    http_status: int | None
    latency_ms: float
    request_bytes: int
    response_bytes: int
    input_tokens: int
    output_tokens: int
    error: str | None = None
    error_message: str | None = None
    unknown_tool_calls: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class TokenCounter:
    """cl100k_base from the tokenizer files litellm ships: works offline."""

    def __init__(self) -> None:
        from litellm.litellm_core_utils.default_encoding import encoding

        self._encoding = encoding

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=())) if text else 0


def metrics_path(results_path: Path) -> Path:
    """`run.json` -> `run_a2a_metrics.json`, beside it."""
    return results_path.parent / f"{results_path.stem}{METRICS_SUFFIX}"


def simulation_records(simulation: Any) -> list[dict[str, Any]]:
    """All request records of one tau2 SimulationRun, in order."""
    records: list[dict[str, Any]] = []
    for message in simulation.messages:
        raw = getattr(message, "raw_data", None) or {}
        records.extend(raw.get(RAW_DATA_KEY, {}).get("requests", []))
    return records


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Aggregates over request records: counts, latency percentiles, tokens, bytes, errors."""
    latencies = np.array([r["latency_ms"] for r in records], dtype=float)
    errors: dict[str, int] = {}
    for record in records:
        if record["error"]:
            errors[record["error"]] = errors.get(record["error"], 0) + 1

    def pct(q: float) -> float | None:
        return round(float(np.percentile(latencies, q)), 3) if len(latencies) else None

    return {
        "requests": len(records),
        "failed_requests": sum(errors.values()),
        "latency_ms": {
            "p50": pct(50),
            "p95": pct(95),
            "max": round(float(latencies.max()), 3) if len(latencies) else None,
            "total": round(float(latencies.sum()), 3),
        },
        "tokens": {
            "input": sum(r["input_tokens"] for r in records),
            "output": sum(r["output_tokens"] for r in records),
        },
        "bytes": {
            "request": sum(r["request_bytes"] for r in records),
            "response": sum(r["response_bytes"] for r in records),
        },
        "errors_by_category": errors,
        "unknown_tool_calls": sum(r.get("unknown_tool_calls", 0) for r in records),
    }


def build_report(results: Any, simulations: Iterable[Any] | None = None) -> dict[str, Any]:
    """The metrics file's content for a tau2 Results object."""
    per_simulation = []
    all_records: list[dict[str, Any]] = []
    local_seconds = 0.0
    for simulation in simulations if simulations is not None else results.simulations:
        records = [
            {"simulation_id": simulation.id, "task_id": simulation.task_id,
             "trial": simulation.trial, **record}
            for record in simulation_records(simulation)
        ]
        summary = summarize(records)
        a2a_seconds = summary["latency_ms"]["total"] / 1000.0
        local = max(float(simulation.duration) - a2a_seconds, 0.0)
        local_seconds += local
        per_simulation.append(
            {
                "simulation_id": simulation.id,
                "task_id": simulation.task_id,
                "trial": simulation.trial,
                "termination_reason": _value(simulation.termination_reason),
                "duration_s": round(float(simulation.duration), 3),
                "a2a_time_s": round(a2a_seconds, 3),
                "local_time_s": round(local, 3),
                "summary": summary,
                "requests": records,
            }
        )
        all_records.extend(records)
    run = summarize(all_records)
    run["simulations"] = len(per_simulation)
    run["a2a_time_s"] = round(run["latency_ms"]["total"] / 1000.0, 3)
    run["local_time_s"] = round(local_seconds, 3)
    return {"run": run, "simulations": per_simulation}


def _value(reason: Any) -> str:
    return getattr(reason, "value", str(reason))


def write_report(results_path: Path) -> dict[str, Any]:
    """Rebuild the metrics file beside a tau2 results file; returns the report."""
    from tau2.data_model.simulation import Results

    results = Results.load(results_path)
    report = build_report(results)
    metrics_path(results_path).write_text(json.dumps(report, indent=2))
    return report


def format_summary(report: dict[str, Any]) -> str:
    """The short summary printed at the end of a run."""
    run = report["run"]
    latency = run["latency_ms"]
    errors = ", ".join(f"{k}={v}" for k, v in sorted(run["errors_by_category"].items())) or "none"
    return "\n".join(
        [
            "A2A protocol metrics",
            f"  simulations: {run['simulations']}   requests: {run['requests']}"
            f"   failed: {run['failed_requests']} ({errors})",
            f"  latency ms: p50 {latency['p50']}   p95 {latency['p95']}   max {latency['max']}",
            f"  tokens: in {run['tokens']['input']}   out {run['tokens']['output']}"
            f"   bytes: sent {run['bytes']['request']}   received {run['bytes']['response']}",
            f"  time in A2A calls: {run['a2a_time_s']} s   local simulation time: {run['local_time_s']} s",
            f"  unknown tool calls: {run['unknown_tool_calls']}",
        ]
    )
