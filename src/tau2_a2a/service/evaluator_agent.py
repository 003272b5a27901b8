"""The evaluation service as an ADK agent: structured requests run tools; text goes to an LLM.

- A data part `{"tool": name, "arguments": {...}}` (it reaches ADK as an
  inline blob in <a2a_datapart_json> tags) runs that tool directly: no model,
  deterministic. `run_tau2_evaluation` is then followed to its end: partial
  events carry progress (ADK's A2A executor sends them as `working` status
  updates), and the final event, a text summary plus a data part, becomes the
  task's artifact.
- Text goes to an `LlmAgent` when a model is configured. An evaluation the
  model starts is followed the same way.
- An AgentBeats assessment request, `{"participants": {...}, "config": {...}}`
  as the JSON text of a text part or as a data part, runs that assessment (no
  model): progress updates, then one artifact named `Result` with the summary
  and the machine-readable result (see assessment.py, result.py, executor.py).
- With no model, other text is refused (the task ends `rejected`) with the
  structured form and an example; "results"/"status"/"progress" follow-ups get
  the context's last evaluation (the A2A context is the ADK session).
- CancelTask cancels this agent's coroutine; that cancels the evaluation.
- An A2A task whose follower stopped (a restart, a replica that died) is
  continued by running this agent again on the task's first message, marked
  `resume`: it follows the evaluation it started instead of starting another,
  so the task ends with the same artifact as if nothing had happened.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from google.adk.agents import BaseAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.llm_agent import ToolUnion
from google.adk.events import Event, EventActions
from google.adk.tools import BaseTool, ToolContext
from google.genai import types
from pydantic import Field, SkipValidation

from tau2_a2a.litellm_cost_map import use_bundled_cost_map
from tau2_a2a.service import summary
from tau2_a2a.service.assessment import Assessment, AssessmentRejected, from_text, is_assessment, parse
from tau2_a2a.service.executor import ARTIFACT_KEY, REJECTED, TASK_KEY
from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.jobs.evaluation import TERMINAL, EvaluationView, Status
from tau2_a2a.service.request import TOKEN_ARGUMENT
from tau2_a2a.service.request_limit import cut_message_refusal
from tau2_a2a.service.result import ARTIFACT_NAME, build_result, result_notes
from tau2_a2a.service.settings import ServiceSettings
from tau2_a2a.service.tool_specs import ALIASES, CANCEL, GET, REFERENCE_ARGUMENT, RUN, ToolSpec
from tau2_a2a.service.tools import EvaluationTools, ToolError, describe
from tau2_a2a.service.vault import DATA_PART_END, DATA_PART_START
from tau2_a2a.service.wire import JsonObject

if TYPE_CHECKING:
    from google.adk.agents.readonly_context import ReadonlyContext

warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)

AGENT_NAME = "tau2_eval"
LAST_EVALUATION = "tau2_eval_last_evaluation"  # session state: the context's latest evaluation
ASSESSMENT_EXAMPLE = {"participants": {"agent": "http://127.0.0.1:9100"},
                      "config": {"domain": "airline", "num_tasks": 5, "user": "scripted_user"}}
_FOLLOW_UP = re.compile(r"\b(results?|status|progress|score|scores|how did|finished|done)\b", re.IGNORECASE)


class BadRequest(ValueError):
    """The message is not a request the service understands."""


def data_part(data: JsonObject) -> types.Part:
    """A genai part that ADK's A2A converter turns into an A2A data part."""
    payload = json.dumps(data).encode()
    return types.Part(inline_data=types.Blob(mime_type="text/plain", data=DATA_PART_START + payload + DATA_PART_END))


def read_request(content: types.Content | None) -> tuple[JsonObject | None, str]:
    """The structured request (a tool call or an assessment, from a data part or JSON text) and the text."""
    request = None
    texts: list[str] = []
    for part in (content.parts if content is not None else None) or []:
        if part.text:
            texts.append(part.text)
        blob = part.inline_data
        if blob is None or not blob.data:
            continue
        raw = blob.data
        if not (raw.startswith(DATA_PART_START) and raw.endswith(DATA_PART_END)):
            continue
        try:
            data = json.loads(raw[len(DATA_PART_START):-len(DATA_PART_END)])
        except ValueError:
            raise BadRequest("The data part is not valid JSON.") from None
        if not isinstance(data, dict) or ("tool" not in data and not is_assessment(data)):
            keys = ", ".join(sorted(data)) if isinstance(data, dict) else type(data).__name__
            raise BadRequest(f'A data part must be {{"tool": "<name>", "arguments": {{...}}}}; got {keys}.')
        request = data
    text = "\n".join(texts).strip()
    if request is None:
        request = from_text(text)
    return request, text


