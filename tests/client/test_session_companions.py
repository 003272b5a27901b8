"""The MCP tools server lives as long as the run's A2A session: started at its first use, once, closed with it."""

from __future__ import annotations

import httpx
import pytest

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.client.session import A2ASession
from tau2_a2a.mcp.tool_server import tool_server_of
from tau2_a2a.protocol.hosting import free_port


def test_the_tools_server_is_started_once_per_session_and_closed_with_it() -> None:
    session = A2ASession(A2AConfig(endpoint=f"http://127.0.0.1:{free_port()}"))  # no agent: the card is never read
    server = tool_server_of(session)
    assert tool_server_of(session) is server
    httpx.get(server.url, timeout=30)  # listening: any HTTP answer will do

    session.close()
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url, timeout=30)
