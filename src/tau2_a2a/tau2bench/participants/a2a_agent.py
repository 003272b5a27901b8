"""A2AAgent: the tau2 agent type `a2a_agent`, a remote agent that only reasons.

The remote agent receives the policy and the conversation, and gets the
domain's tools in one of two ways (`--a2a-tools`): in the messages, answering
with text or tool calls (the message mode, here), or over MCP, calling them
with its own MCP client while its A2A request is open (`mcp_conversation`).
Either way tau2's orchestrator runs every tool call locally, exactly once. One
A2A context per simulation: a fresh agent (and state) per task and trial, the
`context_id` the agent returns sent back with every message. Every simulation
of a run talks over the run's one A2A session (see `orchestration.on_session`).
"""

from __future__ import annotations

import logging
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

from a2a.types import Part

from tau2_a2a.client.config import MESSAGE, redact
from tau2_a2a.client.errors import AgentMalformedReply, AgentOverLimit
from tau2_a2a.client.limits import SimulationBudget, check_tool_calls
from tau2_a2a.client.records import RAW_DATA_KEY
from tau2_a2a.client.sending import Exchange
from tau2_a2a.client.session import A2ASession
from tau2_a2a.client.turn_usage import tau2_usage_and_cost
from tau2_a2a.mcp.invitation import McpServer, mcp_conversation_start
from tau2_a2a.protocol.messages import (
    ToolResult,
    conversation_start,
    reply_parts,
    tool_results_turn,
    user_turn,
)
from tau2_a2a.protocol.toolcalls import CallForm, MalformedReply, call_arguments, parse_reply
from tau2_a2a.tau2bench.participants.mcp_conversation import ENDED_KEY, McpConversation
from tau2_a2a.tau2bench.run.orchestration import AGENT_NAME, current_session
from tau2_a2a.tau2bench.seam.distribution import (
    AssistantMessage,
    LLMAgent,
    Message,
    MultiToolMessage,
    Tool,
    ToolCall,
    ToolMessage,
    UserMessage,
    ValidAgentInputMessage,
)

__all__ = ["AGENT_NAME", "A2AAgent"]

log = logging.getLogger("tau2_a2a.client")


@dataclass
class A2AAgentState:
    """Per-simulation state: the conversation so far and the A2A ids to continue it."""

    messages: list[Message]
    context_id: str | None = None
    task_id: str | None = None
    turn: int = 0
    # call id -> tool name and the form the call came in, which its result goes back in
    pending_calls: dict[str, tuple[str, CallForm]] = field(default_factory=dict)
    tool_calls: int = 0  # asked for so far (see client.limits)
    mcp: McpConversation | None = None  # in an MCP tools mode: the simulation's tools and open request
    budget: SimulationBudget | None = None  # in the message mode: the bytes the agent sent (MCP: on its tools)


