"""The figures of `tau2-a2a report`: scores with intervals, failures, cost, protocol, provenance, comparisons.

A report holds one or more runs (see `runs`). With two or more runs, every run
must cover the same domains and, in each domain, the same tasks; each run is
compared with the first: the paired difference, the verdicts that flipped and
McNemar's test on them, and, across all runs, reward against cost (the
cost-accuracy frontier). With `gate`, the second run is judged against the
first: worse beyond noise, or not (see `stats.gate`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tau2_a2a.compare import stats
from tau2_a2a.compare.figures import (
    AgentUsage,
    ComparisonFigures,
    CostFigures,
    DomainFigures,
    Failures,
    FlipRow,
    Frontier,
    FrontierPoint,
    GateFigures,
    GridCell,
    GridRow,
    IndexedSimulationProtocol,
    ProtocolFigures,
    Report,
    SimulationProtocol,
    TaskDifference,
    ValueSummary,
)
from tau2_a2a.compare.runs import (
    COST_PARTIES,
    SCHEMA_ID,
    DomainRun,
    ReportError,
    Run,
    a2a_records,
    conversation_cost,
    conversation_times,
    failed_components,
    failure_kind,
    reward_of,
    task_order,
    task_set_hash,
    task_trials,
)
from tau2_a2a.runner.outcome import usd
from tau2_a2a.runner.protocol_metrics import agent_usage, known_total
from tau2_a2a.tau2bench.run.layout import metrics_path
from tau2_a2a.tau2bench.run.resume import CARD_KEY
from tau2_a2a.tau2bench.seam.installed import DISTRIBUTION, VERSION

SECRET_WORDS = ("key", "token", "secret", "password", "auth", "credential")
FEW_TASKS = 20  # below this many tasks a percentile bootstrap interval is known to be too narrow


# -- figures -------------------------------------------------------------------------


def estimate_dict(estimate: stats.Estimate) -> stats.EstimateFigures:
    return estimate.as_dict()


def domain_figures(run: DomainRun, seed: int, resamples: int) -> DomainFigures:
    """Scores with intervals, the grid, the failure counts and the protocol figures of one results file."""
    trials = task_trials(run)
    tasks = list(trials.values())
    reward = stats.reward_estimate(tasks, seed, resamples)
    curve = stats.pass_curve(tasks, seed, resamples)
    grid, failures, protocol = simulation_figures(run, trials)
    warnings = small_sample_warnings(reward, curve)
    floor = stats.noise_floor(tasks)
    return {
        "domain": run.domain,
        "file": str(run.path),
        "tasks": len(tasks),
        "trials": run.results["info"]["num_trials"],
        "max_k": stats.max_k(tasks),
        "simulations": len(run.results["simulations"]),
        "avg_reward": estimate_dict(reward),
        "pass_hat_k": {convention: {str(k): estimate_dict(e) for k, e in by_k.items()}
                       for convention, by_k in curve.items()},
        "warnings": warnings,
        "noise_floor": floor.as_dict() if floor else None,
        "cost": cost_figures(run),
        "failures": failures,
        "grid": grid,
        "protocol": protocol,
        "provenance": provenance(run, trials),
    }


def small_sample_warnings(reward: stats.Estimate, curve: dict[str, dict[int, stats.Estimate]]) -> list[str]:
    """One sentence per figure whose 95% interval is wider than the differences usually quoted."""
    wide = [("average reward", reward)] + [
        (f"pass^{k} ({convention.replace('_', '-')})", e) for convention, by_k in curve.items()
        for k, e in by_k.items()]
    return [f"{name}: the 95% interval spans {e.width * 100:.1f} points over {e.tasks} tasks; "
            f"differences smaller than that are not resolved" for name, e in wide if e.wide]


def simulation_figures(run: DomainRun, trials: dict[str, stats.TaskTrials]
                       ) -> tuple[list[GridRow], Failures, ProtocolFigures]:
    """The task x trial grid (every simulation, also those tau2 leaves out of its metrics), the counts of why
    simulations failed, and per-simulation protocol figures."""
    cells: dict[str, list[GridCell]] = {task: [] for task in trials}
    by_kind: dict[str, int] = {}
    by_group: dict[str, int] = {}
    by_component: dict[str, int] = {}
    per_simulation: list[IndexedSimulationProtocol] = []
    latency_by_method: dict[str, list[float]] = {}
    first_event: list[float] = []
    for index, simulation in enumerate(run.results["simulations"]):
        group, kind = failure_kind(simulation)
        components = failed_components(simulation) if group != "pass" else []
        if group != "pass":
            by_group[group] = by_group.get(group, 0) + 1
            key = group if kind == group else f"{group}: {kind}"
            by_kind[key] = by_kind.get(key, 0) + 1
            for component in components:
                by_component[component] = by_component.get(component, 0) + 1
        records = a2a_records(simulation)
        for record in records:
            latency_by_method.setdefault(str(record.get("method")), []).append(float(record.get("latency_ms") or 0))
            if record.get("first_event_ms") is not None:
                first_event.append(float(record["first_event_ms"]))
        figures = simulation_protocol(records, simulation)
        per_simulation.append({"index": index, **figures})
        cells.setdefault(str(simulation["task_id"]), []).append({
            "trial": simulation.get("trial"), "index": index, "reward": reward_of(simulation),
            "group": group, "kind": kind, "components": components,
            "termination": str(simulation.get("termination_reason")),
        })
    grid: list[GridRow] = [
        {"task_id": task, "cells": sorted(row, key=lambda c: (c["trial"] is None, c["trial"] or 0))}
        for task, row in sorted(cells.items(), key=lambda item: task_order(item[0]))]
    failed = sum(by_group.values())
    failures: Failures = {"simulations": len(run.results["simulations"]), "failed": failed, "by_group": by_group,
                "by_kind": by_kind, "by_component": by_component}
    protocol: ProtocolFigures = {
        "a2a": any(p["requests"] for p in per_simulation),
        "latency_ms_by_method": {m: summary(v) for m, v in sorted(latency_by_method.items())},
        "first_event_ms": summary(first_event),
        "per_simulation": per_simulation,
        "retried_requests": sum(p["retries"] for p in per_simulation),
        "simulations_with_retries": sum(1 for p in per_simulation if p["retries"]),
        "usage_reported": usage_reported([p["agent_usage"] for p in per_simulation]),
    }
    return grid, failures, protocol


def cost_figures(run: DomainRun) -> CostFigures:
    """What the run's conversations cost (USD; None where any simulation's was not reported): per conversation
    and in total, by participant; per task (averaged over its trials); and where the time went, by phase."""
    simulations = run.results["simulations"]
    costs = [conversation_cost(s) for s in simulations]
    totals = {who: known_total([c[who] for c in costs]) for who in COST_PARTIES}
    by_task: dict[str, list[dict[str, float | None]]] = {}
    for simulation, cost in zip(simulations, costs):
        by_task.setdefault(str(simulation["task_id"]), []).append(cost)
    per_task = []
    for task, rows in sorted(by_task.items(), key=lambda item: task_order(item[0])):
        sums = {who: known_total([row[who] for row in rows]) for who in COST_PARTIES}
        per_task.append({"task_id": task, "trials": len(rows),
                         **{who: None if total is None else total / len(rows) for who, total in sums.items()}})
    times = [t for t in (conversation_times(s) for s in simulations) if t]
    phases = ("agent", "user", "tools", "judge")
    by_phase = {phase: sum(float(t.get(phase) or 0.0) for t in times) for phase in phases}
    return {
        "simulations": len(simulations),
        "per_conversation": {who: None if total is None else total / len(simulations)
                             for who, total in totals.items()},
        "total": totals,
        "reported_by": {who: sum(1 for c in costs if c[who] is not None) for who in COST_PARTIES},
        "per_task": per_task,
        "time_s_by_phase": {phase: round(total, 3) for phase, total in by_phase.items()} if times else None,
        "time_s_per_conversation": {phase: round(total / len(times), 3) for phase, total in by_phase.items()}
        if times else None,
    }


def simulation_protocol(records: list[dict[str, Any]], simulation: dict[str, Any]) -> SimulationProtocol:
    """A simulation's A2A requests summed (their tokens count the messages' text), and the LLM usage the agent
    reported with its replies."""
    return {
        "requests": len(records),
        "retries": sum(1 for r in records if int(r.get("attempt") or 1) > 1),
        "failed_requests": sum(1 for r in records if r.get("error")),
        "input_tokens": sum(int(r.get("input_tokens") or 0) for r in records),
        "output_tokens": sum(int(r.get("output_tokens") or 0) for r in records),
        "agent_usage": simulation_usage(simulation),
        "request_bytes": sum(int(r.get("request_bytes") or 0) for r in records),
        "response_bytes": sum(int(r.get("response_bytes") or 0) for r in records),
        "latency_ms": round(sum(float(r.get("latency_ms") or 0) for r in records), 3),
    }


def simulation_usage(simulation: dict[str, Any]) -> AgentUsage | None:
    """The usage the agent reported over a conversation, None when no reply reported any."""
    usage = agent_usage([simulation])
    if usage["input"] is None or usage["output"] is None:
        return None
    return {"input": usage["input"], "output": usage["output"], "replies_with_usage": usage["replies_with_usage"],
            "replies_with_partial_usage": usage["replies_with_partial_usage"], "replies": usage["replies"]}


def usage_reported(usages: list[AgentUsage | None]) -> dict[str, int]:
    """How many simulations reported their LLM usage whole with every reply ("whole"), in part ("partial")."""
    whole = sum(1 for u in usages
                if u and u["replies_with_usage"] == u["replies"] and not u["replies_with_partial_usage"])
    return {"whole": whole, "partial": sum(1 for u in usages if u) - whole}


def summary(values: list[float]) -> ValueSummary:
    """Count and quantiles (the charts draw the values themselves)."""
    if not values:
        return {"count": 0, "p50": None, "p95": None, "max": None, "values": []}
    return {"count": len(values), "p50": round(stats.percentile(values, 50) or 0.0, 3),
            "p95": round(stats.percentile(values, 95) or 0.0, 3), "max": round(float(max(values)), 3),
            "values": [round(v, 3) for v in values]}


# -- provenance ----------------------------------------------------------------------


def public_url(url: object) -> str | None:
    """An endpoint without credentials: no user:password, no query, no fragment."""
    if not url:
        return None
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def public_args(args: object) -> dict[str, Any]:
    """LLM arguments without anything that could be a secret (keys, tokens, headers)."""
    if not isinstance(args, dict):
        return {}
    kept: dict[str, Any] = {}
    for name, value in args.items():
        lowered = str(name).lower()
        if any(word in lowered for word in SECRET_WORDS) or lowered in ("headers", "extra_headers", "api_base"):
            continue
        kept[name] = public_url(value) if lowered.endswith("endpoint") else value
    return kept


def provenance(run: DomainRun, trials: dict[str, stats.TaskTrials]) -> dict[str, object]:
    """Where the figures come from: versions, settings, the agent, the user simulator, dates."""
    info = run.results["info"]
    agent = info.get("agent_info") or {}
    user = info.get("user_info") or {}
    starts = [s.get("start_time") for s in run.results["simulations"] if s.get("start_time")]
    ends = [s.get("end_time") for s in run.results["simulations"] if s.get("end_time")]
    agent_args = public_args(agent.get("llm_args"))
    card = agent_args.get(CARD_KEY) or (run.metrics or {}).get("card") or {}
    return {
        "results_timestamp": run.results.get("timestamp"),
        "first_simulation_start": min(starts) if starts else None,
        "last_simulation_end": max(ends) if ends else None,
        "git_commit": info.get("git_commit"),
        "num_trials": info.get("num_trials"),
        "max_steps": info.get("max_steps"),
        "max_errors": info.get("max_errors"),
        "seed": info.get("seed"),
        "trial_seeds": sorted({s["seed"] for s in run.results["simulations"] if s.get("seed") is not None}),
        "task_set_hash": task_set_hash(run, trials),
        "tasks_in_file": len(run.results["tasks"]),
        "agent": {
            "implementation": agent.get("implementation"),
            "name": card.get("name") or agent.get("llm"),
            "card_version": card.get("version"),
            "endpoint": public_url(agent_args.get("a2a_endpoint")),
            "settings": {k: v for k, v in agent_args.items() if k not in ("a2a_endpoint", CARD_KEY)},
        },
        "user": {"implementation": user.get("implementation"), "llm": user.get("llm"),
                 "settings": public_args(user.get("llm_args"))},
        "metrics_file": str(metrics_path(run.path)) if run.metrics else None,
    }


def package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


# -- comparisons ---------------------------------------------------------------------


def comparison(base: Run, other: Run, domain: str, seed: int, resamples: int) -> ComparisonFigures:
    """`other` minus `base` on one domain's tasks: per task, and paired over tasks."""
    a_trials, b_trials = task_trials(base.domains[domain]), task_trials(other.domains[domain])
    order = list(a_trials)
    a_tasks = [a_trials[t] for t in order]
    b_tasks = [b_trials[t] for t in order]
    trials = min(stats.max_k(a_tasks), stats.max_k(b_tasks))
    a_means, b_means = stats.task_mean_rewards(a_tasks), stats.task_mean_rewards(b_tasks)
    reward = stats.paired_difference(a_means, b_means, trials, seed, resamples)
    pass_k: dict[str, dict[str, object]] = {}
    for k in range(1, trials + 1):
        a_values = stats.task_pass_values(a_tasks, k, stats.COMBINATORIAL)
        b_values = stats.task_pass_values(b_tasks, k, stats.COMBINATORIAL)
        pass_k[str(k)] = stats.paired_difference(a_values, b_values, trials, seed, resamples).as_dict()
    per_task: list[TaskDifference] = [{"task_id": t, "a": float(a), "b": float(b), "difference": float(b - a)}
                for t, a, b in zip(order, a_means, b_means)]
    flipped, pairs = stats.flips(a_tasks, b_tasks)
    test = stats.mcnemar(sum(f.lost for f in flipped), sum(not f.lost for f in flipped), pairs)
    return {
        "domain": domain, "a": base.label, "b": other.label, "tasks": len(order), "trials": trials,
        "test": "paired sign-flip permutation test on per-task mean reward; 95% CI by paired bootstrap over tasks",
        "avg_reward_difference": reward.as_dict(),
        "pass_hat_k_difference": pass_k,
        "sentence": difference_sentence(base.label, other.label, reward, len(order), trials),
        "per_task": per_task,
        "tasks_differing": sum(1 for row in per_task if row["difference"] != 0),
        "mcnemar": test.as_dict(),
        "flips": flip_table(flipped, a_tasks, b_tasks),
    }


