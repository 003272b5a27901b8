"""How an evaluation ended, read from its run's outcome file, and said in the service's words.

The run writes how it ended beside its results (runner/outcome_file.py): its
status and, when it failed, the failure, whose words mark where they name a
setting or say what to do next. The service puts its own words there: its
argument `agent_auth_token` where a command line would pass a flag, its
operator's `--allowed-targets`, "send the evaluation again" where a command
line would be run again. Nothing here reads the child's log.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

from tau2_a2a.client.config import redact
from tau2_a2a.client.targets import SERVICE_FLAG
from tau2_a2a.runner.outcome_file import RunEnd, read_outcome
from tau2_a2a.service import summary
from tau2_a2a.service.jobs.directory import outcome_file, results_file
from tau2_a2a.service.jobs.evaluation import Status
from tau2_a2a.service.request import TOKEN_ARGUMENT

# The service's words for what a run's message names; one it has no words for keeps the run's.
SERVICE_TERMS = {
    "setting:a2a.auth_token": TOKEN_ARGUMENT,
    "setting:a2a.endpoint": "agent_endpoint",
    "setting:a2a.targets": SERVICE_FLAG,  # the operator's: callers choose no target policy
    "setting:retrieval_config": "retrieval_config",
    # The agent's limits: the operator's settings here (cli/serve.py).
    **{f"setting:a2a.{name}": f"the service's --agent-{name.replace('_', '-')}"
       for name in ("timeout", "max_reply_bytes", "max_request_bytes", "max_tool_calls_per_reply", "max_tool_calls",
                    "max_mcp_requests", "max_agent_bytes")},
    "action:resume": "send the evaluation again",
    "action:retry": "sending the evaluation again retries them",
}
MAX_ERROR = 600  # characters of an error kept in the record


@dataclass(frozen=True)
class Ending:
    """How one child's run of an evaluation ended, as the evaluation's record says it."""

    status: Status
    error: str | None
    ran_every_simulation: bool  # its results and metrics files are whole: the child wrote them at its end


def ending(directory: Path, code: int, canceled: bool, token: str | None) -> Ending:
    """The end of the run in `directory` whose child exited with `code` (`canceled`: the service stopped it),
    said without `token`."""
    end = read_outcome(outcome_file(directory))
    ran_every_simulation = end is not None and end.status.ran_every_simulation
    if ran_every_simulation and summary.read_results(results_file(directory)) is not None:
        return Ending(Status.COMPLETED, None, True)
    if canceled:
        return Ending(Status.CANCELED, None, ran_every_simulation)
    if end is not None and ran_every_simulation:
        return Ending(Status.FAILED, f"the evaluation's run ended {end.status.value}, but its results file is missing "
                      "or cannot be read, so there is nothing to score; send the evaluation again.", True)
    return Ending(Status.FAILED, redact(failure_text(end, code), token)[:MAX_ERROR], ran_every_simulation)


def failure_text(end: RunEnd | None, code: int) -> str:
    """Why the run failed, in the service's words."""
    if end is None:
        if code < 0:
            return f"the evaluation process was killed by {_signal_name(-code)} before its run ended."
        return f"the evaluation process exited with code {code} before its run could say how it ended."
    said = end.failure.worded(SERVICE_TERMS) if end.failure else f"its run ended {end.status.value}."
    return f"the evaluation process exited with code {code}: {said}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
