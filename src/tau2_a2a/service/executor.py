"""The service's a2a-sdk AgentExecutor: a typed call (call.py) in, task events out through TaskUpdater.

- A tool call runs that tool (tools.py). `run_tau2_evaluation` is followed to
  its end (follow.py): progress as `working` status messages, then an artifact
  with the summary and the evaluation's data, or `failed` with the reason.
  Other tools answer with one artifact; a refused call fails the task.
- An AgentBeats assessment is followed the same way, to one artifact named
  `Result`; one that cannot run is `rejected`.
- Text goes to the text executor when the service has a model (ADK's
  A2aAgentExecutor running the service's LlmAgent, evaluator_agent.py). With
  none, "results"/"status" follow-ups get the context's last evaluation, and
  other text is `rejected` with the structured form and examples.
- A task continued after a restart (`ServiceCall.resume`) follows the
  evaluation it started instead of starting another.
- CancelTask cancels `execute`'s coroutine, which cancels the evaluation.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING

from a2a.helpers import new_data_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Role, TaskState

from tau2_a2a.service.assessment import Assessment
from tau2_a2a.service.call import AssessmentCall, Refusal, ServiceCall, TextCall, ToolCall, read_call
from tau2_a2a.service.follow import Ending, follow
from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.request_limit import DEFAULT_MAX_MESSAGE_BYTES
from tau2_a2a.service.tool_specs import CANCEL, GET, RUN
from tau2_a2a.service.tools import EvaluationTools, ToolError, describe
from tau2_a2a.service.wire import JsonObject

if TYPE_CHECKING:
    from a2a.server.events import EventQueue

CALL_STATE = "tau2_eval_call"  # call context state: the ServiceCall the handler read; set only by the service
ASSESSMENT_EXAMPLE = {"participants": {"agent": "http://127.0.0.1:9100"},
                      "config": {"domain": "airline", "num_tasks": 5, "user": "scripted_user"}}
FOLLOW_UP = re.compile(r"\b(results?|status|progress|score|scores|how did|finished|done)\b", re.IGNORECASE)
_CONTEXTS_KEPT = 10_000  # contexts whose last evaluation is remembered, newest kept
log = logging.getLogger("tau2_a2a.service")


def help_reply(tools: EvaluationTools) -> str:
    """What to send when no model is configured: the structured form, with examples."""
    example = tools.specs[RUN].example_request()
    return (
        "This service runs tau2-bench evaluations of A2A agents. No language model is configured here, "
        "so send a structured request: a data part {\"tool\": \"<name>\", \"arguments\": {...}}.\n"
        f"Tools: {', '.join(tools.specs)} (aliases: ListDomains, RunTau2Evaluation).\n"
        f"Example: {json.dumps(example)}\n"
        "Then ask for \"results\" in the same context, or call get_evaluation with the evaluation id.\n"
        f"Or send an AgentBeats assessment request, as JSON text or a data part: {json.dumps(ASSESSMENT_EXAMPLE)}"
    )


def _parts(text: str, data: JsonObject | None = None) -> list[Part]:
    return [new_text_part(text)] + ([new_data_part(data)] if data is not None else [])


def _message(text: str, data: JsonObject | None = None) -> Message:
    return Message(role=Role.ROLE_AGENT, message_id=str(uuid.uuid4()), parts=_parts(text, data))


class ServiceExecutor(AgentExecutor):
    """Runs each call straight on the service's tools; text goes to `text_executor` when there is one."""

    def __init__(self, tools: EvaluationTools, text_executor: AgentExecutor | None = None,
                 poll_seconds: float = 0.5, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.tools = tools
        self.text_executor = text_executor
        self.poll_seconds = poll_seconds
        self.max_message_bytes = max_message_bytes
        self.last_evaluation: OrderedDict[str, str] = OrderedDict()  # by context id

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        call = context.call_context.state.get(CALL_STATE) if context.call_context is not None else None
        if not isinstance(call, ServiceCall):  # the handler reads every message; this executor alone reads here
            assert context.message is not None  # a2a-sdk runs an executor on a message
            call = read_call(context.message, self.max_message_bytes)
        if isinstance(call.request, TextCall) and call.resume is None and self.text_executor is not None:
            await self.text_executor.execute(context, event_queue)
            return
        assert context.task_id is not None and context.context_id is not None  # a2a-sdk sets both
        if context.current_task is None:  # a new task's first event is the Task
            history = [context.message] if context.message is not None else []
            await event_queue.enqueue_event(new_task(context.task_id, context.context_id,
                                                     TaskState.TASK_STATE_SUBMITTED, history=history))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        try:
            await self._run(call, updater)
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as error:  # a fault of the service: logged whole here, named in one line to the client
            log.exception("task %s failed", context.task_id)
            await updater.failed(_message(f"The service failed ({type(error).__name__}); the operator finds the "
                                          "details in the service's log."))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id or "").cancel()

    async def _run(self, call: ServiceCall, updater: TaskUpdater) -> None:
        request = call.request
        if call.resume is not None:
            assessment = request.assessment if isinstance(request, AssessmentCall) else None
            await self._follow(updater, call.resume, assessment, link=False)
        elif isinstance(request, Refusal):
            await (updater.reject if request.rejected else updater.failed)(_message(request.reason))
        elif isinstance(request, AssessmentCall):
            await self._assess(updater, request)
        elif isinstance(request, ToolCall):
            await self._tool(updater, request)
        else:
            await self._text(updater, request)

    async def _assess(self, updater: TaskUpdater, request: AssessmentCall) -> None:
        """An AgentBeats assessment: `rejected` unless it can run; else followed to its Result."""
        try:
            view = await asyncio.to_thread(self.tools.run_assessment, request.assessment)
        except ToolError as error:
            await updater.reject(_message(str(error)))
            return
        except EvaluationError as error:
            await updater.failed(_message(str(error)))
            return
        await self._follow(updater, view.evaluation_id, request.assessment)

    async def _tool(self, updater: TaskUpdater, request: ToolCall) -> None:
        try:
            result = await asyncio.to_thread(self.tools.call, request.tool, request.arguments)
        except (ToolError, EvaluationError) as error:
            await updater.failed(_message(str(error)))
            return
        if request.tool == RUN:
            await self._follow(updater, result["evaluation_id"])
            return
        if request.tool in (GET, CANCEL):
            self._remember(updater.context_id, result["evaluation_id"])
        assert isinstance(request.tool, str)  # tools.call refused any other
        await self._answer(updater, Ending(describe(request.tool, result), result))

    async def _text(self, updater: TaskUpdater, request: TextCall) -> None:
        """With no model: a follow-up gets the context's last evaluation; other text, the structured form."""
        last = self.last_evaluation.get(updater.context_id)
        if last is None or not FOLLOW_UP.search(request.text):
            await updater.reject(_message(help_reply(self.tools)))
            return
        try:
            record = await asyncio.to_thread(self.tools.get_evaluation, last)
        except ToolError as error:
            await updater.failed(_message(str(error)))
            return
        await self._answer(updater, Ending(describe(GET, record), record))

    async def _follow(self, updater: TaskUpdater, evaluation_id: str, assessment: Assessment | None = None, *,
                      link: bool = True) -> None:
        if link:  # so that another execution can continue this task after a restart
            await asyncio.to_thread(self.tools.manager.link_task, evaluation_id, updater.task_id,
                                    updater.context_id)
        async for step in follow(self.tools, evaluation_id, assessment, self.poll_seconds):
            if isinstance(step, Ending):
                self._remember(updater.context_id, evaluation_id)
                await self._answer(updater, step)
            else:
                await updater.update_status(TaskState.TASK_STATE_WORKING, _message(step.text, step.data))

    async def _answer(self, updater: TaskUpdater, ending: Ending) -> None:
        if ending.failed:
            await updater.failed(_message(ending.text))
            return
        if ending.name is None:  # the final update carries the answer too, as every progress update did
            await updater.update_status(TaskState.TASK_STATE_WORKING, _message(ending.text, ending.data))
        await updater.add_artifact(_parts(ending.text, ending.data), name=ending.name, last_chunk=True)
        await updater.complete()

    def _remember(self, context_id: str, evaluation_id: str) -> None:
        self.last_evaluation[context_id] = evaluation_id
        self.last_evaluation.move_to_end(context_id)
        while len(self.last_evaluation) > _CONTEXTS_KEPT:
            self.last_evaluation.popitem(last=False)
