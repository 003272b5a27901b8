"""Protocol A/B: tau2's native `llm_agent` against the same model behind the baseline A2A agent.

Both arms run the same tasks, trials, seeds and user simulator with the same
model and LLM arguments; the A2A arm's agent is served on loopback by this
process. What differs is the protocol, so the table shows what it costs:
reward and pass^k, per-task agreement, agent tokens and cost, latency.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.client.pricing import known_model
from tau2_a2a.compare import stats
from tau2_a2a.compare.runs import scored_tasks
from tau2_a2a.errors import ConfigError
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tau2_a2a.reference.llm_agent import LLMExecutor, Usage, llm_agent_card
from tau2_a2a.runner.run import evaluate
from tau2_a2a.runner.settings import A2A_AGENT, RunSettings
from tau2_a2a.tau2bench.run.fidelity import trajectory_signature
from tau2_a2a.tau2bench.run.layout import results_root
from tau2_a2a.tau2bench.seam.distribution import AssistantMessage, Results, SimulationRun

NATIVE_AGENT = "llm_agent"
ARM_TITLES = {"native": "native llm_agent", "a2a": "baseline agent over A2A"}

ArmSummary = dict[str, str | int | float | None]  # one arm's figures, by name (its pass^k among them)


class Differing(TypedDict):
    """A (task, trial) pair one arm passed and the other failed."""

    task_id: str
    trial: int | None
    native_reward: float
    a2a_reward: float


class Agreement(TypedDict):
    both_pass: int
    both_fail: int
    differ: int
    pairs: int
    only_in_one_arm: int
    identical_trajectories: int
    differing: list[Differing]


class Comparison(TypedDict):
    """Both arms side by side (the JSON `tau2-a2a ab` writes beside its table)."""

    domain: str
    model: str | None
    user: str
    user_llm: str
    num_trials: int
    seed: int | None
    arms: dict[str, ArmSummary]
    agreement: Agreement


@dataclass
class Arm:
    """One arm's run: its results, where they are, and what the agent's LLM used."""

    results: Results
    results_path: Path
    wall_seconds: float
    usage: Usage
    protocol: dict[str, Any] | None = None  # the A2A arm's protocol metrics ("run" section)


@dataclass
class ABOutcome:
    native: Arm
    a2a: Arm
    comparison: Comparison
    table: str
    table_path: Path
    json_path: Path


def run_ab(settings: RunSettings) -> ABOutcome:
    """Run both arms of `settings` (its agent_llm is the model under test), then compare and save."""
    if not settings.agent_llm:
        raise ConfigError("Name the model: tau2-a2a ab DOMAIN --model MODEL.")
    base = settings.save_to or default_run_name(settings)
    native = _run_native(settings.with_changes(agent=NATIVE_AGENT, save_to=f"{base}_native"))
    a2a = _run_a2a(settings.with_changes(save_to=f"{base}_a2a"))
    comparison = compare(native, a2a, settings)
    table = format_table(comparison)
    directory = results_root(settings.results_dir)  # beside the two runs, whatever tau2's layout
    table_path, json_path = directory / f"{base}_ab.txt", directory / f"{base}_ab.json"
    table_path.write_text(table + "\n")
    json_path.write_text(json.dumps(comparison, indent=2))
    return ABOutcome(native, a2a, comparison, table, table_path, json_path)


def default_run_name(settings: RunSettings) -> str:
    model = re.sub(r"[^A-Za-z0-9._-]+", "-", settings.agent_llm or "").strip("-")
    return f"ab_{settings.domain}_{model}_{datetime.now().strftime('%Y%m%dT%H%M%S')}"


def agent_llm_args(settings: RunSettings) -> dict[str, Any]:
    """The LiteLLM arguments tau2's run_domain gives its agent, for the A2A arm's agent too."""
    args = dict(settings.agent_llm_args or {})
    args["num_retries"] = settings.max_retries
    if settings.agent_api_key:
        args["api_key"] = os.getenv(settings.agent_api_key) or "dummy_key"
    if "base_url" in args:
        args["base_url"] = args["base_url"].removesuffix("/chat/completions")
    return args


def _run_native(settings: RunSettings) -> Arm:
    started = time.perf_counter()
    outcome = evaluate(settings)
    wall = time.perf_counter() - started
    return Arm(outcome.results, outcome.results_path, wall, _trajectory_usage(outcome.results, settings.agent_llm))


def _run_a2a(settings: RunSettings) -> Arm:
    model = settings.agent_llm or ""
    executor = LLMExecutor(model, agent_llm_args(settings))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with BackgroundServer(a2a_app(executor, llm_agent_card(url, model)), port=port):
        started = time.perf_counter()
        outcome = evaluate(settings.with_changes(agent=A2A_AGENT, a2a=A2AConfig(endpoint=url)))
        wall = time.perf_counter() - started
    protocol = outcome.metrics["run"] if outcome.metrics else None
    return Arm(outcome.results, outcome.results_path, wall, _trajectory_usage(outcome.results, model), protocol)


def _trajectory_usage(results: Results, model: str | None) -> Usage:
    """Each reply's LLM usage and cost, as kept in the trajectory: by tau2's llm_agent
    natively, and by the A2A client from the usage the baseline agent reports. The cost is
    unknown (None) when a reply's is, or when LiteLLM has no price for the model (tau2's
    llm_agent then records 0.0)."""
    usage = Usage(cost=0.0 if known_model(model) else None)
    for simulation in results.simulations:
        for message in simulation.messages:
            if isinstance(message, AssistantMessage) and message.usage is not None:
                usage.add(Usage(calls=1, prompt_tokens=int(message.usage.get("prompt_tokens") or 0),
                                completion_tokens=int(message.usage.get("completion_tokens") or 0),
                                cost=_cost(message.cost)))
    return usage


def _cost(value: float | None) -> float | None:
    """A reply's cost: unknown (None, or NaN) stays unknown."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _number(value: float | None) -> float:
    """A cost as a number: unknown (None) or NaN counts as 0.0."""
    return 0.0 if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _reward(simulation: SimulationRun) -> float:
    return _number(simulation.reward_info.reward if simulation.reward_info else None)