def flip_table(flipped: list[stats.Flip], a_tasks: list[stats.TaskTrials],
               b_tasks: list[stats.TaskTrials]) -> list[FlipRow]:
    """Each task with a verdict that flipped: its passes in each run, and the trials it lost or gained."""
    rows: list[FlipRow] = []
    for a, b in zip(a_tasks, b_tasks):
        mine = [f for f in flipped if f.task_id == a.task_id]
        if mine:
            rows.append({"task_id": a.task_id, "a_passed": sum(a.successes), "b_passed": sum(b.successes),
                         "trials": min(len(a.rewards), len(b.rewards)),
                         "lost": [f.trial for f in mine if f.lost], "gained": [f.trial for f in mine if not f.lost]})
    return rows


def frontier(runs: list[Run], domain: str, figures: list[DomainFigures]) -> Frontier:
    """Average reward against the agent's cost per conversation, run by run (HAL's cost-accuracy frontier): a run
    is on the frontier when no other is at least as good for at most its cost; runs whose agent did not report its
    cost are listed apart."""
    points: list[FrontierPoint] = []
    not_reported: list[str] = []
    for run, figure in zip(runs, figures):
        cost = figure["cost"]["per_conversation"]
        agent_cost = cost["agent"]
        if agent_cost is None:
            not_reported.append(run.label)
            continue
        points.append({"label": run.label, "avg_reward": figure["avg_reward"]["value"], "agent_cost": agent_cost,
                       "total_cost": cost["total"], "on_frontier": False})
    for point in points:
        point["on_frontier"] = not any(
            other is not point and other["agent_cost"] <= point["agent_cost"]
            and other["avg_reward"] >= point["avg_reward"]
            and (other["agent_cost"] < point["agent_cost"] or other["avg_reward"] > point["avg_reward"])
            for other in points)
    return {"domain": domain, "cost": "the agent's cost per conversation (USD)",
            "points": points, "cost_not_reported": not_reported}


