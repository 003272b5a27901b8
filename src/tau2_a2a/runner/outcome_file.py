"""The outcome file: how a run ended, as data, for whoever started it (the evaluation service reads it).

`python -m tau2_a2a.runner` writes it when its run ends, however it ends:
its status, its exit code, how many simulations its results hold, and,
when it failed, the failure: its kind, the setting at fault, and its message.

The message is the run's own (`tau2-a2a run`'s words, which name its flags).
Beside it, `words` holds the same message as text and references: each
place where it names a setting (`{"setting": "a2a.auth_token"}`, a
RunSettings field) or says what to do next (`{"action": "resume"}`). Another
edge puts its own words there: the service names its `agent_auth_token`
argument where the command line names `--a2a-auth-token`, and says "send the
evaluation again" where the command line says to run the same command again.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from tau2_a2a.client.errors import A2AFailure, AgentAuthError, AgentReplyTooLarge, AgentTargetRefused, AgentTimeout
from tau2_a2a.client.targets import CLI_FLAG, TargetRefused
from tau2_a2a.errors import ConfigError
from tau2_a2a.files import PRIVATE_FILE, write_whole
from tau2_a2a.runner.interrupt import EXIT_INTERRUPTED, RunInterrupted
from tau2_a2a.runner.outcome import (
    EXIT_A2A_ERRORS,
    EXIT_FAILED,
    EXIT_OK,
    INFRASTRUCTURE_ERROR,
    RESUME,
    RETRY,
    RunOutcome,
    SimulationLost,
    exit_code_for,
    infrastructure_error_line,
)

OUTCOME_SUFFIX = "_outcome.json"

# The words of `tau2-a2a run`'s messages that name a setting (a RunSettings field) or what to do next.
CLI_TERMS: dict[str, str] = {
    "setting:a2a.auth_token": "--a2a-auth-token or TAU2_A2A_AUTH_TOKEN",
    "setting:a2a.targets": CLI_FLAG,
    "setting:a2a.endpoint": "--a2a-endpoint",
    "setting:a2a.timeout": "--a2a-timeout",
    "setting:a2a.transport": "--a2a-transport",
    "setting:a2a.max_reply_bytes": "--a2a-max-reply-bytes",
    "setting:a2a.max_request_bytes": "--a2a-max-request-bytes",
    "setting:a2a.max_tool_calls_per_reply": "--a2a-max-tool-calls-per-reply",
    "setting:a2a.max_tool_calls": "--a2a-max-tool-calls",
    "setting:a2a.max_mcp_requests": "--a2a-max-mcp-requests",
    "setting:a2a.max_agent_bytes": "--a2a-max-agent-bytes",
    "setting:retrieval_config": "--retrieval-config",
    "setting:retrieval_config_kwargs": "--retrieval-config-kwargs",
    "action:resume": RESUME,
    "action:retry": RETRY,
}
_TERMS = re.compile("|".join(re.escape(term) for term in sorted(CLI_TERMS.values(), key=len, reverse=True)))
_REFERENCES = {term: reference for reference, term in CLI_TERMS.items()}
# The setting a failure of each kind is about, whatever its message names.
_SETTING_OF = ((AgentAuthError, "a2a.auth_token"), (AgentTargetRefused, "a2a.targets"),
               (TargetRefused, "a2a.targets"), (AgentTimeout, "a2a.timeout"),
               (AgentReplyTooLarge, "a2a.max_reply_bytes"))


class RunStatus(str, Enum):
    COMPLETED = "completed"  # every simulation ran without an A2A error (exit 0)
    A2A_ERRORS = "a2a_errors"  # every simulation ran; some ended with A2A errors and score 0 (exit 3)
    INCOMPLETE = "incomplete"  # tau2 could not score some simulations (exit 1)
    FAILED = "failed"  # the run could not start, or stopped before its end
    INTERRUPTED = "interrupted"  # Ctrl-C (exit 130)

    @property
    def ran_every_simulation(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.A2A_ERRORS)


class FailureKind(str, Enum):
    SETTING = "setting"  # a setting that cannot work
    AGENT_AUTH = "agent_auth"  # the agent refused our credentials (before or during the run)
    TARGET_REFUSED = "target_refused"  # a connection the target policy does not allow
    AGENT = "agent"  # the agent cannot be evaluated: unreachable, no valid card, no binding we speak, ...
    SIMULATION_LOST = "simulation_lost"  # a Ray worker died more often than its retries allow
    UNSCORED = "unscored"  # tau2 ended simulations as infrastructure errors and left them unscored
    INTERRUPTED = "interrupted"
    CRASHED = "crashed"  # an error in tau2-a2a or tau2 itself; its traceback is in the run's log


Words = list[str | dict[str, str]]


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    message: str  # the run's own line
    words: Words = field(default_factory=list)  # the message as text and references (see the module doc)
    setting: str | None = None  # the RunSettings field at fault, when one is
    http_status: int | None = None  # the agent's answer, for a failure of the agent

    def worded(self, terms: dict[str, str]) -> str:
        """The message with `terms` ("setting:NAME" or "action:NAME" -> words) put in for the references
        they name; a reference `terms` does not name keeps the run's own words."""
        shown = []
        for part in self.words:
            if isinstance(part, str):
                shown.append(part)
            else:
                [(kind, name)] = part.items()
                shown.append(terms.get(f"{kind}:{name}") or CLI_TERMS.get(f"{kind}:{name}", name))
        return "".join(shown) if self.words else self.message