def _turn_latencies_ms(results: Results) -> list[float]:
    """Time from the message an agent answered to its reply, from the trajectory's timestamps."""
    latencies = []
    for simulation in results.simulations:
        messages = simulation.messages
        for previous, message in zip(messages, messages[1:]):
            if isinstance(message, AssistantMessage) and previous.timestamp and message.timestamp:
                delta = datetime.fromisoformat(message.timestamp) - datetime.fromisoformat(previous.timestamp)
                latencies.append(delta.total_seconds() * 1000.0)
    return latencies


# What a simulation's score is read from (`compare.runs.scored_tasks`).
SCORE_FIELDS: dict[str, bool | set[str]] = {"task_id": True, "trial": True, "termination_reason": True,
                                            "reward_info": {"reward"}}


def _pass_hat_ks(results: Results) -> dict[str, float]:
    """tau2's pass^k (`compare.stats`), from what the results file keeps of each simulation's score."""
    scored = [simulation.model_dump(mode="json", include=SCORE_FIELDS) for simulation in results.simulations]
    return {f"pass^{k}": round(float(value), 4)
            for k, value in stats.pass_hat_ks(list(scored_tasks(scored).values())).items()}


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _arm_summary(arm: Arm) -> ArmSummary:
    simulations = arm.results.simulations
    latencies = _turn_latencies_ms(arm.results)
    summary: ArmSummary = {
        "results": str(arm.results_path),
        "simulations": len(simulations),
        "average_reward": _rounded(stats.average(_reward(s) for s in simulations), 4),
        **_pass_hat_ks(arm.results),
        "agent_llm_calls": arm.usage.calls,
        "agent_prompt_tokens": arm.usage.prompt_tokens,
        "agent_completion_tokens": arm.usage.completion_tokens,
        "agent_cost_usd": _rounded(arm.usage.cost, 6),
        "agent_turn_latency_ms_p50": _rounded(stats.percentile(latencies, 50), 1),
        "agent_turn_latency_ms_p95": _rounded(stats.percentile(latencies, 95), 1),
        "mean_simulation_s": _rounded(stats.average(float(s.duration) for s in simulations), 3),
        "wall_time_s": round(arm.wall_seconds, 3),
    }
    if arm.protocol is not None:
        summary["a2a_requests"] = arm.protocol["requests"]
        summary["a2a_failed_requests"] = arm.protocol["failed_requests"]
        summary["a2a_request_ms_p50"] = arm.protocol["latency_ms"]["p50"]
        summary["a2a_bytes_sent"] = arm.protocol["bytes"]["request"]
        summary["a2a_bytes_received"] = arm.protocol["bytes"]["response"]
    return summary