def help_reply(tools: EvaluationTools) -> tuple[str, JsonObject]:
    """What to send when no model is configured: the structured form, with examples."""
    example = tools.specs[RUN].example_request()
    text = (
        "This service runs tau2-bench evaluations of A2A agents. No language model is configured here, "
        "so send a structured request: a data part {\"tool\": \"<name>\", \"arguments\": {...}}.\n"
        f"Tools: {', '.join(tools.specs)} (aliases: ListDomains, RunTau2Evaluation).\n"
        f"Example: {json.dumps(example)}\n"
        "Then ask for \"results\" in the same context, or call get_evaluation with the evaluation id.\n"
        f"Or send an AgentBeats assessment request, as JSON text or a data part: {json.dumps(ASSESSMENT_EXAMPLE)}"
    )
    data = {
        "structured_request": {"tool": "<name>", "arguments": {}},
        "assessment_request": ASSESSMENT_EXAMPLE,
        "tools": {name: {"description": spec.description, "arguments": spec.parameters,
                         "example": spec.example_request()} for name, spec in tools.specs.items()},
    }
    return text, data


class EvaluationServiceAgent(BaseAgent):
    """Routes each request: structured -> tool; text -> LLM assistant (if any) or help."""

    # SkipValidation: pydantic keeps the very object given, neither checked nor copied.
    tools: SkipValidation[EvaluationTools] = Field(exclude=True)
    poll_seconds: float = 0.5
    # Evaluations the LLM assistant started, by invocation: followed after its turn. Shared with the model's tools.
    started: SkipValidation[dict[str, list[str]]] = Field(default_factory=dict, exclude=True)

    @property
    def assistant(self) -> BaseAgent | None:
        return self.sub_agents[0] if self.sub_agents else None

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        cut = served_task(ctx).get("cut")
        if cut:  # over --max-message-bytes: only a prefix of its text is left (request_limit.py)
            yield self._error(ctx, cut_message_refusal(cut), code=REJECTED)
            return
        try:
            request, text = read_request(ctx.user_content)
        except BadRequest as error:
            yield self._error(ctx, str(error))
            return
        resume = served_task(ctx).get("resume")
        if resume:
            async for event in self._follow(ctx, resume, _assessment_of(request)):
                yield event
            return
        if request is not None and is_assessment(request):
            async for event in self._assess(ctx, request):
                yield event
            return
        if request is not None:
            async for event in self._structured(ctx, request):
                yield event
            return
        if self.assistant is not None:
            async for event in self.assistant.run_async(ctx):
                yield event
            for evaluation_id in self.started.pop(ctx.invocation_id, []):
                async for event in self._follow(ctx, evaluation_id):
                    yield event
            return
        last = ctx.session.state.get(LAST_EVALUATION)
        if last and _FOLLOW_UP.search(text):
            try:
                record = await asyncio.to_thread(self.tools.get_evaluation, last)
            except ToolError as error:
                yield self._error(ctx, str(error))
                return
            yield self._reply(ctx, summary.text(record), record)
            return
        yield self._error(ctx, *help_reply(self.tools), code=REJECTED)

    async def _assess(self, ctx: InvocationContext, request: JsonObject) -> AsyncGenerator[Event, None]:
        """An AgentBeats assessment: refused (`rejected`) unless it can run; else followed to its Result."""
        try:
            assessment = parse(request)
            view = await asyncio.to_thread(self.tools.run_assessment, assessment)
        except (AssessmentRejected, ToolError) as error:
            yield self._error(ctx, str(error), code=REJECTED)
            return
        except EvaluationError as error:
            yield self._error(ctx, str(error))
            return
        async for event in self._follow(ctx, view.evaluation_id, assessment):
            yield event

    async def _structured(self, ctx: InvocationContext, request: JsonObject) -> AsyncGenerator[Event, None]:
        name = request.get("tool")
        try:
            result = await asyncio.to_thread(self.tools.call, name, request.get("arguments"))
        except (ToolError, EvaluationError) as error:
            yield self._error(ctx, str(error))
            return
        canonical = ALIASES.get(str(name), str(name))  # a known tool's name: tools.call refused any other
        if canonical == RUN:
            async for event in self._follow(ctx, result["evaluation_id"]):
                yield event
            return
        state = {LAST_EVALUATION: result["evaluation_id"]} if canonical in (GET, CANCEL) else None
        yield self._reply(ctx, describe(canonical, result), result, state=state)

    async def _follow(self, ctx: InvocationContext, evaluation_id: str,
                      assessment: Assessment | None = None) -> AsyncGenerator[Event, None]:
        """Progress updates until the evaluation ends, then its summary and data (the artifact)."""
        manager = self.tools.manager
        task = served_task(ctx)
        if task.get("task_id") and not task.get("resume"):
            await asyncio.to_thread(manager.link_task, evaluation_id, task["task_id"], task["context_id"])
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
                    update = (progress_data(view) if assessment else
                              {k: data.get(k) for k in
                               ("evaluation_id", "status", "domain", "queue_position", "progress")})
                    yield self._reply(ctx, summary.progress_text(data), update, partial=True)
                await asyncio.sleep(self.poll_seconds)
        except (asyncio.CancelledError, GeneratorExit):
            # The A2A task was canceled (or its run ended early): nobody follows this evaluation.
            # A service that stops leaves both to the next one.
            if not manager.closing:
                manager.cancel(evaluation_id, wait=False)
                manager.task_followed(evaluation_id)
            raise
        state = {LAST_EVALUATION: evaluation_id}
        record = self.tools.answer(view)
        if assessment is not None:
            final = await self._result(ctx, record, assessment, state)
        else:
            final = self._reply(ctx, summary.text(record), record, state=state)
            if view.status == Status.FAILED:  # the A2A task fails too, with the reason as its message
                final.error_code, final.error_message = "EVALUATION_FAILED", summary.text(record)
        yield final
        await asyncio.to_thread(manager.task_followed, evaluation_id)

    async def _result(self, ctx: InvocationContext, record: JsonObject, assessment: Assessment,
                      state: JsonObject) -> Event:
        """The `Result` artifact of a completed assessment (`record`: its evaluation, as the tools answer it);
        any other ending fails the task with why."""
        text = "\n".join([summary.text(record), *result_notes(assessment)])
        if record["status"] != Status.COMPLETED.value:
            return self._error(ctx, text, code="EVALUATION_" + record["status"].upper())
        path = self.tools.manager.results_path(record["evaluation_id"])
        results = await asyncio.to_thread(summary.read_results, path)
        final = self._reply(ctx, text, build_result(record, results, assessment, record.get("report_url")),
                            state=state)
        final.custom_metadata = {ARTIFACT_KEY: ARTIFACT_NAME}
        return final

    def _reply(self, ctx: InvocationContext, text: str, data: JsonObject | None = None, *, partial: bool = False,
               state: JsonObject | None = None) -> Event:
        parts = [types.Part(text=text)] + ([data_part(data)] if data is not None else [])
        return Event(
            author=self.name, invocation_id=ctx.invocation_id, branch=ctx.branch,
            partial=True if partial else None,
            content=types.Content(role="model", parts=parts),
            actions=EventActions(state_delta=state or {}),
        )

    def _error(self, ctx: InvocationContext, message: str, data: JsonObject | None = None, *,
               code: str = "INVALID_ARGUMENT") -> Event:
        """Ends the task `failed` (`rejected` for code REJECTED under `tau2-a2a serve`) with `message`."""
        content = types.Content(role="model", parts=[data_part(data)]) if data is not None else None
        return Event(author=self.name, invocation_id=ctx.invocation_id, branch=ctx.branch,
                     error_code=code, error_message=message, content=content)