def difference_sentence(a: str, b: str, d: stats.PairedDifference, tasks: int, trials: int) -> str:
    """What the difference in average reward means, in one plain sentence."""
    sign = f"{d.value * 100:+.1f} points"
    interval = f"95% CI {d.low * 100:+.1f} to {d.high * 100:+.1f}"
    detect = (f"with {tasks} tasks x {trials} trials, differences below about {d.detectable * 100:.0f} points "
              "are usually missed" if d.detectable < 1 else
              f"with {tasks} tasks x {trials} trials, no difference in average reward is reliably detected")
    few = (f" With fewer than {FEW_TASKS} tasks the bootstrap interval is too narrow: "
           "trust the permutation p-value." if tasks < FEW_TASKS else "")
    if d.within_noise:
        return (f"{b} vs {a}: {sign} in average reward ({interval}, p = {d.p_value:.3g}) lies within the noise; "
                f"{detect}.{few}")
    better = b if d.value > 0 else a
    return (f"{better} scores higher: {b} vs {a} is {sign} in average reward ({interval}, p = {d.p_value:.3g}); "
            f"{detect}.{few}")


# -- the whole report ----------------------------------------------------------------


def build(runs: list[Run], seed: int = stats.SEED, resamples: int = stats.RESAMPLES,
          gate: stats.GateSettings | None = None) -> Report:
    """The report's figures (the JSON file's content; see report_schema.json); with `gate`, the verdict on the
    second run against the first."""
    domains = sorted(runs[0].domains)
    figures = [[domain_figures(run.domains[d], seed, resamples) for d in domains] for run in runs]
    report: Report = {
        "$schema": SCHEMA_ID,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "software": {"tau2_a2a": package_version("tau2-a2a"), "tau2_distribution": DISTRIBUTION,
                     "tau2": VERSION},
        "settings": {"confidence": stats.CONFIDENCE, "bootstrap_resamples": resamples, "seed": seed,
                     "interval": "percentile bootstrap over tasks", "warn_width": stats.WARN_WIDTH,
                     "success": "reward within 1e-6 of 1 (tau2's rule)"},
        "domains": domains,
        "runs": [{"label": run.label, "domains": by_domain} for run, by_domain in zip(runs, figures)],
        "comparisons": [comparison(runs[0], other, d, seed, resamples) for other in runs[1:] for d in domains],
        "frontiers": [frontier(runs, d, [by_domain[i] for by_domain in figures]) for i, d in enumerate(domains)],
        "gate": gate_verdict(runs, domains, gate, seed, resamples) if gate else None,
    }
    return report


