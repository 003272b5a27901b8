"""The oracle's plan for a task, and the scripted user's part of it.

Pure logic shared by the A2A oracle server, the native oracle agent and the
scripted user, so the oracle runs turn for turn the same over A2A and natively.

A task's golden actions are cut into runs of one requestor. The oracle calls
each assistant run's tools; before each user run it asks the user in words to
do that run on their device (`handover_text`). The scripted user does those
actions with its own tools, one call per message as tau2's user simulator
does, then says it is done (`user_done_text`). The oracle's last reply is its
closing text with the task's communicate_info.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache

from tau2_a2a.tau2bench.seam.distribution import Action, Task, load_tasks

MARKER_FORMAT = "[tau2-task domain={domain} id={task_id}]"
# Telecom ids hold brackets ("[mms_issue]...[PERSONA:Easy]"): the id runs to the last "]" of the line.
_MARKER = re.compile(r"\[tau2-task domain=(?P<domain>\S+) id=(?P<task_id>.+)\][ \t]*$", re.MULTILINE)


def task_marker(domain: str, task_id: str) -> str:
    """The line the scripted user adds so an oracle can find its task."""
    return MARKER_FORMAT.format(domain=domain, task_id=task_id)


def find_marker(text: str | None) -> tuple[str, str] | None:
    """(domain, task id) named by a marker line in `text`, if any."""
    match = _MARKER.search(text or "")
    return (match["domain"], match["task_id"]) if match else None


NO_MARKER = (
    "I am the tau2 oracle: I only serve conversations whose first user message "
    "names a task with a line like [tau2-task domain=airline id=0] (use --user scripted_user)."
)


@dataclass(frozen=True)
class OracleStep:
    """One reply of the oracle: a tool call, or a text (a hand-over to the user, or its closing text)."""

    tool_name: str | None = None
    arguments: dict[str, object] | None = None  # JSON values, passed on as the call's
    text: str | None = None


@lru_cache(maxsize=8)
def _tasks(domain: str) -> dict[str, Task]:
    return {task.id: task for task in load_tasks(domain)}


def find_task(domain: str, task_id: str) -> Task:
    """A task of `domain` from any of its splits."""
    try:
        return _tasks(domain)[task_id]
    except KeyError:
        raise ValueError(f"unknown task {task_id!r} in domain {domain!r}") from None


def judged_by_llm(task: Task) -> bool:
    """Whether tau2 needs an LLM to score `task` (an NL assertion in its reward basis), so no offline run
    scores it: upstream's 40 retail tasks and banking_knowledge's task_102."""
    criteria = task.evaluation_criteria
    basis = [str(getattr(b, "value", b)).upper() for b in (criteria.reward_basis or [])] if criteria else []
    return bool(criteria and criteria.nl_assertions and "NL_ASSERTION" in basis)


def action_runs(task: Task) -> list[list[Action]]:
    """The task's golden actions, cut where the requestor changes."""
    runs: list[list[Action]] = []
    for action in (task.evaluation_criteria.actions or []) if task.evaluation_criteria else []:
        if runs and runs[-1][0].requestor == action.requestor:
            runs[-1].append(action)
        else:
            runs.append([action])
    return runs


def user_runs(task: Task) -> list[list[Action]]:
    """The user's part of the golden actions, one list per hand-over."""
    return [run for run in action_runs(task) if run[0].requestor == "user"]


def describe(actions: list[Action]) -> str:
    """Actions as calls in words: `toggle_roaming(); set_network_mode_preference(mode="4g_5g_preferred")`."""
    return "; ".join(
        f"{a.name}({', '.join(f'{k}={json.dumps(v)}' for k, v in a.arguments.items())})" for a in actions
    )


def handover_text(actions: list[Action]) -> str:
    """What the oracle tells the user to do on their device; the scripted user acts on exactly this."""
    return f"Please do this on your phone, in this order, then tell me when you are done: {describe(actions)}."


def user_done_text(actions: list[Action]) -> str:
    """What the scripted user says once it has done what the oracle asked."""
    return f"I did this on my phone: {describe(actions)}."


def oracle_steps(domain: str, task_id: str) -> list[OracleStep]:
    """The oracle's replies: assistant runs as tool calls, user runs as hand-overs, then the closing text."""
    task = find_task(domain, task_id)
    steps: list[OracleStep] = []
    for run in action_runs(task):
        if run[0].requestor == "user":
            steps.append(OracleStep(text=handover_text(run)))
        else:
            steps += [OracleStep(tool_name=a.name, arguments=dict(a.arguments)) for a in run]
    criteria = task.evaluation_criteria
    info = (criteria.communicate_info or []) if criteria else []
    steps.append(OracleStep(text=("Done. " + " ".join(str(i) for i in info)).strip()))
    return steps
