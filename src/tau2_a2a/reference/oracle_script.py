"""The oracle's plan for a task: its golden actions one by one, then its communicate_info.

Pure logic shared by the A2A oracle server and the native oracle agent, so the
two can be compared turn for turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

MARKER_FORMAT = "[tau2-task domain={domain} id={task_id}]"
_MARKER = re.compile(r"\[tau2-task domain=(?P<domain>\S+) id=(?P<task_id>[^\]]+)\]")


def task_marker(domain: str, task_id: str) -> str:
    """The line the scripted user adds so an oracle can find its task."""
    return MARKER_FORMAT.format(domain=domain, task_id=task_id)


def find_marker(text: str | None) -> tuple[str, str] | None:
    """(domain, task id) named by a marker in `text`, if any."""
    match = _MARKER.search(text or "")
    return (match["domain"], match["task_id"]) if match else None


@dataclass(frozen=True)
class OracleStep:
    """One reply of the oracle: a tool call, or its closing text."""

    tool_name: str | None = None
    arguments: dict[str, Any] | None = None
    text: str | None = None


@lru_cache(maxsize=8)
def _tasks(domain: str) -> dict[str, Any]:
    from tau2.run import load_tasks

    return {task.id: task for task in load_tasks(domain)}


def oracle_steps(domain: str, task_id: str) -> list[OracleStep]:
    """The golden assistant actions of a task, then one text with its communicate_info."""
    try:
        task = _tasks(domain)[task_id]
    except KeyError:
        raise ValueError(f"unknown task {task_id!r} in domain {domain!r}") from None
    criteria = task.evaluation_criteria
    steps = [
        OracleStep(tool_name=action.name, arguments=dict(action.arguments))
        for action in (criteria.actions or [] if criteria else [])
        if action.requestor == "assistant"
    ]
    info = (criteria.communicate_info or []) if criteria else []
    steps.append(OracleStep(text=("Done. " + " ".join(str(i) for i in info)).strip()))
    return steps
