"""One simulation of an agent that takes its tools over MCP: its next action, as tau2's orchestrator asks for it.

The agent's A2A request stays open while it calls tools with its own MCP
client. Each `tools/call` is handed to tau2's orchestrator as the agent's next
message (one tool call), which tau2 runs in the simulation's environment; its
result answers the MCP call. The A2A reply, when it comes, is the agent's
message to the user. In the agent-driven mode the whole simulation is one A2A
request, and `send_message_to_user` is the agent's message to the user, the
user's next words its result.

`--a2a-timeout` bounds the wait for each action (a tool call, a message to the
user, the reply), not the request: the agent's clock stops while tau2 runs a
tool or the user thinks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from a2a.types import Part

from tau2_a2a.client import tracing
from tau2_a2a.client.config import DRIVEN, redact
from tau2_a2a.client.errors import AgentMalformedReply, AgentOverLimit, AgentTimeout
from tau2_a2a.client.limits import SimulationBudget, check_tool_calls
from tau2_a2a.client.records import RAW_DATA_KEY, RequestRecord
from tau2_a2a.client.sending import Exchange, InFlight
from tau2_a2a.client.session import A2ASession
from tau2_a2a.mcp.agent_actions import (
    Action,
    ActionQueue,
    FailureAction,
    ReplyAction,
    ToolCallAction,
    ToolOutcome,
    UserMessageAction,
)
from tau2_a2a.mcp.invitation import CONVERSATION_ENDED, SIMULATION_ENDED, McpServer
from tau2_a2a.protocol.messages import reply_parts, user_turn
from tau2_a2a.tau2bench.seam.distribution import (
    AssistantMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    ValidAgentInputMessage,
)

if TYPE_CHECKING:  # the server (the `mcp` SDK's, a second of imports) is imported when a simulation opens it
    from tau2_a2a.mcp.tool_server import SimulationTools

log = logging.getLogger("tau2_a2a.client")

ENDED_KEY = "ended_by_agent"  # in an assistant message's raw_data: the agent ended the conversation
# How long the end of a simulation waits for the agent to end its A2A request itself before aborting it.
CLOSING_GRACE_SECONDS = 5.0

T = TypeVar("T")
# (exchange) -> (usage, cost) of a reply, as the message mode reads it
UsageOf = Callable[[Exchange], tuple[dict[str, object] | None, float | None]]
# (the MCP server, whether agent-driven, the user's turn's parts) -> the first A2A message's parts
Opening = Callable[[McpServer, bool, list[Part]], list[Part]]


@dataclass
class McpConversation:
    """The simulation's MCP tools, its A2A request in flight, and the calls waiting for tau2's results."""

    session: A2ASession
    server: McpServer
    actions: ActionQueue
    tools: SimulationTools
    turn: int = 0
    context_id: str | None = None
    task_id: str | None = None
    in_flight: InFlight | None = None
    reply_taken: bool = False  # the reply to the request in flight became a message
    acted: bool = False  # the agent acted (over MCP) since the request in flight was sent: no resend then
    calls: dict[str, ToolCallAction] = field(default_factory=dict)  # by the id tau2's message gives each
    waiting_user: UserMessageAction | None = None
    messages: list[AssistantMessage] = field(default_factory=list)  # the assistant messages made, for late records
    call_count: int = 0  # tool calls asked for in the simulation
    turn_calls: int = 0  # of which since the message in flight was sent (its "reply", for the limits)
    usage_of: UsageOf | None = None  # set by whoever opens the conversation

    @classmethod
    def open(cls, session: A2ASession, tool_schemas: list[dict[str, object]]) -> McpConversation:
        from tau2_a2a.mcp.tool_server import tool_server_of

        actions = ActionQueue()
        tool_server = tool_server_of(session)
        server = tool_server.open(tool_schemas, actions, session.tools_mode == DRIVEN, SimulationBudget(session.config))
        return cls(session, server, actions, tool_server.simulation(server))

    @property
    def driven(self) -> bool:
        return self.session.tools_mode == DRIVEN

    def next_message(self, incoming: ValidAgentInputMessage, opening: Opening) -> AssistantMessage:
        """The agent's next message after `incoming` (the user's words, or tau2's tool results). `opening(parts)`
        builds the first A2A message's parts around the user's turn."""
        if isinstance(incoming, UserMessage):
            if self.waiting_user is not None:
                self._answer_user(incoming.content or "")
            else:
                self._send(incoming.content or "", opening)
        else:
            for message in getattr(incoming, "tool_messages", None) or [incoming]:
                self._answer_tool(message)
        return self._take()

    # -- what goes to the agent --------------------------------------------------------

    def _send(self, text: str, opening: Opening) -> None:
        if self.in_flight is not None and not self.in_flight.future.done():
            raise AgentMalformedReply("the agent's A2A request is still open, yet tau2 has a user message for it")
        parts = user_turn(text)
        if self.turn == 0:
            parts = opening(self.server, self.driven, parts)
        self.acted = False
        self.reply_taken = False
        self.turn_calls = 0
        self.tools.waiting = True
        self.tools.trace_context = tracing.current_context()
        self.in_flight = self.session.send_in_background(parts, self.context_id, self.task_id, self.turn,
                                                         may_retry=lambda: not self.acted)
        self.in_flight.future.add_done_callback(self._post_reply)
        self.turn += 1

    def _post_reply(self, done: Future[Exchange]) -> None:
        self.tools.waiting = False
        error = done.exception()  # any exception of the send (FailureAction names the A2A ones): raised again
        self.actions.post(FailureAction(error) if error is not None
                          else ReplyAction(done.result()))

    def _answer_tool(self, message: ToolMessage) -> None:
        action = self.calls.pop(message.id, None)
        if action is None:
            return
        _set(action.outcome, ToolOutcome(message.content or "", bool(message.error)))
        self.actions.answered(action)

    def _answer_user(self, text: str) -> None:
        action, self.waiting_user = self.waiting_user, None
        if action is not None:
            _set(action.reply, text)
            self.actions.answered(action)

    # -- what comes from the agent ------------------------------------------------------

    def _take(self) -> AssistantMessage:
        timeout = self.session.config.timeout
        action = self.actions.take(timeout)
        if action is None:
            raise self._failure(AgentTimeout(
                f"the agent at {self.session.config.endpoint} took no action for {timeout:g}s (no tool call, "
                "message or reply); raise --a2a-timeout for slow agents"))
        message = self._message(action)
        self.messages.append(message)
        return message

    def _message(self, action: Action) -> AssistantMessage:
        if isinstance(action, ToolCallAction):
            self.acted = True
            try:
                check_tool_calls(self.session.config, self.turn_calls + 1, self.call_count - self.turn_calls)
            except AgentOverLimit as over:
                raise self._failure(over) from None
            call_id = f"mcp_{self.turn}_{self.call_count}"
            self.call_count += 1
            self.turn_calls += 1
            self.calls[call_id] = action
            call = ToolCall(id=call_id, name=action.name, arguments=action.arguments, requestor="assistant")
            return self._assistant(None, [call])
        if isinstance(action, UserMessageAction):
            self.acted = True
            self.waiting_user = action
            return self._assistant(action.text, None)
        if isinstance(action, FailureAction):
            raise self._failure(action.failure)
        return self._reply(action.exchange)

    def _reply(self, exchange: Exchange) -> AssistantMessage:
        self.reply_taken = True
        self.context_id = exchange.context_id or self.context_id
        self.task_id = exchange.task_id
        texts, _ = reply_parts(exchange.reply)
        text = "\n".join(t for t in texts if t).strip()
        if self.tools.budget is not None:
            over = self.tools.budget.spend_bytes(sum(r.response_bytes for r in exchange.records), "A2A replies")
            if over is not None:
                exchange.records[-1].error, exchange.records[-1].error_message = over.category.value, str(over)
                over.records = exchange.records
                raise self._failure(over)
        requests = [r.as_dict() for r in exchange.records]
        usage, cost = self._usage(exchange)
        if self.driven:  # the agent ended its task: the conversation is over
            return self._assistant(text or "(The agent ended the conversation.)", None, requests, ended=True,
                                   usage=usage, cost=cost)
        if not text:
            failure = AgentMalformedReply(redact(
                f"Malformed reply from {self.session.config.endpoint}: expected text for the user (its tools are "
                "on the MCP server), got an empty reply. See docs/protocol.md.", self.session.config.auth_token))
            failure.records = exchange.records
            raise failure
        return self._assistant(text, None, requests, usage=usage, cost=cost)

    def _assistant(self, content: str | None, tool_calls: list[ToolCall] | None,
                   requests: list[dict[str, object]] | None = None, ended: bool = False,
                   usage: dict[str, object] | None = None, cost: float | None = 0.0) -> AssistantMessage:
        """An assistant message. The agent's usage and cost ride on its reply (the turn's LLM calls): its other
        messages (tool calls, words to the user in the agent-driven mode) add 0 to it and carry no usage."""
        raw: dict[str, object] = {"context_id": self.context_id, "task_id": self.task_id,
                               "requests": requests or [],
                               "mcp_requests": self._mcp_records()}
        if ended:
            raw[ENDED_KEY] = True
        return AssistantMessage(role="assistant", content=content, tool_calls=tool_calls, cost=cost,
                                usage=usage,
                                raw_data={RAW_DATA_KEY: raw})

    def _usage(self, exchange: Exchange) -> tuple[dict[str, object] | None, float | None]:
        if self.usage_of is None:
            raise TypeError("McpConversation.usage_of is not set")
        return self.usage_of(exchange)

    def _charge_last(self, usage: dict[str, object] | None, cost: float | None) -> None:
        """The turn's usage and cost, from a reply that came once the simulation was over (the agent-driven
        mode's last reply), on the last message made; a cost no reply gave is unknown, never 0."""
        if not self.messages:
            return
        last = self.messages[-1]
        last.cost = None if cost is None or last.cost is None else last.cost + cost
        if usage:  # token counts add up; what names the usage (its model, its shape) is the reply's
            earlier = last.usage or {}
            last.usage = {key: earlier.get(key, 0) + value if isinstance(value, int) else value
                          for key, value in usage.items()}

    def _mcp_records(self) -> list[dict[str, object]]:
        records = self.tools.take_records()
        for record in records:
            record.context_id = self.context_id
            record.turn = max(self.turn - 1, 0)
        return [record.as_dict() for record in records]

    def _failure(self, failure: BaseException) -> BaseException:
        self.close()
        return failure

    # -- the end --------------------------------------------------------------------

    def close(self) -> None:
        """The simulation is over: answer what waits, close its tools, end its A2A request; idempotent."""
        if self.actions.closed:
            return
        self.actions.close(SIMULATION_ENDED, CONVERSATION_ENDED)
        late: list[RequestRecord] = []
        in_flight = self.in_flight
        if in_flight is not None and not self.reply_taken:  # the simulation ended before the turn's reply
            try:
                exchange = in_flight.future.result(timeout=min(CLOSING_GRACE_SECONDS, self.session.config.timeout))
            except Exception:  # noqa: BLE001  (timed out, or failed: either way the request is over for us)
                exchange = None
                in_flight.abort()
            if exchange is not None:
                late.extend(exchange.records)
                self.task_id = exchange.task_id
                self._charge_last(*self._usage(exchange))
            else:
                self._charge_last(None, None)  # no reply said what the turn's LLM calls cost: unknown
        if self.driven and self.task_id:
            late.extend(self.session.cancel_task(self.task_id, self.turn))
        from tau2_a2a.mcp.tool_server import tool_server_of

        tool_server_of(self.session).close_simulation(self.server)
        late_mcp = self.tools.take_records()
        if self.messages:  # what came after the last message was made is the simulation's too
            raw = self.messages[-1].raw_data[RAW_DATA_KEY]
            raw["requests"].extend(r.as_dict() for r in late)
            raw["mcp_requests"].extend(r.as_dict() for r in late_mcp)


def _set(future: Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)
