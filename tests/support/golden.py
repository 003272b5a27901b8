"""What an agent that plays each task's golden actions must leave: the tool calls tau2's trajectory records."""

from __future__ import annotations

from typing import Any

from tau2_a2a.tau2bench.seam.distribution import load_tasks


def golden_calls(domain: str, task_ids: list[str]) -> dict[str, list[tuple[str, dict]]]:
    """Each task's golden actions for the agent, as (tool name, arguments)."""
    tasks = {task.id: task for task in load_tasks(domain)}
    return {
        task_id: [(a.name, a.arguments) for a in tasks[task_id].evaluation_criteria.actions
                  if a.requestor == "assistant"]
        for task_id in task_ids
    }


def trajectory_calls(outcome: Any) -> dict[str, list[tuple[str, dict]]]:
    """Each simulation's tool calls, in the order its trajectory holds them, by task id."""
    return {
        s.task_id: [(c.name, c.arguments) for m in s.messages for c in (getattr(m, "tool_calls", None) or [])]
        for s in outcome.results.simulations
    }


def rewards(outcome: Any) -> dict[str, float]:
    return {s.task_id: s.reward_info.reward for s in outcome.results.simulations}
