"""Compare two runs of the same tasks: do their trajectories say and do the same?

Call ids, timestamps and protocol metadata differ between a native run and an
A2A run by design; tool calls, arguments, tool results and texts must not.
"""

from __future__ import annotations

from typing import Any

from tau2_a2a.tau2bench.distribution import AssistantMessage, ToolMessage, UserMessage


def trajectory_signature(simulation: Any) -> list[tuple[Any, ...]]:
    """What a simulation did, without ids or timing: one tuple per message."""
    signature: list[tuple[Any, ...]] = []
    for message in simulation.messages:
        if isinstance(message, AssistantMessage) or isinstance(message, UserMessage):
            calls = tuple(
                (call.name, _canonical(call.arguments)) for call in (message.tool_calls or [])
            )
            signature.append((message.role, message.content, calls))
        elif isinstance(message, ToolMessage):
            signature.append(("tool", message.content, message.error))
    return signature


def _canonical(value: Any) -> Any:
    """A hashable form that keeps the int/float distinction the evaluator hashes."""
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_canonical(v) for v in value)
    return (type(value).__name__, value)


def by_task_and_trial(results: Any) -> dict[tuple[str, int | None], Any]:
    return {(s.task_id, s.trial): s for s in results.simulations}


def trajectory_differences(left: Any, right: Any) -> list[str]:
    """Task/trial keys whose trajectories differ, or that only one run has."""
    a, b = by_task_and_trial(left), by_task_and_trial(right)
    problems = [f"{key}: only in one run" for key in sorted(set(a) ^ set(b), key=str)]
    for key in sorted(set(a) & set(b), key=str):
        if trajectory_signature(a[key]) != trajectory_signature(b[key]):
            problems.append(f"{key}: trajectories differ")
    return problems
