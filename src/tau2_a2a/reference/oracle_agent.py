"""The reference oracle as an A2A agent (a2a-sdk): golden actions as data-part tool calls.

It reads the task marker in the user's first message, answers each turn with
the next step of the task's plan (a golden action, or a hand-over asking the
user to act on their phone), and finally says the task's communicate_info.
One plan per A2A context, so concurrent simulations never mix.
"""

from __future__ import annotations

import asyncio
from collections import deque

from a2a.helpers import new_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import AgentCard, AgentSkill, Part

from tau2_a2a.protocol.messages import read_turn, tool_calls_reply
from tau2_a2a.protocol.toolcalls import ToolCallRequest
from tau2_a2a.tau2bench.oracle_script import NO_MARKER, OracleStep, find_marker, oracle_steps
from tau2_a2a.protocol.hosting import agent_card



class OracleExecutor(AgentExecutor):
    """Replays each task's golden actions; `delay` seconds per reply simulates a slow agent."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self._plans: dict[str, deque[OracleStep]] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        turn = read_turn(context.message)
        context_id = context.context_id
        marker = find_marker(turn.user_text)
        if marker is not None:
            self._plans[context_id] = deque(oracle_steps(*marker))
        plan = self._plans.get(context_id)
        if self.delay:
            await asyncio.sleep(self.delay)
        parts = step_parts(plan.popleft()) if plan else [new_text_part(NO_MARKER)]
        if plan is not None and not plan:
            del self._plans[context_id]
        await event_queue.enqueue_event(new_message(parts, context_id=context_id))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self._plans.pop(context.context_id, None)


def step_parts(step: OracleStep) -> list[Part]:
    if step.tool_name is None:
        return [new_text_part(step.text or "")]
    return tool_calls_reply([ToolCallRequest(name=step.tool_name, arguments=step.arguments or {})])


def oracle_card(url: str, grpc_url: str | None = None) -> AgentCard:
    """JSON-RPC and HTTP+JSON at `url`, gRPC at `grpc_url` (host:port) when served."""
    return agent_card(
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
