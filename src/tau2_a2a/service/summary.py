"""An evaluation's outcome, read from tau2's results file: metrics, rewards, a short text.

Works on a finished run and on the part of a run that finished before it was
canceled: tau2 rewrites the results file after every simulation. Plain dicts
in and out, so the outcome can be stored as JSON and sent in an A2A data part.
"""

from __future__ import annotations

import json
from pathlib import Path

from tau2_a2a.compare import stats
from tau2_a2a.compare.runs import reward_of, scored_tasks
from tau2_a2a.runner.outcome import left_out_of_metrics, usd
from tau2_a2a.runner.protocol_metrics import conversation, known_total
from tau2_a2a.service.wire import JsonObject


def read_results(path: Path) -> JsonObject | None:
    """tau2's results JSON, or None while it is missing or being rewritten."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def progress(results: JsonObject | None, total: int) -> JsonObject:
    """Simulations done out of `total`, and the average reward so far."""
    simulations = (results or {}).get("simulations") or []
    so_far = stats.average(reward_of(s) for s in simulations if not left_out_of_metrics(s))
    return {
        "simulations_done": len(simulations),
        "simulations_total": total,
        "avg_reward_so_far": None if so_far is None else round(so_far, 6),
    }


def metrics(simulations: list[JsonObject]) -> JsonObject:
    """avg_reward, pass^k for k up to the smallest trial count of a task (tau2's estimator, `compare.stats`),
    avg_agent_cost (None, not reported, unless every simulation's is known): over the simulations tau2 counts
    (not those it gave up on as infrastructure errors)."""
    simulations = [s for s in simulations if not left_out_of_metrics(s)]
    if not simulations:
        return {"avg_reward": None, "pass_hat_k": {}, "num_simulations": 0, "avg_agent_cost": None}
    tasks = list(scored_tasks(simulations).values())
    agent_cost = known_total([s.get("agent_cost") for s in simulations])
    return {
        "avg_reward": round(float(stats.average_reward(tasks)), 6),
        "pass_hat_k": {str(k): round(float(value), 6) for k, value in stats.pass_hat_ks(tasks).items()},
        "num_simulations": len(simulations),
        "avg_agent_cost": None if agent_cost is None else round(agent_cost / len(simulations), 6),
    }


def conversation_costs(simulations: list[JsonObject]) -> dict[str, float | None]:
    """The average cost of a conversation: agent, user simulator, judge and total (None where any simulation's
    was not reported)."""
    kept = [conversation(s) for s in simulations]
    if not kept:
        return {"agent": None, "user": None, "judge": None, "total": None}
    costs = {}
    for who in ("agent", "user", "judge", "total"):
        total = known_total([(c or {}).get("cost_usd", {}).get(who) for c in kept])
        costs[who] = None if total is None else round(total / len(kept), 6)
    return costs


def intervals(simulations: list[JsonObject]) -> JsonObject | None:
    """95% bootstrap intervals of avg_reward and pass^k (tau2's estimator), as `tau2-a2a report` computes them.

    The same code, seed, resample count and task order as the report, so the
    numbers agree with a report on the same results file. About 0.2 s for 200
    simulations; computed once, when the evaluation ends.
    """
    tasks = list(scored_tasks(simulations).values())
    if not tasks:
        return None

    def interval(estimate: stats.Estimate) -> dict[str, float]:
        return {"low": round(estimate.low, 6), "high": round(estimate.high, 6)}

    return {
        "avg_reward": interval(stats.reward_estimate(tasks)),
        "pass_hat_k": {str(k): interval(stats.pass_estimate(tasks, k, stats.COMBINATORIAL))
                       for k in range(1, stats.max_k(tasks) + 1)},
        "method": "percentile bootstrap over tasks",
        "resamples": stats.RESAMPLES,
        "seed": stats.SEED,
    }


def per_task(simulations: list[JsonObject]) -> list[JsonObject]:
    """Each task's rewards, one per trial, with how each trial ended."""
    tasks: dict[str, list[JsonObject]] = {}
    for simulation in sorted(simulations, key=lambda s: (str(s["task_id"]), s.get("trial") or 0)):
        tasks.setdefault(str(simulation["task_id"]), []).append(
            {
                "trial": simulation.get("trial"),
                "reward": reward_of(simulation),
                "termination_reason": simulation.get("termination_reason"),
            }
        )
    return [
        {
            "task_id": task_id,
            "rewards": [t["reward"] for t in trials],
            "avg_reward": round(stats.average(t["reward"] for t in trials) or 0.0, 6),
            "trials": trials,
        }
        for task_id, trials in tasks.items()
    ]


def termination_counts(simulations: list[JsonObject]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for simulation in simulations:
        reason = str(simulation.get("termination_reason"))
        counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))


def a2a_errors(protocol_metrics: JsonObject | None) -> JsonObject:
    """Simulations that ended on an A2A error, by kind, as the protocol metrics count them."""
    ended = ((protocol_metrics or {}).get("run") or {}).get("simulations_ended_by_a2a_errors") or {}
    by_kind = dict(sorted(ended.items(), key=lambda item: (-item[1], item[0])))
    return {"simulations": sum(by_kind.values()), "by_category": by_kind}


def outcome(results: JsonObject | None, protocol_metrics: JsonObject | None) -> JsonObject:
    """The result part of an evaluation record: metrics and their 95% intervals, per-task rewards,
    protocol metrics, A2A errors."""
    simulations = (results or {}).get("simulations") or []
    return {
        "metrics": metrics(simulations),
        "cost_per_conversation": conversation_costs(simulations),
        "ci95": intervals(simulations),
        "tasks": per_task(simulations),
        "termination_reasons": termination_counts(simulations),
        "protocol_metrics": protocol_metrics["run"] if protocol_metrics else None,
        "a2a_errors": a2a_errors(protocol_metrics),
    }


def a2a_error_line(result: JsonObject, total: int) -> str | None:
    """"3 of 10 simulations ended with A2A errors (timeout=2, http=1): they score 0." or None."""
    errors = result.get("a2a_errors") or {}
    if not errors.get("simulations"):
        return None
    categories = ", ".join(f"{k}={v}" for k, v in errors["by_category"].items())
    return f"{errors['simulations']} of {total} simulations ended with A2A errors ({categories}): they score 0."


def text(record: JsonObject) -> str:
    """A few lines stating what the data part states."""
    spec = record["request"]
    status = record["status"]
    if status == "completed" and ((record.get("result") or {}).get("a2a_errors") or {}).get("simulations"):
        status = "completed, with A2A errors"
    shard = f" (shard {spec['shard_index']} of {spec['num_shards']})" if (spec.get("num_shards") or 1) > 1 else ""
    head = (f"Evaluation {record['evaluation_id']} of {spec['agent_endpoint']} on "
            f"{spec['domain']}{shard}: {status}.")
    lines = [head]
    if record.get("error"):
        lines.append(f"Error: {record['error']}")
    if record["status"] == "queued":
        lines.append(f"Queued at position {record.get('queue_position')}.")
    prog = record.get("progress") or {}
    if record["status"] == "running" and prog:
        lines.append(_progress_line(prog))
    result = record.get("result")
    if result:
        m = result["metrics"]
        if m["num_simulations"]:
            pass_text = ", ".join(f"pass^{k} {v:.3f}" for k, v in m["pass_hat_k"].items())
            lines.append(
                f"{m['num_simulations']} of {record['total_simulations']} simulations: "
                f"average reward {m['avg_reward']:.3f}; {pass_text}; average agent cost {usd(m['avg_agent_cost'])}."
            )
            costs = result.get("cost_per_conversation")
            if costs:
                lines.append("Average cost per conversation: " + ", ".join(
                    f"{who} {usd(costs.get(who))}" for who in ("agent", "user", "judge", "total")) + ".")
            ci = result.get("ci95")
            if ci:
                passes = "".join(f", pass^{k} {b['low']:.3f}-{b['high']:.3f}" for k, b in
                                 sorted(ci["pass_hat_k"].items(), key=lambda item: int(item[0])))
                lines.append(f"95% intervals (bootstrap over tasks): average reward "
                             f"{ci['avg_reward']['low']:.3f}-{ci['avg_reward']['high']:.3f}{passes}.")
            reasons = ", ".join(f"{k} {v}" for k, v in result["termination_reasons"].items())
            lines.append(f"Terminations: {reasons}.")
            tasks = "; ".join(f"{t['task_id']}: {', '.join(f'{r:g}' for r in t['rewards'])}" for t in result["tasks"])
            lines.append(f"Rewards by task: {tasks}.")
            errors = a2a_error_line(result, record["total_simulations"])
            if errors:
                lines.append(errors)
        else:
            lines.append("No simulation finished.")
        protocol = result.get("protocol_metrics")
        if protocol:
            latency = protocol["latency_ms"]
            lines.append(
                f"A2A: {protocol['requests']} requests, {protocol['failed_requests']} failed, "
                f"latency p50 {latency['p50']} ms, p95 {latency['p95']} ms."
            )
    if record.get("report_url") and (record.get("progress") or {}).get("simulations_done"):
        lines.append(f"Report: {record['report_url']}")
    return "\n".join(lines)


def _progress_line(prog: JsonObject) -> str:
    avg = prog.get("avg_reward_so_far")
    avg_text = "n/a" if avg is None else f"{avg:.3f}"
    return (f"Progress: {prog['simulations_done']}/{prog['simulations_total']} simulations done, "
            f"average reward so far {avg_text}.")


def progress_text(record: JsonObject) -> str:
    """One line for a progress update."""
    if record["status"] == "queued":
        return f"Evaluation {record['evaluation_id']} is queued at position {record.get('queue_position')}."
    return f"Evaluation {record['evaluation_id']}: " + _progress_line(record.get("progress") or {
        "simulations_done": 0, "simulations_total": record["total_simulations"], "avg_reward_so_far": None})
