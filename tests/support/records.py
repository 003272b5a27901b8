"""Reading a run: the scripted user's task markers, simulations by task, metrics records."""

from __future__ import annotations

from typing import Any

from tau2_a2a.tau2bench.participants.oracle_script import task_marker


def marker(task: str) -> str:
    """The scripted user's marker for an airline task, as it appears in a request body."""
    return task_marker("airline", task)


def by_task(outcome: Any) -> dict[str, Any]:
    """The simulations of a one-trial run, by tau2 task id."""
    simulations = {s.task_id: s for s in outcome.results.simulations}
    assert len(simulations) == len(outcome.results.simulations), "expected one trial per task"
    return simulations


def records_of(outcome: Any, task: str) -> list[dict[str, Any]]:
    """The metrics records of a one-trial run's simulation of `task`, in order."""
    [simulation] = [s for s in outcome.metrics["simulations"] if s["task_id"] == task]
    return simulation["requests"]


def outline(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(turn, attempt, method, http_status, error) of each record: the shape of an exchange."""
    return [(r["turn"], r["attempt"], r["method"], r["http_status"], r["error"]) for r in records]
