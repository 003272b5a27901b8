"""How a run ended, as its caller sees it: the outcome, the summary printed, and the exit code.

Exit codes of a run (`tau2-a2a run`, and the service's evaluation processes):
0 every simulation ran without an A2A error; 3 some simulations ended with A2A
errors (they score 0; the last line says how many and why); 2 the run could
not start or was stopped (bad setting, agent unreachable, card invalid, token
refused, before or during the run; finished simulations are kept); 1 a
simulation's Ray worker died three times; 130 stopped by Ctrl-C, 143 by SIGTERM
(finished simulations are kept).

A simulation tau2 itself could not finish or score (upstream's infrastructure
error: e.g. its LLM judge of natural-language assertions unreachable, after
its retries) does not change the exit code, as in `tau2 run`; a line on
stderr says how many, for which tasks and why, since tau2 leaves them out of
its metrics and still ends with "Successfully completed all simulations!".
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tau2_a2a.client.errors import A2AFailure, AgentAuthError
from tau2_a2a.errors import ConfigError
from tau2_a2a.runner.interrupt import EXIT_INTERRUPTED

__all__ = ["EXIT_A2A_ERRORS", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "RunOutcome",
           "RunStopped", "SimulationLost", "exit_code_for", "print_outcome"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_A2A_ERRORS = 3


@dataclass
class RunOutcome:
    results: Any  # tau2's Results
    results_path: Path
    metrics_path: Path | None
    metrics: dict[str, Any] | None  # the protocol metrics file's content (None for tau2's own agents)


class RunStopped(AgentAuthError):
    """A run stopped because the agent refused our credentials mid-way; its finished simulations are kept."""


class SimulationLost(RuntimeError):
    """A simulation's Ray worker died more than its retries allow; the finished simulations are kept."""


# What a run's messages say to do next: words the outcome file marks, so another edge can say it its own way.
RESUME = "re-run the same command to resume"  # a run stopped early: its finished simulations are kept
RETRY = "running the same command again retries them"  # simulations tau2 could not score

INFRASTRUCTURE_ERROR = "infrastructure_error"  # upstream's TerminationReason for a simulation it gave up on
JUDGE_MODULE = "evaluator_nl_assertions"  # where upstream's judge of natural-language assertions raises


def print_outcome(outcome: RunOutcome) -> int:
    """Print the protocol summary and where the files are; the last lines and exit code say if A2A errors
    ended simulations (3) or tau2 could not score some (1: the run is incomplete, and running it again
    retries those)."""
    unscored = infrastructure_error_line(outcome.results)
    failed = None
    if outcome.metrics is not None:  # an A2A agent (tau2 printed its metrics for its own agents)
        print(format_summary(outcome.metrics))
        print(f"Results: {outcome.results_path}\nProtocol metrics: {outcome.metrics_path}", flush=True)
        failed = a2a_error_line(outcome.metrics, outcome.metrics_path)
    for line in (failed, unscored):
        if line:
            print(line, file=sys.stderr, flush=True)
    if unscored:
        return EXIT_FAILED
    return EXIT_A2A_ERRORS if failed else EXIT_OK


def left_out_of_metrics(simulation: Mapping[str, object]) -> bool:
    """A simulation tau2 leaves out of its metrics and pass^k: one it gave up on (upstream's infrastructure
    error), which has no reward."""
    return simulation.get("termination_reason") == INFRASTRUCTURE_ERROR


def infrastructure_error_line(results: Any) -> str | None:
    """'1 of 4 simulations were not scored: ...' for the simulations tau2 ended as infrastructure errors, or None."""
    simulations = list(getattr(results, "simulations", None) or [])
    failed = [s for s in simulations if getattr(s.termination_reason, "value", s.termination_reason)
              == INFRASTRUCTURE_ERROR]
    if not failed:
        return None
    which = ", ".join(f"task {s.task_id} trial {s.trial}" for s in failed[:5]) + (", ..." if len(failed) > 5 else "")
    info = failed[0].info or {}
    error = (str(info.get("error") or "").strip().splitlines() or ["no error recorded"])[0][:300].rstrip(".")
    if JUDGE_MODULE in str(info.get("error_traceback") or ""):
        error = (f"tau2's LLM judge of natural-language assertions failed with {error}; point LiteLLM at the judge "
                 "with OPENAI_API_KEY, and OPENAI_API_BASE for another endpoint (see docs/judge.md)")
    return (f"{len(failed)} of {len(simulations)} simulations were not scored (tau2 ended them as infrastructure "
            f"errors and leaves them out of its metrics: {which}): {error}; {RETRY}.")