def gate_verdict(runs: list[Run], domains: list[str], settings: stats.GateSettings, seed: int,
                 resamples: int) -> GateFigures:
    """The second run against the first, domain by domain: a regression in any domain fails the gate. Runs with
    different trials per task are refused unless `settings.unequal_trials`: a task's mean over 3 trials and its
    single trial are not alike under no change, which the sign-flip test assumes, and McNemar would use the
    fewer trials only."""
    base, new = runs[0], runs[1]
    verdicts = []
    for domain in domains:
        a, b = task_trials(base.domains[domain]), task_trials(new.domains[domain])
        a_tasks, b_tasks = [a[t] for t in a], [b[t] for t in a]
        a_count, b_count = trial_counts(a_tasks), trial_counts(b_tasks)
        if a_count != b_count and not settings.unequal_trials:
            raise ReportError(
                f"--gate: {base.label} and {new.label} ran different trials per task in {domain} "
                f"({base.label} {a_count}, {new.label} {b_count}); run both with the same --num-trials, or pass "
                "--unequal-trials to pair trial i with trial i over the fewer")
        verdicts.append(stats.gate(domain, a_tasks, b_tasks, settings.alpha, settings.min_effect, seed, resamples))
    failed = [v for v in verdicts if v.regression]
    below = [v for v in verdicts if v.verdict == stats.WORSE_BELOW_MIN_EFFECT]
    if failed:
        head = f"gate: FAIL: {new.label} is worse than {base.label}"
    elif below:
        head = (f"gate: pass: {new.label} is worse than {base.label}, but by less than the min effect "
                f"({settings.min_effect * 100:g} points)")
    else:
        head = f"gate: pass: {new.label} is not worse than {base.label} beyond noise"
    return {"base": base.label, "new": new.label, "alpha": settings.alpha, "min_effect": settings.min_effect,
            "regression": bool(failed), "domains": [v.as_dict() for v in verdicts],
            "line": f"{head} ({'; '.join(v.reason for v in (failed or below or verdicts))})"}


