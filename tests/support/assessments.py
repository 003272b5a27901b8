"""AgentBeats assessments sent to the evaluation service, and the result its gateway reads."""

from __future__ import annotations

from typing import Any

import jsonschema
from a2a.helpers import get_data_parts

from tau2_a2a.service.result import schema
from tests.support.service import assessment_message, final_task, stream_message


def request(endpoint: str, **config: Any) -> dict[str, Any]:
    return {"participants": {"agent": endpoint}, "config": {"domain": "airline", "user": "scripted_user", **config}}


async def assess(url: str, body: dict[str, Any], *, as_data: bool = False, card: Any = None) -> tuple[list, Any]:
    """The streamed events of one assessment and the final task (as the service keeps it)."""
    events = await stream_message(url, assessment_message(body, as_data=as_data), card=card)
    task_id = events[0].task.id
    return events, await final_task(url, task_id, card=card)


def result_of(task: Any) -> dict[str, Any]:
    """As AgentBeats' gateway does: every data part of every artifact of the final task; here, one."""
    datas = [data for artifact in task.artifacts for data in get_data_parts(list(artifact.parts))]
    assert len(datas) == 1, datas
    jsonschema.validate(datas[0], schema())
    return datas[0]
