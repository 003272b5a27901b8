"""The service's A2A request handler: a2a-sdk's, with what the service adds in front of its task store.

- A target's token leaves the message before the task store keeps it (vault.py),
  and a message over --max-message-bytes is cut (request_limit.py).
- A read-only tool call is answered at once with a Message (reads.py).
- GetTask reads through connections of its own when given a reader.
- A task whose execution stopped with its service is continued by another
  replica: the agent runs again on the task's first message, following the
  evaluation it started (executor.py's RESUME_STATE).
- CancelTask of a task another replica runs stops the evaluation it follows at
  once. a2a-sdk records CANCELED in the shared task store and leaves the
  replica running the task to notice at its next write, a progress update,
  which a slow agent may not bring for minutes.

Only the serving path imports this module (a2a-sdk's server is heavy).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler, validate_request_params
from a2a.types import Role
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from a2a.utils.task import apply_history_length, validate_history_length

from tau2_a2a.service.a2a_sdk_internals import run_again, runs_here, stored_task
from tau2_a2a.service.executor import RESUME_STATE
from tau2_a2a.service.reads import read_only_reply
from tau2_a2a.service.request_limit import DEFAULT_MAX_MESSAGE_BYTES, cut_message
from tau2_a2a.service.vault import scrub_a2a_message

if TYPE_CHECKING:
    from a2a.server.cluster import VersionedTaskStore
    from a2a.server.events import Event
    from a2a.types import CancelTaskRequest, GetTaskRequest, Message, SendMessageRequest, Task

    from tau2_a2a.service.tools import EvaluationTools


def _scrubbed(message: Message, max_bytes: int) -> None:
    """The message's secrets moved out before anything stores it, and a message over `max_bytes` cut (it is then
    rejected: request_limit.py); one it cannot read is the caller's error."""
    if cut_message(message, max_bytes) is not None:
        return
    try:
        scrub_a2a_message(message)
    except ValueError as error:  # a data part holding Infinity or NaN has no JSON form
        raise InvalidParamsError(message=f"A data part of the message cannot be read as JSON ({error}): "
                                         "send finite numbers only.") from None


class ServiceRequestHandler(DefaultRequestHandler):
    """a2a-sdk's handler, plus: a target's token leaves the message before the task store keeps it,
    a read-only tool call is answered with a Message (reads.py), and a task whose execution stopped
    with its service can be continued by another."""

    # *args and **kwargs: DefaultRequestHandler's own parameters, passed on as they are.
    def __init__(self, *args: Any, tools: EvaluationTools, task_reader: VersionedTaskStore | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tools = tools
        self.task_reader = task_reader  # GetTask reads through it when given
        self.max_message_bytes = max_message_bytes

    @validate_request_params
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        if self.task_reader is None:
            return await super().on_get_task(params, context)
        validate_history_length(params)
        stored = await self.task_reader.get(params.id, context)
        if stored is None:
            raise TaskNotFoundError
        return apply_history_length(stored.task, params)

    @validate_request_params
    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        _scrubbed(params.message, self.max_message_bytes)
        reply = await read_only_reply(self.tools, params.message)
        if reply is not None:
            return reply
        return await super().on_message_send(params, context)

    @validate_request_params
    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext) -> AsyncIterator[Event]:
        _scrubbed(params.message, self.max_message_bytes)
        reply = await read_only_reply(self.tools, params.message)
        if reply is not None:
            yield reply
            return
        async for event in super().on_message_send_stream(params, context):
            yield event

    @validate_request_params
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        elsewhere = not await runs_here(self, params.id)
        task = await super().on_cancel_task(params, context)
        if elsewhere:  # here, canceling the agent's coroutine cancels the evaluation (evaluator_agent.py)
            await asyncio.to_thread(self._cancel_followed_evaluation, params.id)
        return task

    def _cancel_followed_evaluation(self, task_id: str) -> None:
        """Ask the evaluation that the A2A task `task_id` follows to stop, wherever it runs (the database)."""
        manager = self.tools.manager
        evaluation_id = manager.evaluation_of_task(task_id)
        if evaluation_id is not None:
            manager.cancel(evaluation_id, wait=False)

    async def continue_task(self, task_id: str, evaluation_id: str) -> bool:
        """Run the agent again on the task's first message, following `evaluation_id`, the way a
        new message runs it: its events reach the task store and every subscriber, on any replica.
        Whether there was a task to continue."""
        call_context = ServerCallContext(state={RESUME_STATE: evaluation_id})
        if await runs_here(self, task_id):
            return False  # it runs here already
        task = await stored_task(self, task_id, call_context)
        if task is None:
            return False
        first = next((m for m in task.history if m.role == Role.ROLE_USER), None)
        if first is None or task.status.state in TERMINAL_TASK_STATES:
            return False
        await run_again(self, task, first, call_context)
        return True