@dataclass(frozen=True)
class RunEnd:
    """How a run ended. Counts are None where the run cannot know them (a run that failed to start)."""

    status: RunStatus
    exit_code: int
    simulations: int | None = None  # in the results file
    a2a_errors: int | None = None  # of those, ended by an A2A error
    unscored: int | None = None  # of those, ended by tau2 as infrastructure errors
    failure: Failure | None = None

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunEnd:
        failure = data.get("failure")
        return cls(status=RunStatus(data["status"]), exit_code=data["exit_code"],
                   simulations=data.get("simulations"), a2a_errors=data.get("a2a_errors"),
                   unscored=data.get("unscored"),
                   failure=None if failure is None else Failure(**{**failure, "kind": FailureKind(failure["kind"])}))


def words_of(message: str) -> Words:
    """`message` as text and references, at each place it uses one of CLI_TERMS."""
    words: Words = []
    last = 0
    for found in _TERMS.finditer(message):
        if found.start() > last:
            words.append(message[last:found.start()])
        kind, name = _REFERENCES[found.group()].split(":", 1)
        words.append({kind: name})
        last = found.end()
    if last < len(message):
        words.append(message[last:])
    return words


def failure_of(error: BaseException) -> Failure:
    """The failure a run raised, as data."""
    message = str(error)
    words = words_of(message)
    setting = next((name for kind, name in _SETTING_OF if isinstance(error, kind)), None)
    setting = setting or next((part["setting"] for part in words if isinstance(part, dict) and "setting" in part),
                              None)
    if isinstance(error, RunInterrupted):
        kind = FailureKind.INTERRUPTED
    elif isinstance(error, AgentAuthError):
        kind = FailureKind.AGENT_AUTH
    elif isinstance(error, (AgentTargetRefused, TargetRefused)):
        kind = FailureKind.TARGET_REFUSED
    elif isinstance(error, A2AFailure):
        kind = FailureKind.AGENT
    elif isinstance(error, ConfigError):
        kind = FailureKind.SETTING
    elif isinstance(error, SimulationLost):
        kind = FailureKind.SIMULATION_LOST
    else:
        kind = FailureKind.CRASHED
        lines = [line.strip() for line in message.splitlines() if line.strip()]
        message = f"{type(error).__name__}: {lines[0][:300]}" if lines else type(error).__name__
        words = [message]
    status = error.status if isinstance(error, A2AFailure) else None
    return Failure(kind, message, words, setting, status)


def ended_by(error: BaseException) -> RunEnd:
    """How a run that raised `error` ended (how many simulations it kept is known after a Ctrl-C only)."""
    if isinstance(error, RunInterrupted):
        return RunEnd(RunStatus.INTERRUPTED, EXIT_INTERRUPTED, simulations=error.kept, failure=failure_of(error))
    if isinstance(error, KeyboardInterrupt):
        return RunEnd(RunStatus.INTERRUPTED, EXIT_INTERRUPTED,
                      failure=Failure(FailureKind.INTERRUPTED, "Stopped by Ctrl-C.", ["Stopped by Ctrl-C."]))
    return RunEnd(RunStatus.FAILED, exit_code_for(error) or EXIT_FAILED, failure=failure_of(error))


def ended_with(outcome: RunOutcome, exit_code: int) -> RunEnd:
    """How a run that went to its end ended, with `exit_code` (print_outcome's)."""
    simulations = list(getattr(outcome.results, "simulations", None) or [])
    ended = ((outcome.metrics or {}).get("run") or {}).get("simulations_ended_by_a2a_errors") or {}
    unscored = [s for s in simulations
                if getattr(s.termination_reason, "value", s.termination_reason) == INFRASTRUCTURE_ERROR]
    status = {EXIT_OK: RunStatus.COMPLETED, EXIT_A2A_ERRORS: RunStatus.A2A_ERRORS}.get(exit_code, RunStatus.INCOMPLETE)
    line = infrastructure_error_line(outcome.results)
    failure = None if line is None else Failure(FailureKind.UNSCORED, line, words_of(line))
    return RunEnd(status, exit_code, simulations=len(simulations), a2a_errors=sum(ended.values()),
                  unscored=len(unscored), failure=failure)


def write_outcome(path: Path, end: RunEnd) -> None:
    """Write the outcome file whole (a reader sees it complete or not at all), readable by this user only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # a run that failed early made no directory
    write_whole(path, json.dumps(end.to_json(), indent=2), PRIVATE_FILE)


def read_outcome(path: Path) -> RunEnd | None:
    """The outcome file at `path`; None when there is none (the run ended before it could write one)."""
    try:
        return RunEnd.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
