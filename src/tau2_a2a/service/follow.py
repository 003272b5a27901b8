"""Following an evaluation to its end: progress updates, then its ending, as typed values.

The service's executor turns them into A2A events (executor.py); the ADK agent
that serves `adk web|api_server --a2a` and the model's turns turns them into
ADK events (evaluator_agent.py). Whoever stops following (the A2A task was
canceled, its run ended early) cancels the evaluation: nobody would see it. A
service that stops leaves both to the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from tau2_a2a.service import summary
from tau2_a2a.service.assessment import Assessment
from tau2_a2a.service.jobs.evaluation import TERMINAL, EvaluationView, Status
from tau2_a2a.service.result import ARTIFACT_NAME, build_result, result_notes
from tau2_a2a.service.tools import EvaluationTools
from tau2_a2a.service.wire import JsonObject

_UPDATE_KEYS = ("evaluation_id", "status", "domain", "queue_position", "progress")


@dataclass(frozen=True)
class Update:
    """A progress update: text and data, sent as a `working` status message."""

    text: str
    data: JsonObject


@dataclass(frozen=True)
class Ending:
    """How the evaluation ended: `failed` (the text says why), else its answer (an artifact named `name`)."""

    text: str
    data: JsonObject | None
    failed: bool = False
    name: str | None = None  # the artifact's name: `Result` for an assessment


async def follow(tools: EvaluationTools, evaluation_id: str, assessment: Assessment | None = None,
                 poll_seconds: float = 0.5) -> AsyncIterator[Update | Ending]:
    """Progress updates until the evaluation ends, then its Ending."""
    manager = tools.manager
    seen = None
    try:
        while True:
            view = await asyncio.to_thread(manager.get, evaluation_id)
            if view.status in TERMINAL:
                break
            now = (view.status, view.queue_position, view.progress)
            if now != seen:
                seen = now
                data = view.to_json()
                update = progress_data(view) if assessment else {key: data.get(key) for key in _UPDATE_KEYS}
                yield Update(summary.progress_text(data), update)
            await asyncio.sleep(poll_seconds)
    except (asyncio.CancelledError, GeneratorExit):
        if not manager.closing:
            manager.cancel(evaluation_id, wait=False)
            manager.task_followed(evaluation_id)
        raise
    yield await ending(tools, view, assessment)
    await asyncio.to_thread(manager.task_followed, evaluation_id)


async def ending(tools: EvaluationTools, view: EvaluationView, assessment: Assessment | None) -> Ending:
    """An ended evaluation's answer: its summary and record; for an assessment, the `Result` (any other ending
    than completed fails the task with why)."""
    record = tools.answer(view)
    text = summary.text(record)
    if assessment is None:
        return Ending(text, record, failed=view.status == Status.FAILED)
    text = "\n".join([text, *result_notes(assessment)])
    if view.status != Status.COMPLETED:
        return Ending(text, None, failed=True)
    results = await asyncio.to_thread(summary.read_results, tools.manager.results_path(view.evaluation_id))
    return Ending(text, build_result(record, results, assessment, record.get("report_url")), name=ARTIFACT_NAME)


def progress_data(view: EvaluationView) -> JsonObject:
    """An assessment's progress update: simulations done, total, average reward so far."""
    progress = view.progress
    return {"evaluation_id": view.evaluation_id, "status": view.status.value, "queue_position": view.queue_position,
            "done": progress.simulations_done if progress else 0, "total": view.record.total_simulations,
            "avg_reward_so_far": progress.avg_reward_so_far if progress else None}
