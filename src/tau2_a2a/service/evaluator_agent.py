"""The evaluation service as an ADK agent: the whole front under `adk web|api_server --a2a`, and the words
(text, with a model) under `tau2-a2a serve`.

Under `tau2-a2a serve` the service's own executor (executor.py) runs tool
calls and assessments; it hands this agent only text, and only when a model is
configured. The text goes to an `LlmAgent` offered the tools' own schemas; an
evaluation the model starts is followed to its end (follow.py).

Under `adk web|api_server --a2a`, ADK's A2aAgentExecutor runs this agent for
every message, so it reads requests its own way (ADK hands a data part over as
an inline blob in <a2a_datapart_json> tags): a tool call runs that tool, an
assessment is followed to its result, text goes to the model or gets the
help. What differs there: the artifact has no name, refusals end `failed`
rather than `rejected`, and an A2A task is not continued after a restart (the
evaluation still is).
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import AsyncGenerator, Callable, Mapping
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
from tau2_a2a.service.executor import FOLLOW_UP, help_reply
from tau2_a2a.service.follow import Ending, follow
from tau2_a2a.service.jobs.errors import EvaluationError
from tau2_a2a.service.request import TOKEN_ARGUMENT
from tau2_a2a.service.settings import ServiceSettings
from tau2_a2a.service.tool_specs import ALIASES, CANCEL, GET, REFERENCE_ARGUMENT, RUN, ToolSpec
from tau2_a2a.service.tools import EvaluationTools, ToolError, describe
from tau2_a2a.service.vault import DATA_PART_END, DATA_PART_START, genai_request
from tau2_a2a.service.wire import JsonObject

if TYPE_CHECKING:
    from google.adk.agents.readonly_context import ReadonlyContext

warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)

AGENT_NAME = "tau2_eval"
LAST_EVALUATION = "tau2_eval_last_evaluation"  # session state: the context's latest evaluation


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
        try:
            data = genai_request(part)
        except ValueError:
            raise BadRequest("The data part is not valid JSON.") from None
        if data is None:
            continue
        if not isinstance(data, dict) or ("tool" not in data and not is_assessment(data)):
            keys = ", ".join(sorted(data)) if isinstance(data, dict) else type(data).__name__
            raise BadRequest(f'A data part must be {{"tool": "<name>", "arguments": {{...}}}}; got {keys}.')
        request = data
    text = "\n".join(texts).strip()
    if request is None:
        request = from_text(text)
    return request, text


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
        try:
            request, text = read_request(ctx.user_content)
        except BadRequest as error:
            yield self._error(ctx, str(error))
            return
        if request is not None:
            steps = self._assess(ctx, request) if is_assessment(request) else self._structured(ctx, request)
        elif self.assistant is not None:
            steps = self._assist(ctx)
        else:
            steps = self._help(ctx, text)
        async for event in steps:
            yield event

    async def _assist(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        """The model's turn, then every evaluation it started, followed to its end."""
        assert self.assistant is not None
        async for event in self.assistant.run_async(ctx):
            yield event
        for evaluation_id in self.started.pop(ctx.invocation_id, []):
            async for event in self._follow(ctx, evaluation_id):
                yield event

    async def _help(self, ctx: InvocationContext, text: str) -> AsyncGenerator[Event, None]:
        """With no model: a follow-up gets the context's last evaluation; other text, the structured form."""
        last = ctx.session.state.get(LAST_EVALUATION)
        if not last or not FOLLOW_UP.search(text):
            yield self._error(ctx, help_reply(self.tools))
            return
        try:
            record = await asyncio.to_thread(self.tools.get_evaluation, last)
        except ToolError as error:
            yield self._error(ctx, str(error))
            return
        yield self._reply(ctx, summary.text(record), record)

    async def _assess(self, ctx: InvocationContext, request: JsonObject) -> AsyncGenerator[Event, None]:
        """An AgentBeats assessment: refused unless it can run; else followed to its result."""
        try:
            assessment = parse(request)
            view = await asyncio.to_thread(self.tools.run_assessment, assessment)
        except (AssessmentRejected, ToolError, EvaluationError) as error:
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
        async for step in follow(self.tools, evaluation_id, assessment, self.poll_seconds):
            if not isinstance(step, Ending):
                yield self._reply(ctx, step.text, step.data, partial=True)
            elif step.failed:  # the A2A task fails too, with the reason as its message
                yield self._error(ctx, step.text, code="EVALUATION_FAILED",
                                  state={LAST_EVALUATION: evaluation_id})
            else:
                yield self._reply(ctx, step.text, step.data, state={LAST_EVALUATION: evaluation_id})

    def _reply(self, ctx: InvocationContext, text: str, data: JsonObject | None = None, *, partial: bool = False,
               state: JsonObject | None = None) -> Event:
        parts = [types.Part(text=text)] + ([data_part(data)] if data is not None else [])
        return Event(
            author=self.name, invocation_id=ctx.invocation_id, branch=ctx.branch,
            partial=True if partial else None,
            content=types.Content(role="model", parts=parts),
            actions=EventActions(state_delta=state or {}),
        )

    def _error(self, ctx: InvocationContext, message: str, *, code: str = "INVALID_ARGUMENT",
               state: JsonObject | None = None) -> Event:
        """Ends the A2A task `failed` with `message`."""
        return Event(author=self.name, invocation_id=ctx.invocation_id, branch=ctx.branch,
                     error_code=code, error_message=message, actions=EventActions(state_delta=state or {}))


# -- the LLM path ------------------------------------------------------------------------

def _instruction(remembered: Mapping[str, str]) -> Callable[[ReadonlyContext], str]:
    """The model's instruction, naming the context's latest evaluation: one the model started (the session's
    state), else one the service's executor answered about in this context (`remembered`, by context id,
    which is the ADK session's id)."""
    def instruction(context: ReadonlyContext) -> str:
        last = context.state.get(LAST_EVALUATION) or remembered.get(context.session.id)
        return _INSTRUCTION + (f"The latest evaluation in this conversation is {last}." if last else "")

    return instruction


_INSTRUCTION = (
    "You run tau2-bench evaluations of A2A agents for the user, with your tools. "
    "list_domains shows the domains, their tasks and tools. run_tau2_evaluation starts an evaluation "
    "of the agent at an A2A endpoint; the service then reports its progress and results itself, so "
    "after starting one, say briefly what you started. get_evaluation shows an evaluation's status "
    "and results; list_evaluations lists them; cancel_evaluation stops one. "
    "Never invent results: report only what the tools return. "
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


def build_agent(settings: ServiceSettings, tools: EvaluationTools | None = None, poll_seconds: float = 0.5,
                remembered: Mapping[str, str] | None = None) -> EvaluationServiceAgent:
    """The root agent; with `settings.model`, an LlmAgent (LiteLLM) answers text requests. Without `tools`,
    the settings' own, not started (see settings.tools)."""
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
            instruction=_instruction(remembered if remembered is not None else {}),
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
