"""The MCP tools server's bounds, against real clients on loopback: a flood of slow connections is cut while the
official MCP client keeps being served; the fixed URL off loopback needs a token; a call of a tool the simulation
lacks is counted and kept the same way on every protocol version the `mcp` SDK speaks."""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from tau2_a2a.client.config import ConfigError, McpServing
from tau2_a2a.mcp.agent_actions import ActionQueue
from tau2_a2a.mcp.connection_guard import effective_cap
from tau2_a2a.mcp.invitation import McpServer
from tau2_a2a.mcp.tool_server import ToolServer
from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.reference.mcp_client import call, mcp_session
from tests.client.test_tool_server import INITIALIZE, LOOKUP, answer_calls, open_waiting
from tests.support.waiting import wait_until

CAP = 16  # connections the flooded server holds
FLOOD = 3 * CAP  # slow connections opened against it
READ_TIMEOUT = 2.0
GENEROUS = 90.0  # seconds anything here may take on a busy machine


def slow_connection(port: int) -> socket.socket:
    """A connection that starts a request and sends no more of it (a slowloris)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=GENEROUS)
    sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return sock


def test_a_flood_of_slow_connections_is_cut_and_an_mcp_client_is_served_meanwhile(caplog):
    caplog.set_level(logging.WARNING)
    server = ToolServer(McpServing(max_connections=CAP, read_timeout=READ_TIMEOUT)).start()
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    actions = ActionQueue()
    mcp = open_waiting(server, [LOOKUP], actions)
    stop, seen = threading.Event(), []
    answer_calls(actions, stop, seen)
    flood: list[socket.socket] = []
    try:
        flood = [slow_connection(port) for _ in range(FLOOD)]  # three times the cap, all held open by the peer

        async def calls() -> list[tuple[str, bool]]:
            async with mcp_session(mcp) as session:
                return [await call(session, "get_user_details", {"user_id": f"u{i}"}) for i in range(3)]

        assert asyncio.run(calls()) == [(f"ran get_user_details with {{'user_id': 'u{i}'}}", False) for i in range(3)]
        # Every slow connection is closed by the server: over the cap at once, the rest at the read deadline.
        closed = 0
        for sock in flood:
            try:
                closed += sock.recv(1) == b""
            except ConnectionResetError:
                closed += 1
        assert closed == FLOOD
    finally:
        stop.set()
        for sock in flood:
            sock.close()
        server.close()
    counts = server.guard.counts
    assert counts.evicted >= FLOOD - CAP and counts.evicted + counts.timed_out >= FLOOD
    assert seen == [("get_user_details", {"user_id": f"u{i}"}) for i in range(3)]
    # Refusals are logged once per kind, then counted: no line per connection, no traceback.
    mine = [r for r in caplog.records if r.name == "tau2_a2a.mcp"]
    assert len([r for r in mine if "further ones are counted" in r.getMessage()]) <= 3
    assert not [r for r in caplog.records if r.exc_info]


def http_exchange(sock: socket.socket) -> bytes:
    """One request on a kept-alive connection and the status line of its answer (b"" if the server closed it). The
    tools server answers a request without its bearer token with a chunked JSON-RPC error."""
    sock.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    received = b""
    while not received.endswith(b"\r\n0\r\n\r\n"):
        chunk = sock.recv(4096)
        if not chunk:
            return b""
        received += chunk
    return received.split(b"\r\n", 1)[0]


def test_a_flood_of_new_connections_does_not_close_a_client_s_idle_kept_alive_one():
    """A client served before, idle between two calls, keeps its connection however many slow ones arrive: they
    evict each other (the failure this guards against: an agent's MCP call cut mid-run by a neighbour's flood)."""
    server = ToolServer(McpServing(max_connections=CAP, read_timeout=GENEROUS)).start()
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    client = socket.create_connection(("127.0.0.1", port), timeout=GENEROUS)
    flood: list[socket.socket] = []
    try:
        answered = http_exchange(client)
        assert answered.startswith(b"HTTP/1.1 ")
        flood = [slow_connection(port) for _ in range(FLOOD)]
        wait_until(lambda: server.guard.counts.evicted >= FLOOD - CAP, "the flood evicting its own", GENEROUS)
        assert http_exchange(client) == answered
    finally:
        for sock in [client, *flood]:
            sock.close()
        server.close()


def test_the_cap_leaves_three_quarters_of_the_descriptors_to_the_run():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (800, hard))
    try:
        assert effective_cap(256) == 100  # twice that for a moment: a quarter
        assert effective_cap(50) == 50
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_fixed_url_off_loopback_without_a_token_is_refused_in_one_line(monkeypatch):
    with pytest.raises(ConfigError) as refused:
        McpServing(fixed=True, host="0.0.0.0", port=8931)
    assert "--a2a-mcp-token-env" in str(refused.value) and "\n" not in str(refused.value)
    monkeypatch.delenv("TAU2_TEST_MCP_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="TAU2_TEST_MCP_TOKEN is unset or empty"):
        McpServing(fixed=True, host="0.0.0.0", port=8931, token_env="TAU2_TEST_MCP_TOKEN")
    monkeypatch.setenv("TAU2_TEST_MCP_TOKEN", "s3cret-fixed-token")
    serving = McpServing(fixed=True, host="0.0.0.0", port=8931, token_env="TAU2_TEST_MCP_TOKEN")
    assert "s3cret" not in repr(serving)


def test_the_fixed_url_with_a_token_requires_it(monkeypatch):
    monkeypatch.setenv("TAU2_TEST_MCP_TOKEN", "s3cret-fixed-token")
    server = ToolServer(McpServing(fixed=True, port=free_port(), token_env="TAU2_TEST_MCP_TOKEN")).start()
    try:
        actions = ActionQueue()
        open_waiting(server, [LOOKUP], actions)
        stop, seen = threading.Event(), []
        answer_calls(actions, stop, seen)
        headers = {"Accept": "application/json, text/event-stream"}
        for auth in ({}, {"Authorization": "Bearer wrong"}):
            refused = httpx.post(server.url, json=INITIALIZE, headers={**headers, **auth})
            assert refused.status_code == 401 and "bearer token this server was started with" in refused.text

        async def use() -> tuple[str, bool]:
            async with mcp_session(McpServer(server.url, "s3cret-fixed-token")) as session:
                return await call(session, "get_user_details", {"user_id": "u5"})

        try:
            assert asyncio.run(use()) == ("ran get_user_details with {'user_id': 'u5'}", False)
        finally:
            stop.set()
    finally:
        server.close()


@asynccontextmanager
async def session_at(server: McpServer, version: str) -> AsyncIterator[ClientSession]:
    """An MCP client session on protocol `version`: the initialize handshake, or server/discover (modern)."""
    async with create_mcp_http_client(headers=server.headers) as http, \
            streamable_http_client(server.url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        if version in MODERN_PROTOCOL_VERSIONS:
            await session.discover()
        else:
            result = await session.send_request(types.InitializeRequest(params=types.InitializeRequestParams(
                protocol_version=version, capabilities=types.ClientCapabilities(),
                client_info=types.Implementation(name="tests", version="1"))), types.InitializeResult)
            session.adopt(result)
            await session.send_notification(types.InitializedNotification())
        assert session.protocol_version == version
        yield session


@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS])
def test_an_unknown_tool_is_counted_with_its_error_on_every_protocol_version(version: str):
    server = ToolServer(McpServing()).start()
    try:
        actions = ActionQueue()
        mcp = open_waiting(server, [LOOKUP], actions)

        async def unknown() -> str:
            async with session_at(mcp, version) as session:
                try:
                    await session.call_tool("cancel_reservation", {"reservation_id": "R1"})
                except MCPError as error:
                    return error.error.message
                return "no error"

        assert asyncio.run(unknown()).startswith("Unknown tool 'cancel_reservation'")
        [record] = wait_until(  # a request's record is kept once its response has gone out
            lambda: [r for r in server.simulation(mcp).take_records() if r.method == "tools/call"],
            "the tools/call's record", GENEROUS, 0.05)
    finally:
        server.close()
    assert record.unknown_tool_calls == 1
    assert record.error == "mcp_error"
    assert record.error_message.startswith("Unknown tool 'cancel_reservation': this server offers get_user_details")
    assert record.protocol_version == version
    assert actions.take(0.01) is None  # nothing reached the simulation



# A neighbour that holds HELD slow connections to the tools server, opening a new one whenever one is closed, for
# at most SECONDS seconds (its own process: its descriptors are not the run's).
FLOOD_SCRIPT = """
import socket, sys, time
port, held, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
end, sockets, opened = time.monotonic() + seconds, [], 0
while time.monotonic() < end and opened < 20 * held:
    alive = []
    for sock in sockets:
        try:
            alive.append(sock) if sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) else sock.close()
        except BlockingIOError:
            alive.append(sock)
        except OSError:
            sock.close()
    sockets = alive
    while len(sockets) < held and opened < 20 * held:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=1)
            sock.sendall(b"POST /mcp HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n")
            sockets.append(sock)
            opened += 1
        except OSError:
            break
    time.sleep(0.05)