def trial_counts(tasks: list[stats.TaskTrials]) -> str:
    """The trials per task of one run, as a reader would say it: "3", or "1 to 3" when tasks differ."""
    counts = {len(t.rewards) for t in tasks}
    return str(min(counts)) if len(counts) == 1 else f"{min(counts)} to {max(counts)}"


def schema() -> dict[str, object]:
    """The JSON Schema of the report file (shipped as package data)."""
    return json.loads(files("tau2_a2a.compare").joinpath("report_schema.json").read_text())


def terminal_summary(report: Report) -> str:
    """A few lines: each run's scores with intervals, failures, and each comparison's sentence (the gate's line,
    the verdict, is the caller's to print last)."""
    lines = []
    for run in report["runs"]:
        for figures in run["domains"]:
            r = figures["avg_reward"]
            passes = "  ".join(
                f"pass^{k} {e['value']:.3f} [{e['ci'][0]:.3f}, {e['ci'][1]:.3f}]"
                for k, e in figures["pass_hat_k"][stats.COMBINATORIAL].items())
            lines.append(f"{run['label']} / {figures['domain']}: {figures['tasks']} tasks x {figures['trials']} trials"
                         f"   reward {r['value']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]   {passes}")
            failures = figures["failures"]
            if failures["failed"]:
                kinds = ", ".join(f"{k}={v}" for k, v in sorted(failures["by_kind"].items(), key=lambda i: -i[1]))
                lines.append(f"  failed {failures['failed']} of {failures['simulations']}: {kinds}")
            if figures["warnings"]:
                lines.append(f"  small sample: {len(figures['warnings'])} of the figures have 95% intervals wider "
                             f"than {stats.WARN_WIDTH * 100:.0f} points")
            cost = figures["cost"]["per_conversation"]
            lines.append("  cost per conversation: " + "   ".join(f"{who} {usd(cost[who])}" for who in COST_PARTIES))
            floor = figures["noise_floor"]
            if floor:
                lines.append(f"  noise floor: two runs of this agent with {floor['trials']} trials differ by up to "
                             f"{floor['at_trials'] * 100:.1f} points (95%), single trials by "
                             f"{floor['single_trial'] * 100:.1f}; two trials of a task disagree "
                             f"{floor['flip_rate'] * 100:.0f}% of the time")
    for item in report["comparisons"]:
        lines.append(f"{item['domain']}: {item['sentence']}")
        test = item["mcnemar"]
        lines.append(f"  flips: {test['lost']} task x trial verdicts lost, {test['gained']} gained of "
                     f"{test['pairs']} (McNemar p = {test['p_value']:.3g}, {test['method']})")
    return "\n".join(lines)