def exit_code_for(error: BaseException) -> int | None:
    """The exit code of a run that raised `error`, when it is one a run ends with; None otherwise."""
    if isinstance(error, (A2AFailure, ConfigError)):
        return EXIT_USAGE
    if isinstance(error, SimulationLost):
        return EXIT_FAILED
    return None


def a2a_error_line(metrics: dict[str, Any], metrics_file: Path | None) -> str | None:
    """'3 of 10 simulations ended with A2A errors (timeout=2, http=1): ...', or None when none did."""
    ended = metrics["run"].get("simulations_ended_by_a2a_errors") or {}
    if not ended:
        return None
    kinds = ", ".join(f"{kind}={count}" for kind, count in sorted(ended.items(), key=lambda item: (-item[1], item[0])))
    where = f"; see {metrics_file}" if metrics_file else ""
    return (f"{sum(ended.values())} of {metrics['run']['simulations']} simulations ended with A2A errors "
            f"({kinds}): they score 0{where}")


def format_summary(metrics: dict[str, Any]) -> str:
    """The short summary of a run's protocol metrics, printed at its end."""
    run = metrics["run"]
    latency = run["latency_ms"]
    errors = ", ".join(f"{k}={v}" for k, v in sorted(run["errors_by_category"].items())) or "none"
    return "\n".join(
        [
            "A2A protocol metrics",
            f"  simulations: {run['simulations']}   requests: {run['requests']}"
            f"   failed: {run['failed_requests']} ({errors})",
            f"  latency ms: p50 {latency['p50']}   p95 {latency['p95']}   max {latency['max']}"
            f"   first event p50 {run['first_event_ms']['p50']}",
            f"  transports: {', '.join(f'{k}={v}' for k, v in sorted(run['transports'].items())) or '-'}"
            f"   events: {run['events']}",
            f"  A2A message text, tokens: sent {run['tokens']['input']}   received {run['tokens']['output']}"
            f"   bytes: sent {run['bytes']['request']}   received {run['bytes']['response']}",
            usage_line(run.get("agent_usage")),
            f"  time in A2A calls: {run['a2a_time_s']} s   local simulation time: {run['local_time_s']} s",
            f"  unknown tool calls: {run['unknown_tool_calls']}",
            *cost_lines(run),
        ]
    )


def usage_line(usage: dict[str, Any] | None) -> str:
    """The LLM usage the agent reported: whole, a lower bound when some replies reported none or part of it, or
    not reported."""
    if not usage or usage.get("input") is None:
        return "  agent's reported LLM usage, tokens: not reported"
    lacking = []
    if usage["replies_with_usage"] < usage["replies"]:
        lacking.append(f"{usage['replies_with_usage']} of {usage['replies']} replies reported it")
    if usage.get("replies_with_partial_usage"):
        lacking.append(f"{usage['replies_with_partial_usage']} only in part: some LLM calls' usage was not in the "
                       "reply; stream (--a2a-streaming) to count every call")
    if lacking:
        return (f"  agent's reported LLM usage, tokens: at least in {usage['input']}   out {usage['output']}"
                f"   ({'; '.join(lacking)})")
    return f"  agent's reported LLM usage, tokens: in {usage['input']}   out {usage['output']}"


def usd(value: float | None) -> str:
    """A cost as the summaries show it: dollars, or "not reported" (never $0 for an unknown)."""
    return "not reported" if value is None else f"${value:.4f}"


def cost_lines(run: dict[str, Any]) -> list[str]:
    """What a conversation cost on average, by whom, and where the run's time went."""
    per = run.get("cost_usd_per_simulation")
    if not per:
        return []
    lines = ["  cost per conversation: " + "   ".join(f"{who} {usd(per.get(who))}"
                                                  for who in ("agent", "user", "judge", "total"))]
    reported = run.get("cost_reported_by") or {}
    if per.get("agent") is None and reported.get("agent"):
        lines.append(f"    the agent reported its cost in {reported['agent']} of {run['simulations']} simulations")
    phases = run.get("time_s_by_phase")
    if phases:
        lines.append("  time by phase: " + "   ".join(f"{phase} {seconds} s" for phase, seconds in phases.items()))
    return lines
