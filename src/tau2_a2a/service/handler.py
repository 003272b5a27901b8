"""The service's A2A request handler: a2a-sdk's, with what the service adds in front of its task store.

- Each message is read once, before the task store keeps it, into a typed
  ServiceCall (call.py): cut when over --max-message-bytes, a target's token
  moved to the vault. The executor gets it through the call context's state.
- A read-only tool call is answered at once with a Message (reads.py).
- GetTask reads through connections of its own when given a reader.
- A task whose execution stopped with its service is continued by another
  replica: the executor runs again on the task's first message, following the
  evaluation it started (ServiceCall.resume).
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
from tau2_a2a.service.call import ServiceCall, read_call
from tau2_a2a.service.executor import CALL_STATE
from tau2_a2a.service.reads import read_only_reply
from tau2_a2a.service.request_limit import DEFAULT_MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    from a2a.server.cluster import VersionedTaskStore
    from a2a.server.events import Event
    from a2a.types import CancelTaskRequest, GetTaskRequest, Message, SendMessageRequest, Task

    from tau2_a2a.service.tools import EvaluationTools


class ServiceRequestHandler(DefaultRequestHandler):
    """a2a-sdk's handler, plus: each message read once into a ServiceCall before the task store keeps it,
    a read-only tool call answered with a Message (reads.py), and a task whose execution stopped with its
    service continued by another."""

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

    def _read(self, message: Message, context: ServerCallContext) -> ServiceCall:
        """The call `message` makes, read once (call.py) and handed to the executor; a message it cannot read
        is the caller's error."""
        try:
            call = read_call(message, self.max_message_bytes)
        except ValueError as error:  # a data part holding Infinity or NaN has no JSON form
            raise InvalidParamsError(message=f"A data part of the message cannot be read as JSON ({error}): "
                                             "send finite numbers only.") from None
        context.state[CALL_STATE] = call
        return call

    @validate_request_params
    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        call = self._read(params.message, context)
        reply = await read_only_reply(self.tools, params.message, call)
        if reply is not None:
            return reply
        return await super().on_message_send(params, context)

    @validate_request_params
    async def on_message_send_stream(self, params: SendMessageRequest,
                                     context: ServerCallContext) -> AsyncIterator[Event]:
        call = self._read(params.message, context)
        reply = await read_only_reply(self.tools, params.message, call)
        if reply is not None:
            yield reply
            return
        async for event in super().on_message_send_stream(params, context):
            yield event

    @validate_request_params
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        elsewhere = not await runs_here(self, params.id)
        task = await super().on_cancel_task(params, context)
        if elsewhere:  # here, canceling the executor's coroutine cancels the evaluation (follow.py)
            await asyncio.to_thread(self._cancel_followed_evaluation, params.id)
        return task

    def _cancel_followed_evaluation(self, task_id: str) -> None:
        """Ask the evaluation that the A2A task `task_id` follows to stop, wherever it runs (the database)."""
        manager = self.tools.manager
        evaluation_id = manager.evaluation_of_task(task_id)
        if evaluation_id is not None:
            manager.cancel(evaluation_id, wait=False)

    async def continue_task(self, task_id: str, evaluation_id: str) -> bool:
        """Run the executor again on the task's first message, following `evaluation_id`, the way a
        new message runs it: its events reach the task store and every subscriber, on any replica.
        Whether there was a task to continue."""
        call_context = ServerCallContext()
        if await runs_here(self, task_id):
            return False  # it runs here already
        task = await stored_task(self, task_id, call_context)
        if task is None:
            return False
        first = next((m for m in task.history if m.role == Role.ROLE_USER), None)
        if first is None or task.status.state in TERMINAL_TASK_STATES:
            return False
        call_context.state[CALL_STATE] = read_call(first, self.max_message_bytes).resumed(evaluation_id)
        await run_again(self, task, first, call_context)
        return True