def compare(native: Arm, a2a: Arm, settings: RunSettings) -> Comparison:
    """Both arms side by side, and how far they agree task by task."""
    left = {(s.task_id, s.trial): s for s in native.results.simulations}
    right = {(s.task_id, s.trial): s for s in a2a.results.simulations}
    shared = sorted(set(left) & set(right), key=lambda key: (str(key[0]), key[1] or 0))
    agreement = {"both_pass": 0, "both_fail": 0, "differ": 0}
    differing: list[Differing] = []
    same_trajectory = 0
    for key in shared:
        passed = stats.is_success(_reward(left[key])), stats.is_success(_reward(right[key]))
        if passed[0] and passed[1]:
            agreement["both_pass"] += 1
        elif not passed[0] and not passed[1]:
            agreement["both_fail"] += 1
        else:
            agreement["differ"] += 1
            differing.append({"task_id": key[0], "trial": key[1],
                              "native_reward": _reward(left[key]), "a2a_reward": _reward(right[key])})
        same_trajectory += trajectory_signature(left[key]) == trajectory_signature(right[key])
    return {
        "domain": settings.domain,
        "model": settings.agent_llm,
        "user": settings.user,
        "user_llm": settings.user_llm,
        "num_trials": settings.num_trials,
        "seed": settings.seed,
        "arms": {"native": _arm_summary(native), "a2a": _arm_summary(a2a)},
        "agreement": {"both_pass": agreement["both_pass"], "both_fail": agreement["both_fail"],
                      "differ": agreement["differ"], "pairs": len(shared),
                      "only_in_one_arm": len(set(left) ^ set(right)),
                      "identical_trajectories": same_trajectory, "differing": differing},
    }


_ROWS = [
    ("simulations", "simulations", "{}"),
    ("average reward", "average_reward", "{:.4f}"),
    ("agent LLM calls", "agent_llm_calls", "{}"),
    ("agent prompt tokens", "agent_prompt_tokens", "{}"),
    ("agent completion tokens", "agent_completion_tokens", "{}"),
    ("agent cost (USD)", "agent_cost_usd", "{:.4f}"),
    ("agent turn latency p50 (ms)", "agent_turn_latency_ms_p50", "{:.1f}"),
    ("agent turn latency p95 (ms)", "agent_turn_latency_ms_p95", "{:.1f}"),
    ("mean simulation time (s)", "mean_simulation_s", "{:.3f}"),
    ("wall time (s)", "wall_time_s", "{:.1f}"),
    ("A2A requests (failed)", "a2a_requests", "{}"),
    ("A2A request p50 (ms)", "a2a_request_ms_p50", "{:.1f}"),
    ("A2A bytes sent / received", "a2a_bytes_sent", "{}"),
]


def format_table(comparison: Comparison) -> str:
    """The side-by-side table printed at the end of `tau2-a2a ab`."""
    native, a2a = comparison["arms"]["native"], comparison["arms"]["a2a"]
    pass_rows = [(key, key, "{:.4f}") for key in native if key.startswith("pass^")]
    rows = _ROWS[:2] + pass_rows + _ROWS[2:]

    def cell(summary: ArmSummary, key: str, fmt: str) -> str:
        value = summary.get(key)
        if value is None:
            return "not reported" if key == "agent_cost_usd" else "-"
        if key == "a2a_requests":
            return f"{value} ({summary['a2a_failed_requests']})"
        if key == "a2a_bytes_sent":
            return f"{value} / {summary['a2a_bytes_received']}"
        return fmt.format(value)

    width = max(len(label) for label, _, _ in rows) + 2
    lines = [
        f"Protocol A/B on {comparison['domain']}: model {comparison['model']}, user {comparison['user']}"
        f" ({comparison['user_llm']}), {comparison['num_trials']} trial(s), seed {comparison['seed']}",
        f"{'':{width}}{ARM_TITLES['native']:>24}{ARM_TITLES['a2a']:>26}",
    ]
    for label, key, fmt in rows:
        lines.append(f"{label:{width}}{cell(native, key, fmt):>24}{cell(a2a, key, fmt):>26}")
    agreement = comparison["agreement"]
    lines.append(
        f"per-task agreement over {agreement['pairs']} (task, trial) pairs: both pass {agreement['both_pass']}, "
        f"both fail {agreement['both_fail']}, differ {agreement['differ']}"
        + (f", only in one arm {agreement['only_in_one_arm']}" if agreement["only_in_one_arm"] else "")
    )
    lines.append(f"identical trajectories (calls, arguments, results, texts): "
                 f"{agreement['identical_trajectories']}/{agreement['pairs']}")
    for row in agreement["differing"]:
        lines.append(f"  differs: task {row['task_id']} trial {row['trial']}: "
                     f"native {row['native_reward']:.2f}, A2A {row['a2a_reward']:.2f}")
    return "\n".join(lines)