def served_task(ctx: InvocationContext) -> JsonObject:
    """The A2A task this invocation serves, as `tau2-a2a serve`'s executor tells it (empty elsewhere)."""
    custom = (ctx.run_config.custom_metadata if ctx.run_config is not None else None) or {}
    return custom.get(TASK_KEY) or {}


def _assessment_of(request: JsonObject | None) -> Assessment | None:
    """The assessment a continued task's first message asked for (it was accepted then, so it parses)."""
    if request is None or not is_assessment(request):
        return None
    try:
        return parse(request)
    except AssessmentRejected:
        return None


def progress_data(view: EvaluationView) -> JsonObject:
    """An assessment's progress update: simulations done, total, average reward so far."""
    progress = view.progress
    return {"evaluation_id": view.evaluation_id, "status": view.status.value, "queue_position": view.queue_position,
            "done": progress.simulations_done if progress else 0, "total": view.record.total_simulations,
            "avg_reward_so_far": progress.avg_reward_so_far if progress else None}


# -- the LLM path ------------------------------------------------------------------------

def _instruction(context: ReadonlyContext) -> str:
    last = context.state.get(LAST_EVALUATION)
    return (
        "You run tau2-bench evaluations of A2A agents for the user, with your tools. "
        "list_domains shows the domains, their tasks and tools. run_tau2_evaluation starts an evaluation "
        "of the agent at an A2A endpoint; the service then reports its progress and results itself, so "
        "after starting one, say briefly what you started. get_evaluation shows an evaluation's status "
        "and results; list_evaluations lists them; cancel_evaluation stops one. "
        "Never invent results: report only what the tools return. "
        + (f"The latest evaluation in this conversation is {last}." if last else "")
    )


