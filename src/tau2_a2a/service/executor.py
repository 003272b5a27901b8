"""ADK's A2A executor, configured for assessments: a `Result` artifact, and refusals as `rejected`.

ADK's `A2aAgentExecutor` turns an agent's last event into one artifact with
no name, and any error event into a `failed` task. Its documented extension
point, execute interceptors, lets the service say more without replacing it:

- an event the agent marks with `custom_metadata[ARTIFACT_KEY] = name`
  becomes an artifact of that name (a status update with no message follows,
  so the executor adds no second, unnamed artifact, and completes the task);
- a final `failed` status whose error code is REJECTED becomes `rejected`:
  the service declined the request, nothing ran.

`adk web|api_server --a2a` build their executor without a config, so under
them the artifact has no name and refusals end `failed`; the parts are the same.
"""

from __future__ import annotations

import uuid
from typing import Any

from google.adk.a2a.converters.utils import ADK_METADATA_KEY_PREFIX
from google.adk.a2a.executor.config import A2aAgentExecutorConfig, ExecuteInterceptor

ARTIFACT_KEY = "tau2_a2a_artifact"
REJECTED = "REJECTED"
_ERROR_CODE_KEY = f"{ADK_METADATA_KEY_PREFIX}error_code"


async def _named_artifact(executor_context: Any, a2a_event: Any, adk_event: Any) -> Any:
    from a2a.types import Artifact, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent

    name = (getattr(adk_event, "custom_metadata", None) or {}).get(ARTIFACT_KEY)
    if not name or not isinstance(a2a_event, TaskStatusUpdateEvent) or not a2a_event.status.message.parts:
        return a2a_event
    artifact = TaskArtifactUpdateEvent(
        task_id=a2a_event.task_id, context_id=a2a_event.context_id, last_chunk=True,
        artifact=Artifact(artifact_id=str(uuid.uuid4()), name=name, parts=a2a_event.status.message.parts),
    )
    cleared = TaskStatusUpdateEvent(task_id=a2a_event.task_id, context_id=a2a_event.context_id,
                                    status=TaskStatus(state=TaskState.TASK_STATE_WORKING))
    return [artifact, cleared]


async def _rejected(executor_context: Any, final_event: Any) -> Any:
    from a2a.types import TaskState

    status = final_event.status
    metadata = status.message.metadata  # a protobuf Struct
    if status.state == TaskState.TASK_STATE_FAILED and _ERROR_CODE_KEY in metadata \
            and metadata[_ERROR_CODE_KEY] == REJECTED:
        status.state = TaskState.TASK_STATE_REJECTED
    return final_event


def executor_config() -> A2aAgentExecutorConfig:
    """The config `tau2-a2a serve` gives ADK's A2aAgentExecutor."""
    return A2aAgentExecutorConfig(execute_interceptors=[
        ExecuteInterceptor(after_event=_named_artifact, after_agent=_rejected),
    ])
