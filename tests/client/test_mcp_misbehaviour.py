"""Agents that misbehave in the MCP tools modes end their own simulation with a clear agent-error reason, and
nothing hangs: the run goes on, its open requests are ended, its MCP calls answered. What an agent sends in a
simulation (MCP requests of every kind, bytes in every mode) has a budget; unknown tools are counted."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest
from a2a.helpers import new_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.client.records import RAW_DATA_KEY
from tau2_a2a.mcp.invitation import read_mcp_invitation
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, agent_card, free_port
from tau2_a2a.reference.mcp_client import call, mcp_session
from tau2_a2a.runner.outcome import format_summary
from testbed.hostile_agent import HostileAgent, Hostility
from tests.support.runs import FAST, run_a2a
from tests.support.waiting import wait_until

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
    def senders() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("a2a-send")]

    # and every request left open was ended: no thread still waits on one
    wait_until(lambda: not senders(), lambda: f"every request left open to end (still: {senders()})", 30, 0.1)


# -- what the agent sends in a simulation: one budget, every kind of request, every byte ----------------------------

def started(agents: list[HostileAgent], hostility: Hostility) -> HostileAgent:
    agent = HostileAgent(hostility).start()
    agents.append(agent)
    return agent


def ending(simulation) -> str:
    """The content of the message that ended an agent error's simulation."""
    assert simulation.termination_reason.value == "agent_error"
    return simulation.messages[-1].content


def mcp_records(simulation) -> list[dict]:
    return [record for message in simulation.messages
            for record in ((message.raw_data or {}).get(RAW_DATA_KEY) or {}).get("mcp_requests", [])]


def test_a_flood_of_tools_list_ends_the_simulation_at_the_mcp_request_budget(hostile, tmp_path: Path):
    agent = started(hostile, Hostility(mcp_lists=500))
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0", "1"], a2a=A2AConfig(
        endpoint=agent.url, retry=FAST, tools="mcp", max_mcp_requests=40))
    assert outcome.metrics["run"]["simulations_ended_by_a2a_errors"] == {"limit": 2}
    for simulation in outcome.results.simulations:
        assert ending(simulation) == (
            f"[A2A limit error] the agent at {agent.url} sent 41 MCP requests in one simulation, over the limit of "
            "40 (--a2a-max-mcp-requests, every kind counts: initialize, tools/list, tools/call...); its simulation "
            "ends here. Raise --a2a-max-mcp-requests if the agent really needs more.")
        assert len(mcp_records(simulation)) <= 40  # what went past the budget was refused, not kept
    assert any("Over a limit of this conversation" in error for error in agent.executor.mcp_errors)


def test_big_tool_arguments_end_the_simulation_at_the_byte_budget_before_the_call_runs(hostile, tmp_path: Path):
    agent = started(hostile, Hostility(mcp_big_calls=30, big_bytes=100_000))
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0"], a2a=A2AConfig(
        endpoint=agent.url, retry=FAST, tools="mcp", max_agent_bytes=450_000))
    [simulation] = outcome.results.simulations
    assert "over the limit of 450000 (--a2a-max-agent-bytes)" in ending(simulation)
    kept = [call for message in simulation.messages for call in (getattr(message, "tool_calls", None) or [])]
    assert len(kept) == 4  # four calls of 100 KB fit in 450,000 bytes with the session's other requests; not five
    assert sum(len(json.dumps(call.arguments)) for call in kept) < 450_000


def test_the_byte_budget_counts_replies_in_the_message_mode_too(hostile, tmp_path: Path):
    agent = started(hostile, Hostility(reply_text="x" * 300_000))
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0"], a2a=A2AConfig(
        endpoint=agent.url, retry=FAST, max_agent_bytes=200_000))
    [simulation] = outcome.results.simulations
    assert "(--a2a-max-agent-bytes)" in ending(simulation) and "the last were A2A replies" in ending(simulation)
    assert not [m for m in simulation.messages if m.role == "assistant" and m.content == "x" * 300_000]
    failed = [r for r in outcome.metrics["simulations"][0]["requests"] if r["error"]]
    assert [r["error"] for r in failed] == ["limit"]


def test_unknown_tools_over_mcp_are_counted_in_the_summary_and_the_metrics(hostile, tmp_path: Path):
    agent = started(hostile, Hostility(mcp_unknown_calls=3))
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0"], a2a=A2AConfig(endpoint=agent.url, retry=FAST,
                                                                          tools="mcp"))
    run = outcome.metrics["run"]
    expected = 3 * agent.executor.messages
    assert expected >= 3
    assert run["unknown_tool_calls"] == run["mcp"]["unknown_tool_calls"] == expected
    assert outcome.metrics["simulations"][0]["summary"]["unknown_tool_calls"] == expected
    unknown = [r for r in outcome.metrics["simulations"][0]["mcp"]["requests"] if r["unknown_tool_calls"]]
    assert {r["error"] for r in unknown} == {"mcp_error"}
    assert all(r["error_message"].startswith("Unknown tool 'no_such_tool'") for r in unknown)
    assert f"unknown tool calls: {expected}" in format_summary(outcome.metrics)