class ModelTool(BaseTool):
    """One of the service's tools as its model sees it: the tool's own description and parameters (all
    but the target's token: a token typed into a chat would be stored with the conversation; use a
    structured request), run through EvaluationTools.call, a refusal answered as {"error": ...}.

    The call runs in a worker thread: on the event loop, a blocking database write would wait on the A2A
    task store's transaction on that same loop until the database's busy timeout.
    """

    def __init__(self, spec: ToolSpec, tools: EvaluationTools, started: dict[str, list[str]]) -> None:
        super().__init__(name=spec.name, description=spec.description)
        self.spec = spec
        self.tools = tools
        self.started = started  # evaluations the model started, by invocation: followed after its turn

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(name=self.name, description=self.description,
                                         parameters_json_schema=self.spec.model_parameters())

    async def run_async(self, *, args: JsonObject, tool_context: ToolContext | None) -> JsonObject:
        if TOKEN_ARGUMENT in args or REFERENCE_ARGUMENT in args:
            return {"error": f"{TOKEN_ARGUMENT} is not taken from a conversation (it would be stored with it): "
                             "send a structured request with it instead."}
        try:
            result = await asyncio.to_thread(self.tools.call, self.name, args)
        except (ToolError, EvaluationError) as error:
            return {"error": str(error)}
        if self.name == RUN and tool_context is not None:
            tool_context.state[LAST_EVALUATION] = result["evaluation_id"]
            self.started.setdefault(tool_context.invocation_id, []).append(result["evaluation_id"])
        return result


def model_tools(tools: EvaluationTools, started: dict[str, list[str]]) -> list[ToolUnion]:
    """The five tools as the service's model is offered them (see ModelTool)."""
    return [ModelTool(spec, tools, started) for spec in tools.specs.values()]


def build_agent(settings: ServiceSettings, tools: EvaluationTools | None = None,
                poll_seconds: float = 0.5) -> EvaluationServiceAgent:
    """The root agent; with `settings.model`, an LlmAgent (LiteLLM) answers text requests."""
    tools = tools or settings.tools()
    started: dict[str, list[str]] = {}
    sub_agents: list[BaseAgent] = []
    if settings.model:
        use_bundled_cost_map()
        from google.adk.agents import LlmAgent
        from google.adk.models.lite_llm import LiteLlm

        model_args = {"api_base": settings.model_api_base} if settings.model_api_base else {}
        sub_agents.append(LlmAgent(
            name="tau2_eval_assistant",
            model=LiteLlm(model=settings.model, **model_args),
            instruction=_instruction,
            tools=model_tools(tools, started),
        ))
    return EvaluationServiceAgent(
        name=AGENT_NAME,
        description="Runs tau2-bench evaluations of A2A agents and reports their results.",
        tools=tools,
        poll_seconds=poll_seconds,
        started=started,
        sub_agents=sub_agents,
    )
