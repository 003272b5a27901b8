"""Agents that misbehave in the MCP tools modes end their own simulation with a clear agent-error reason, and
nothing hangs: the run goes on, its open requests are ended, its MCP calls answered."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from a2a.helpers import new_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, agent_card, free_port
from tau2_a2a.protocol.mcp_tools import read_mcp_invitation
from tau2_a2a.reference.mcp_client import call, mcp_session
from tests.support.runs import FAST, run_a2a

TIMEOUT = 2.0  # --a2a-timeout of these runs: how long an agent may take for each action


class Misbehaving(AgentExecutor):
    """silent: never acts nor replies; mute: replies with nothing; idle_caller: calls one tool, then goes silent."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.cancelled = asyncio.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        invitation = read_mcp_invitation(context.message)
        if self.how == "silent":
            await asyncio.sleep(3600)
        if self.how == "idle_caller" and invitation is not None:
            async with mcp_session(invitation.server) as tools:
                await call(tools, "get_user_details", {"user_id": "mia_li_3668"})
            await asyncio.sleep(3600)
        await event_queue.enqueue_event(new_message([], context_id=context.context_id)
                                        if self.how == "mute" else
                                        new_message([new_text_part("hello")], context_id=context.context_id))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.cancelled.set()


@pytest.mark.parametrize(("how", "driven", "transport", "error", "reason"), [
    ("silent", False, "jsonrpc", "timeout", "took no action for 2s"),
    ("silent", False, "grpc", "timeout", "took no action for 2s"),
    ("silent", True, "http-json", "timeout", "took no action for 2s"),
    ("idle_caller", False, "jsonrpc", "timeout", "took no action for 2s"),
    ("mute", False, "jsonrpc", "malformed-reply", "expected text for the user"),
])
def test_a_misbehaving_agent_fails_its_own_simulations_only(how, driven, transport, error, reason, tmp_path: Path):
    port, grpc_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    card = agent_card("misbehaving", "tests", url, grpc_url=f"127.0.0.1:{grpc_port}")
    started = time.monotonic()
    with BackgroundServer(a2a_app(Misbehaving(how), card), port=port, grpc_port=grpc_port):
        outcome = run_a2a(url, tmp_path, "airline", task_ids=["0", "1", "2"], a2a=A2AConfig(
            endpoint=url, retry=FAST, tools="mcp", driven=driven, timeout=TIMEOUT, transport=transport))
    elapsed = time.monotonic() - started

    simulations = outcome.results.simulations
    assert {s.task_id: s.termination_reason.value for s in simulations} == dict.fromkeys(["0", "1", "2"],
                                                                                         "agent_error")
    assert {s.reward_info.reward for s in simulations} == {0.0}
    for simulation in simulations:
        last = simulation.messages[-1]
        assert last.content.startswith(f"[A2A {error} error]") and reason in last.content
    assert elapsed < 300  # nothing waited for the agent's hour: each simulation ended after its timeout
    deadline = time.monotonic() + 30  # and every request left open was ended: no thread still waits on one
    while [t for t in threading.enumerate() if t.name.startswith("a2a-send")] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("a2a-send")]
