"""The reference oracle as an A2A agent (a2a-sdk): golden actions as tool calls.

It reads the task marker in the user's first message, answers each turn with
the next step of the task's plan (a golden action, or a hand-over asking the
user to act on their phone), and finally says the task's communicate_info.
One plan per A2A context, so concurrent simulations never mix.

Its tools come the way the first message gives them: in the messages, each
golden action a data-part tool call in its reply; or over MCP (the MCP tools
modes), each golden action called with the official MCP client while the
message waits, its reply then the next text of the plan. In the agent-driven
mode it speaks to the user through `send_message_to_user` and ends its task
when the user ends the conversation.
"""

from __future__ import annotations

import asyncio
from collections import deque

from a2a.helpers import new_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import AgentCard, AgentSkill, Part

from tau2_a2a.mcp.invitation import (
    CONVERSATION_ENDED,
    SEND_TO_USER,
    McpInvitation,
    read_mcp_invitation,
)
from tau2_a2a.protocol.cards import MCP_TOOLS_EXTENSION, declare_mcp_tools
from tau2_a2a.protocol.hosting import agent_card
from tau2_a2a.protocol.messages import read_turn, sent_message, tool_calls_reply
from tau2_a2a.protocol.toolcalls import ToolCallRequest
from tau2_a2a.reference.mcp_client import call, mcp_session
from tau2_a2a.tau2bench.participants.oracle_script import NO_MARKER, OracleStep, find_marker, oracle_steps

NEEDS_MCP = ("This agent takes its tools over MCP (its card declares the extension " + MCP_TOOLS_EXTENSION
             + "): evaluate it with --a2a-tools mcp or auto.")


class OracleExecutor(AgentExecutor):
    """Replays each task's golden actions; `delay` seconds per reply simulates a slow agent. With `mcp_only` it
    refuses conversations that do not give it its tools over MCP."""

    def __init__(self, delay: float = 0.0, mcp_only: bool = False) -> None:
        self.delay = delay
        self.mcp_only = mcp_only
        self._plans: dict[str, deque[OracleStep]] = {}
        self._servers: dict[str, McpInvitation] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message, context_id = sent_message(context)
        turn = read_turn(message)
        invitation = read_mcp_invitation(message)
        if invitation is not None:
            self._servers[context_id] = invitation
        marker = find_marker(turn.user_text)
        if marker is not None:
            self._plans[context_id] = deque(oracle_steps(*marker))
        plan = self._plans.get(context_id)
        if self.delay:
            await asyncio.sleep(self.delay)
        invitation = self._servers.get(context_id)
        if invitation is None and self.mcp_only:
            parts = [new_text_part(NEEDS_MCP)]
        elif invitation is not None and plan:
            parts = [new_text_part(await self._over_mcp(invitation, plan))]
        else:
            parts = step_parts(plan.popleft()) if plan else [new_text_part(NO_MARKER)]
        if plan is not None and not plan:
            del self._plans[context_id]
            self._servers.pop(context_id, None)
        await event_queue.enqueue_event(new_message(parts, context_id=context_id))

    async def _over_mcp(self, invitation: McpInvitation, plan: deque[OracleStep]) -> str:
        """Call the plan's golden actions over MCP up to its next text, which is the reply; in the agent-driven
        mode say every text through send_message_to_user until the user ends the conversation."""
        async with mcp_session(invitation.server) as tools:
            while plan:
                step = plan.popleft()
                if step.tool_name is not None:
                    await call(tools, step.tool_name, step.arguments or {})
                    continue
                if not invitation.driven:
                    return step.text or ""
                answer, _ = await call(tools, SEND_TO_USER, {"message": step.text or ""})
                if answer == CONVERSATION_ENDED:
                    plan.clear()
        return "Goodbye."

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self._plans.pop(context.context_id or "", None)
        self._servers.pop(context.context_id or "", None)


def step_parts(step: OracleStep) -> list[Part]:
    if step.tool_name is None:
        return [new_text_part(step.text or "")]
    return tool_calls_reply([ToolCallRequest(name=step.tool_name, arguments=step.arguments or {})])


def oracle_card(url: str, grpc_url: str | None = None, mcp_tools: bool = False) -> AgentCard:
    """JSON-RPC and HTTP+JSON at `url`, gRPC at `grpc_url` (host:port) when served; with `mcp_tools` the card
    declares that the agent takes its tools over MCP."""
    card = agent_card(
        name="tau2 oracle",
        description="Reference agent: replays each tau2 task's golden actions over A2A.",
        url=url,
        grpc_url=grpc_url,
        skills=[
            AgentSkill(
                id="tau2-oracle",
                name="tau2 oracle",
                description="Answers with the golden tool calls of the task named by the scripted user's marker.",
                tags=["tau2", "reference"],
            )
        ],
    )
    if mcp_tools:
        declare_mcp_tools(card)
    return card