class A2AAgent(LLMAgent):
    """tau2 agent backed by a remote A2A agent.

    It subclasses LLMAgent only because tau2's `run_task` constructs LLMAgent
    subclasses with `(tools, domain_policy, llm, llm_args)`; no LLM runs here,
    and `llm_args` are only what the results file records of the A2A config.
    """

    def __init__(
        self,
        tools: list[Tool],
        domain_policy: str,
        llm: str | None = None,
        llm_args: dict | None = None,
    ) -> None:
        super().__init__(tools=tools, domain_policy=domain_policy, llm=llm, llm_args=llm_args)
        self.session: A2ASession = current_session()
        self.config = self.session.config
        self.seed: int | None = None
        self.tool_schemas = [tool_schema(tool) for tool in tools]
        self._parameters = {
            s["function"]["name"]: s["function"].get("parameters", {}) for s in self.tool_schemas
        }

    def get_init_state(self, message_history: list[Message] | None = None) -> A2AAgentState:
        return A2AAgentState(messages=list(message_history or []))

    def set_seed(self, seed: int) -> None:
        """Passed on to the remote agent in the first message; sampling is its own."""
        self.seed = seed

    def generate_next_message(
        self, message: ValidAgentInputMessage, state: A2AAgentState
    ) -> tuple[AssistantMessage, A2AAgentState]:
        if self.session.tools_mode != MESSAGE:
            return self._next_over_mcp(message, state), state
        parts = self._outgoing_parts(message, state)
        incoming = message.tool_messages if isinstance(message, MultiToolMessage) else [message]
        state.messages.extend(incoming)
        exchange = self.session.send(parts, state.context_id, state.task_id, state.turn)
        state.turn += 1
        state.context_id = exchange.context_id
        state.task_id = exchange.task_id
        assistant = self._to_assistant_message(exchange, state)
        state.messages.append(assistant)
        return assistant, state

    def _next_over_mcp(self, message: ValidAgentInputMessage, state: A2AAgentState) -> AssistantMessage:
        """The agent's next action in an MCP tools mode (see `mcp_conversation`)."""
        if state.mcp is None:
            state.mcp = McpConversation.open(self.session, self.tool_schemas)
            state.mcp.usage_of = lambda exchange: _usage_and_cost(exchange, self.config.price_model)
        incoming = message.tool_messages if isinstance(message, MultiToolMessage) else [message]
        state.messages.extend(incoming)

        def opening(server: McpServer, driven: bool, turn_parts: list[Part]) -> list[Part]:
            history = [_history_entry(m) for m in state.messages[:-len(incoming)]]
            return mcp_conversation_start(self.system_prompt, server, driven, turn_parts, history, self.seed)

        assistant = state.mcp.next_message(message, opening)
        state.messages.append(assistant)
        return assistant

    def stop(self, message: ValidAgentInputMessage | None = None, state: A2AAgentState | None = None) -> None:
        """The simulation is over: in an MCP tools mode, close its tools and end its A2A request."""
        if state is not None and state.mcp is not None:
            state.mcp.close()

    @classmethod
    def is_stop(cls, message: AssistantMessage) -> bool:
        """The agent ended the conversation itself (the agent-driven mode's A2A task ended)."""
        raw = (message.raw_data or {}).get(RAW_DATA_KEY) or {}
        return bool(raw.get(ENDED_KEY))

    def _outgoing_parts(self, message: ValidAgentInputMessage, state: A2AAgentState) -> list[Part]:
        if isinstance(message, UserMessage):
            turn_parts = user_turn(message.content or "")
        else:
            tool_messages = message.tool_messages if isinstance(message, MultiToolMessage) else [message]
            turn_parts = tool_results_turn([self._tool_result(m, state) for m in tool_messages])
        if state.turn > 0:
            return turn_parts
        history = [_history_entry(m) for m in state.messages]
        return conversation_start(self.system_prompt, self.tool_schemas, turn_parts, history, self.seed)

    def _tool_result(self, message: ToolMessage, state: A2AAgentState) -> ToolResult:
        name, form = state.pending_calls.pop(message.id, ("", "tau2"))
        return ToolResult(id=message.id, name=name, content=message.content or "", error=message.error, form=form)

    def _to_assistant_message(self, exchange: Exchange, state: A2AAgentState) -> AssistantMessage:
        texts, data_parts = reply_parts(exchange.reply)
        record = exchange.records[-1]
        if state.budget is None:
            state.budget = SimulationBudget(self.config)
        over = state.budget.spend_bytes(sum(r.response_bytes for r in exchange.records), "A2A replies")
        if over is not None:
            record.error, record.error_message = over.category.value, str(over)
            over.records = exchange.records
            raise over
        try:
            parsed = parse_reply(texts, data_parts)
            if parsed.text is None and not parsed.tool_calls:
                raise MalformedReply("expected text for the user or tool calls, got an empty reply")
        except MalformedReply as error:
            failure = AgentMalformedReply(redact(
                f"Malformed reply from {self.config.endpoint}: {error}. "
                f"Got text {texts!r:.300} and data {[p.data for p in data_parts]!r:.300}. "
                "See docs/protocol.md for the accepted forms.",
                self.config.auth_token,
            ))
            log.error("%s", failure)
            record.error = failure.category.value
            record.error_message = str(failure)
            failure.records = exchange.records
            raise failure from None
        try:
            check_tool_calls(self.config, len(parsed.tool_calls), state.tool_calls)
        except AgentOverLimit as failure:
            record.error, record.error_message = failure.category.value, str(failure)
            failure.records = exchange.records
            raise
        state.tool_calls += len(parsed.tool_calls)
        tool_calls = []
        for index, call in enumerate(parsed.tool_calls):
            call_id = call.id or f"call_{state.turn}_{index}"
            parameters = self._parameters.get(call.name)
            if parameters is None:
                record.unknown_tool_calls += 1
                arguments = call.arguments
            else:
                arguments = call_arguments(call, parameters)
            state.pending_calls[call_id] = (call.name, call.form)
            tool_calls.append(ToolCall(id=call_id, name=call.name, arguments=arguments, requestor="assistant"))
        usage, cost = _usage_and_cost(exchange, self.config.price_model)
        return AssistantMessage(
            role="assistant",
            content=parsed.text,
            tool_calls=tool_calls or None,
            cost=cost,
            usage=usage,
            raw_data={
                RAW_DATA_KEY: {
                    "context_id": exchange.context_id,
                    "task_id": exchange.task_id,
                    "requests": [r.as_dict() for r in exchange.records],
                }
            },
        )


# (tool function, name, short description or not, predefined argument names) -> its OpenAI schema
_SCHEMAS: dict[tuple[object, str, bool | None, tuple[str, ...]], dict[str, Any]] = {}


def tool_schema(tool: Tool) -> dict[str, Any]:
    """The tool's OpenAI schema, built once per process: tau2 builds new tools for every simulation, from
    the same functions, and building a schema (pydantic's JSON schema) costs about half a millisecond."""
    func = getattr(tool, "_func", None)
    if func is None:
        return tool.openai_schema
    key = (getattr(func, "__func__", func), tool.name, getattr(tool, "_use_short_desc", None),
           tuple(sorted(getattr(tool, "_predefined", {}) or {})))
    schema = _SCHEMAS.get(key)
    if schema is None:
        schema = _SCHEMAS[key] = tool.openai_schema
    return schema


def _usage_and_cost(exchange: Exchange, price_model: str | None = None
                    ) -> tuple[dict[str, object] | None, float | None]:
    """The LLM usage and cost the agent reported with its reply, in any shape it sends them (see
    `protocol.usage`), priced when it gave tokens only; (None, None), unknown, when it reported none."""
    return tau2_usage_and_cost(exchange.reply, price_model)


def _history_entry(message: Message) -> dict[str, object]:
    """A prior message of the conversation, as the remote agent sees it."""
    entry: dict[str, object] = {"role": message.role, "content": getattr(message, "content", None)}
    tool_calls = getattr(message, "tool_calls", None)
    if tool_calls:
        entry["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": deepcopy(c.arguments)} for c in tool_calls]
    if isinstance(message, ToolMessage):
        entry["id"] = message.id
        entry["error"] = message.error
    return entry
