"""ADK's A2A executor, configured for assessments: a `Result` artifact, and refusals as `rejected`.

ADK's `A2aAgentExecutor` turns an agent's last event into one artifact with
no name, and any error event into a `failed` task. Its documented extension
point, execute interceptors, lets the service say more without replacing it:

- an event the agent marks with `custom_metadata[ARTIFACT_KEY] = name`
  becomes an artifact of that name (a status update with no message follows,
  so the executor adds no second, unnamed artifact, and completes the task);
- a final `failed` status whose error code is REJECTED becomes `rejected`:
  the service declined the request, nothing ran.

Its request converter also tells the agent which A2A task it serves
(`TASK_KEY` in the run config's custom metadata): the service links that task
to the evaluation it starts, so that after a restart another execution can
continue the task (`resume`, set only by the service itself through the call
context's state, never by a client).

`adk web|api_server --a2a` build their executor without a config, so under
them the artifact has no name, refusals end `failed`, and an A2A task is not
continued after a restart (the evaluation still is); the parts are the same.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from google.adk.a2a.converters.request_converter import convert_a2a_request_to_agent_run_request
from google.adk.a2a.converters.utils import ADK_METADATA_KEY_PREFIX
from google.adk.a2a.executor.config import A2aAgentExecutorConfig, ExecuteInterceptor

from tau2_a2a.service.request_limit import CUT_KEY

if TYPE_CHECKING:
    from a2a.server.agent_execution import RequestContext
    from a2a.server.events import Event as A2AEvent
    from a2a.types import TaskStatusUpdateEvent
    from google.adk.a2a.converters.part_converter import A2APartToGenAIPartConverter
    from google.adk.a2a.converters.request_converter import AgentRunRequest
    from google.adk.a2a.executor.executor_context import ExecutorContext
    from google.adk.events import Event

ARTIFACT_KEY = "tau2_a2a_artifact"
TASK_KEY = "tau2_eval_task"  # run config custom metadata: {"task_id", "context_id", "resume", "cut"}
RESUME_STATE = "tau2_eval_resume"  # call context state: the evaluation a continued task follows
REJECTED = "REJECTED"
_ERROR_CODE_KEY = f"{ADK_METADATA_KEY_PREFIX}error_code"


async def _named_artifact(executor_context: ExecutorContext, a2a_event: A2AEvent,
                          adk_event: Event) -> A2AEvent | list[A2AEvent]:
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


async def _rejected(executor_context: ExecutorContext, final_event: TaskStatusUpdateEvent) -> TaskStatusUpdateEvent:
    from a2a.types import TaskState

    status = final_event.status
    metadata = status.message.metadata  # a protobuf Struct
    if status.state == TaskState.TASK_STATE_FAILED and _ERROR_CODE_KEY in metadata \
            and metadata[_ERROR_CODE_KEY] == REJECTED:
        status.state = TaskState.TASK_STATE_REJECTED
    return final_event


def _request_with_task(request: RequestContext, part_converter: A2APartToGenAIPartConverter) -> AgentRunRequest:
    """ADK's own conversion, plus the A2A task the agent serves and whether it continues one."""
    run_request = convert_a2a_request_to_agent_run_request(request, part_converter)
    state = request.call_context.state if request.call_context is not None else {}
    assert run_request.run_config is not None  # ADK's conversion always makes one
    custom = dict(run_request.run_config.custom_metadata or {})
    message = request.message
    cut = message.metadata[CUT_KEY] if message is not None and CUT_KEY in message.metadata else None
    custom[TASK_KEY] = {"task_id": request.task_id, "context_id": request.context_id,
                        "resume": state.get(RESUME_STATE), "cut": dict(cut) if cut is not None else None}
    run_request.run_config.custom_metadata = custom
    return run_request


def executor_config() -> A2aAgentExecutorConfig:
    """The config `tau2-a2a serve` gives ADK's A2aAgentExecutor."""
    return A2aAgentExecutorConfig(request_converter=_request_with_task, execute_interceptors=[
        ExecuteInterceptor(after_event=_named_artifact, after_agent=_rejected),
    ])
