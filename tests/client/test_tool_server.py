"""The MCP tools server, spoken to as agents speak to it: the official MCP client, and raw HTTP for what clients
would never send. Each simulation's token opens its own tools only; whatever the server cannot take gets an HTTP
or MCP error, never a traceback, and the server goes on."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from tau2_a2a.client.config import McpServing
from tau2_a2a.mcp.agent_actions import ActionQueue, FailureAction, ToolCallAction, ToolOutcome, UserMessageAction
from tau2_a2a.mcp.invitation import SEND_TO_USER, SIMULATION_ENDED, McpServer
from tau2_a2a.mcp.tool_server import MAX_REQUEST_BYTES, ToolServer
from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.reference.mcp_client import call, mcp_session

LOOKUP = {"type": "function", "function": {"name": "get_user_details", "description": "Look a user up.",
                                            "parameters": {"type": "object",
                                                           "properties": {"user_id": {"type": "string"}},
                                                           "required": ["user_id"]}}}
CANCEL = {"type": "function", "function": {"name": "cancel_reservation", "description": "Cancel one.",
                                            "parameters": {"type": "object",
                                                           "properties": {"reservation_id": {"type": "string"}}}}}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "1"}}}


def open_waiting(server: ToolServer, tools: list[dict], actions: ActionQueue, driven: bool = False) -> McpServer:
    """A simulation's tools, opened while a message of tau2's waits for the agent's reply (calls are taken)."""
    mcp = server.open(tools, actions, driven=driven)
    server.simulation(mcp).waiting = True
    return mcp


@pytest.fixture
def server():
    tool_server = ToolServer(McpServing()).start()
    yield tool_server
    tool_server.close()


def answer_calls(actions: ActionQueue, stop: threading.Event, seen: list[Any]) -> threading.Thread:
    """The simulation's side: take each action and answer it as tau2's environment would."""

    def run() -> None:
        while not stop.is_set():
            action = actions.take(0.05)
            if isinstance(action, ToolCallAction):
                seen.append((action.name, action.arguments))
                action.outcome.set_result(ToolOutcome(f"ran {action.name} with {action.arguments}"))
                actions.answered(action)
            elif isinstance(action, UserMessageAction):
                seen.append(("user", action.text))
                action.reply.set_result("thanks, bye")
                actions.answered(action)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_each_token_opens_its_own_simulations_tools_only(server):
    first_actions, second_actions = ActionQueue(), ActionQueue()
    first = open_waiting(server, [LOOKUP], first_actions, driven=False)
    second = open_waiting(server, [CANCEL], second_actions, driven=False)
    assert first.url == second.url and first.token != second.token
    stop, seen_first, seen_second = threading.Event(), [], []
    answer_calls(first_actions, stop, seen_first)
    answer_calls(second_actions, stop, seen_second)

    async def use(mcp: McpServer, name: str, arguments: dict) -> tuple[list[str], tuple[str, bool]]:
        async with mcp_session(mcp) as session:
            listed = [tool.name for tool in (await session.list_tools()).tools]
            return listed, await call(session, name, arguments)

    try:
        assert asyncio.run(use(first, "get_user_details", {"user_id": "u1"})) == (
            ["get_user_details"], ("ran get_user_details with {'user_id': 'u1'}", False))
        assert asyncio.run(use(second, "cancel_reservation", {"reservation_id": "R2"})) == (
            ["cancel_reservation"], ("ran cancel_reservation with {'reservation_id': 'R2'}", False))
    finally:
        stop.set()
    assert seen_first == [("get_user_details", {"user_id": "u1"})]
    assert seen_second == [("cancel_reservation", {"reservation_id": "R2"})]
    # Every request is metered into its own simulation's records: initialize, the listing, the call, ...
    methods = [record.method for record in server.simulation(first).take_records()]
    assert "tools/call" in methods and "tools/list" in methods and "initialize" in methods
    assert all(record.transport == "MCP" for record in server.simulation(second).take_records())


def test_a_tool_of_another_simulation_or_none_is_an_mcp_error(server):
    actions = ActionQueue()
    mcp = open_waiting(server, [LOOKUP], actions, driven=False)

    async def unknown() -> str:
        async with mcp_session(mcp) as session:
            try:
                await session.call_tool("cancel_reservation", {"reservation_id": "R1"})
            except MCPError as error:
                return f"{error.error.code}: {error.error.message}"
            return "no error"

    assert asyncio.run(unknown()) == ("-32602: Unknown tool 'cancel_reservation': this server offers "
                                      "get_user_details.")
    assert actions.take(0.01) is None  # nothing reached the simulation


def test_requests_without_a_valid_token_are_refused_in_one_line(server):
    mcp = open_waiting(server, [LOOKUP], ActionQueue(), driven=False)
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": f"Basic {mcp.token}"}):
        response = httpx.post(mcp.url, json=INITIALIZE, headers={**headers, **auth})
        assert response.status_code == 401
        assert response.json()["error"]["message"].startswith(("Send the bearer token", "This token opens no tools"))
        assert "Traceback" not in response.text


