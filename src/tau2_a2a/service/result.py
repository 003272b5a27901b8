"""The machine-readable result of an assessment: the data part of the `Result` artifact.

Flat names and plain numbers, so a leaderboard's SQL reads it directly
(`results.avg_reward`, `results.pass_hat_1`). A2A data parts carry every
number as a double: a reader sees `"max_steps": 200.0`. Whole numbers stay
exact (doubles hold every integer up to 2**53); rewards and averages are
rounded to 6 decimals, and so are the bounds of their 95% bootstrap intervals
(`avg_reward_ci95_low`, `pass_hat_1_ci95_high`, ...). `result_schema.json` beside this module is its JSON
Schema.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from functools import cache
from importlib.metadata import version
from pathlib import Path

from tau2_a2a.compare import stats
from tau2_a2a.service import catalog, summary
from tau2_a2a.service.assessment import Assessment
from tau2_a2a.service.wire import JsonObject
from tau2_a2a.tau2bench.run.provenance import PROVENANCE_KEY
from tau2_a2a.tau2bench.seam.installed import DISTRIBUTION, VERSION

SCHEMA_PATH = Path(__file__).with_name("result_schema.json")
ARTIFACT_NAME = "Result"


@cache
def schema() -> JsonObject:
    return json.loads(SCHEMA_PATH.read_text())


def _total(values: list[float | None]) -> float | None:
    known = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    return round(sum(known), 6) if known else None


def cost_fields(protocol: JsonObject) -> dict[str, float | None]:
    """USD per conversation and in total, for the agent, the user simulator, the judge and all three, as the
    metrics file has them: null (not reported) unless every simulation's is known, never 0 for unknown."""
    per = protocol.get("cost_usd_per_simulation") or {}
    total = protocol.get("cost_usd") or {}
    fields: dict[str, float | None] = {}
    for who in ("agent", "user", "judge"):
        fields[f"avg_{who}_cost"] = _rounded(per.get(who))
        fields[f"total_{who}_cost"] = _rounded(total.get(who))
    fields["avg_total_cost"] = _rounded(per.get("total"))
    fields["total_cost"] = _rounded(total.get("total"))
    return fields


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return round((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds(), 3)


def interval_fields(intervals: JsonObject | None) -> dict[str, float | None]:
    """The 95% intervals as flat columns: avg_reward_ci95_low/high, pass_hat_{k}_ci95_low/high."""
    reward = (intervals or {}).get("avg_reward") or {}
    fields: dict[str, float | None] = {"avg_reward_ci95_low": reward.get("low"),
                                       "avg_reward_ci95_high": reward.get("high")}
    for k, bounds in ((intervals or {}).get("pass_hat_k") or {}).items():
        fields[f"pass_hat_{k}_ci95_low"], fields[f"pass_hat_{k}_ci95_high"] = bounds["low"], bounds["high"]
    return fields


def build_result(record: JsonObject, results: JsonObject | None, assessment: Assessment,
                 report_url: str | None = None) -> JsonObject:
    """The result of the assessment that ran as evaluation `record` (tau2's results file: `results`);
    `report_url` is where the service serves its HTML report."""
    spec = record["request"]
    outcome = record.get("result") or summary.outcome(None, None)
    simulations = (results or {}).get("simulations") or []
    metrics = outcome["metrics"]
    protocol = outcome.get("protocol_metrics") or {}
    latency = protocol.get("latency_ms") or {}
    tokens = protocol.get("tokens") or {}
    errors = outcome.get("a2a_errors") or summary.a2a_errors(None)
    task_split = spec.get("task_split") or (catalog.DEFAULT_SPLIT if catalog.DEFAULT_SPLIT in
                                            catalog.splits(spec["domain"]) else None)
    finished = metrics["num_simulations"]
    return {
        "evaluation_id": record["evaluation_id"],
        "status": record["status"],
        "clean": (record["status"] == "completed" and finished == record["total_simulations"]
                  and errors["simulations"] == 0),
        "participant_role": assessment.role,
        "participant": spec["agent_endpoint"],
        "domain": spec["domain"],
        "task_split": task_split,
        "shard_index": spec.get("shard_index") or 0,
        "num_shards": spec.get("num_shards") or 1,
        "num_trials": spec["num_trials"],
        "max_steps": spec["max_steps"],
        "user": spec["user"],
        "user_llm": spec["user_llm"],
        "retrieval_config": retrieval_config_used(spec),
        "tau2_distribution": DISTRIBUTION,
        "tau2_version": VERSION,
        "task_set_sha256": ((results or {}).get(PROVENANCE_KEY) or {}).get("task_set_sha256"),
        "tau2_a2a_version": version("tau2-a2a"),
        "num_tasks": len(spec["task_ids"]) if spec.get("task_ids") else len(outcome["tasks"]),
        "total_simulations": record["total_simulations"],
        "finished_simulations": finished,
        "avg_reward": metrics["avg_reward"],
        **{f"pass_hat_{k}": value for k, value in metrics["pass_hat_k"].items()},
        **interval_fields(outcome.get("ci95")),
        "report_url": report_url,
        **cost_fields(protocol),
        "simulation_time_s": _total([s.get("duration") for s in simulations]),
        "wall_time_s": _seconds_between(record.get("started_at"), record.get("finished_at")),
        "termination_reasons": outcome["termination_reasons"],
        "a2a_error_simulations": errors["simulations"],
        "a2a_errors_by_category": errors["by_category"],
        "a2a_requests": protocol.get("requests", 0),
        "a2a_failed_requests": protocol.get("failed_requests", 0),
        "a2a_latency_p50_ms": latency.get("p50"),
        "a2a_latency_p95_ms": latency.get("p95"),
        "a2a_latency_max_ms": latency.get("max"),
        "a2a_time_s": protocol.get("a2a_time_s"),
        "a2a_input_tokens": tokens.get("input", 0),
        "a2a_output_tokens": tokens.get("output", 0),
        "a2a_unknown_tool_calls": protocol.get("unknown_tool_calls", 0),
        "tasks": [
            {
                "task_id": task["task_id"],
                "rewards": task["rewards"],
                "successes": [stats.is_success(reward) for reward in task["rewards"]],
                "termination_reasons": [trial["termination_reason"] for trial in task["trials"]],
                "avg_reward": task["avg_reward"],
            }
            for task in outcome["tasks"]
        ],
        "ignored_config": list(assessment.ignored),
        "notes": result_notes(assessment),
    }


def retrieval_config_used(spec: JsonObject) -> str | None:
    """The retrieval config banking_knowledge ran with (the one asked for, or tau2's default); None elsewhere."""
    from tau2_a2a.tau2bench.seam.distribution import DEFAULT_RETRIEVAL_CONFIG, KNOWLEDGE_DOMAIN  # imports tau2

    if spec["domain"] != KNOWLEDGE_DOMAIN:
        return None
    return spec.get("retrieval_config") or DEFAULT_RETRIEVAL_CONFIG


def result_notes(assessment: Assessment) -> list[str]:
    """What the result should say about the request: the config keys it ignored."""
    return [f"config.{key} is accepted and ignored: this service runs one shard per request, "
            "with config.max_concurrency simulations at once." for key in assessment.ignored]