"""


def test_a_run_with_few_descriptors_under_a_connection_flood_loses_no_simulation(tmp_path):
    """A neighbour floods the tools server with more connections than the run has descriptors; the tools server
    holds at most a quarter of them, so the run writes its files and the agent's MCP calls are served."""
    from tau2_a2a.client.config import A2AConfig
    from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app
    from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
    from tests.support.runs import FAST, run_a2a

    port, mcp_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    flood = subprocess.Popen([sys.executable, "-c", FLOOD_SCRIPT, str(mcp_port), "400", str(GENEROUS * 3)])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 200, hard))
    try:
        with BackgroundServer(a2a_app(OracleExecutor(), oracle_card(url, mcp_tools=True)), port=port):
            outcome = run_a2a(url, tmp_path, task_ids=["0", "1", "3"], a2a=A2AConfig(
                endpoint=url, retry=FAST, tools="mcp", mcp=McpServing(port=mcp_port)))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        flood.kill()
        flood.wait()
    assert {s.task_id: s.reward_info.reward for s in outcome.results.simulations} == {"0": 1.0, "1": 1.0, "3": 1.0}
    assert outcome.metrics["run"]["simulations_ended_by_a2a_errors"] == {}


def test_accept_errors_are_counted_and_logged_once(caplog):
    """asyncio reports each failed accept (out of descriptors) with a traceback, every second it retries."""
    from tau2_a2a.mcp.connection_guard import ConnectionGuard

    caplog.set_level(logging.WARNING)
    guard = ConnectionGuard(max_connections=4, read_timeout=1.0)
    loop = asyncio.new_event_loop()
    try:
        for _ in range(50):
            guard.loop_exception_handler(loop, {"message": "socket.accept() out of system resource",
                                                "exception": OSError(24, "Too many open files")})
    finally:
        loop.close()
    assert guard.counts.accept_errors == 50
    logged = [r.getMessage() for r in caplog.records if r.name == "tau2_a2a.mcp"]
    assert logged == ["MCP tools server: could not accept a connection ([Errno 24] Too many open files); asyncio "
                      "retries every second (further ones are counted, not logged)"]
    assert not [r for r in caplog.records if r.exc_info]
    assert "50 accept errors" in (guard.summary() or "")