def test_a_finished_simulations_token_opens_nothing_and_its_waiting_call_gets_the_closing_answer(server):
    actions = ActionQueue()
    mcp = open_waiting(server, [LOOKUP], actions, driven=False)
    result: dict[str, Any] = {}

    async def call_and_wait() -> None:
        async with mcp_session(mcp) as session:
            result["answer"] = await call(session, "get_user_details", {"user_id": "u1"})

    caller = threading.Thread(target=lambda: asyncio.run(call_and_wait()))
    caller.start()
    action = actions.take(30)  # the call arrived; the simulation ends before tau2 runs it
    assert isinstance(action, ToolCallAction)
    actions.close(SIMULATION_ENDED, "ended")
    server.close_simulation(mcp)
    caller.join(30)
    assert result["answer"] == (SIMULATION_ENDED, True)
    response = httpx.post(mcp.url, json=INITIALIZE, headers={"Authorization": f"Bearer {mcp.token}",
                                                             "Accept": "application/json, text/event-stream"})
    assert response.status_code == 401


def test_malformed_and_oversized_bodies_get_an_error_and_the_server_goes_on(server):
    actions = ActionQueue()
    mcp = open_waiting(server, [LOOKUP], actions, driven=False)
    headers = {**mcp.headers, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    bad = httpx.post(mcp.url, content=b"{not json", headers=headers)
    assert bad.status_code == 400 and "Traceback" not in bad.text
    huge = httpx.post(mcp.url, content=b'{"x": "' + b"a" * (MAX_REQUEST_BYTES + 10) + b'"}', headers=headers)
    assert huge.status_code == 413
    stop, seen = threading.Event(), []
    answer_calls(actions, stop, seen)

    async def still_works() -> tuple[str, bool]:
        async with mcp_session(mcp) as session:
            return await call(session, "get_user_details", {"user_id": "u9"})

    try:
        assert asyncio.run(still_works()) == ("ran get_user_details with {'user_id': 'u9'}", False)
    finally:
        stop.set()


def test_the_driven_mode_offers_send_message_to_user_and_returns_the_users_reply(server):
    actions = ActionQueue()
    mcp = open_waiting(server, [LOOKUP], actions, driven=True)
    stop, seen = threading.Event(), []
    answer_calls(actions, stop, seen)

    async def talk() -> tuple[list[str], tuple[str, bool]]:
        async with mcp_session(mcp) as session:
            listed = [tool.name for tool in (await session.list_tools()).tools]
            return listed, await call(session, SEND_TO_USER, {"message": "How can I help?"})

    try:
        assert asyncio.run(talk()) == (["get_user_details", SEND_TO_USER], ("thanks, bye", False))
    finally:
        stop.set()
    assert seen == [("user", "How can I help?")]


def test_the_fixed_url_serves_the_one_simulation_in_flight_and_says_when_there_is_none():
    server = ToolServer(McpServing(fixed=True, port=free_port())).start()
    try:
        url = server.url
        idle = httpx.post(url, json=INITIALIZE, headers={"Accept": "application/json, text/event-stream"})
        assert idle.status_code == 409 and "No conversation is in progress" in idle.json()["error"]["message"]
        actions = ActionQueue()
        mcp = open_waiting(server, [LOOKUP], actions, driven=False)
        assert mcp.token is None
        with pytest.raises(RuntimeError, match="one simulation at a time"):
            open_waiting(server, [LOOKUP], ActionQueue(), driven=False)
        stop, seen = threading.Event(), []
        answer_calls(actions, stop, seen)

        async def use() -> tuple[str, bool]:
            async with mcp_session(McpServer(url)) as session:
                return await call(session, "get_user_details", {"user_id": "u3"})

        try:
            assert asyncio.run(use()) == ("ran get_user_details with {'user_id': 'u3'}", False)
        finally:
            stop.set()
        assert seen == [("get_user_details", {"user_id": "u3"})]
    finally:
        server.close()


def test_a_call_while_no_message_waits_for_the_agent_is_refused_and_ends_its_simulation(server):
    actions = ActionQueue()
    mcp = server.open([LOOKUP], actions, driven=False)  # the agent has replied: nothing of tau2's waits

    async def late() -> str:
        async with mcp_session(mcp) as session:
            try:
                await session.call_tool("get_user_details", {"user_id": "u1"})
            except MCPError as error:
                return error.error.message
            return "no error"

    assert asyncio.run(late()).startswith("No message of tau2's waits for your reply")
    failure = actions.take(5)
    assert isinstance(failure, FailureAction)
    assert "called the tool get_user_details after it had replied" in str(failure.failure)
