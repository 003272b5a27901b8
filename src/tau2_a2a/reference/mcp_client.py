"""The reference agents' MCP client, in the MCP tools modes: the official `mcp` SDK's Streamable HTTP client.

An agent opens it from the server the first message names (`read_mcp_invitation`), with the bearer token
that opens its conversation's tools, and calls the tools as any MCP client would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tau2_a2a.mcp.invitation import McpServer


@asynccontextmanager
async def mcp_session(server: McpServer) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session to `server`. An error inside comes out as itself, not wrapped in the
    exception group of the client's task group, so an agent's own errors reach its A2A server as they are."""
    try:
        async with create_mcp_http_client(headers=server.headers) as http, \
                streamable_http_client(server.url, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session
    except BaseExceptionGroup as group:
        raise _first(group) from None


def _first(group: BaseExceptionGroup) -> BaseException:
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    """Call a tool; its text and whether it is an error."""
    result = await session.call_tool(name, arguments)
    text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
    return text, bool(result.is_error)


def openai_schemas(tools: list[types.Tool]) -> list[dict[str, Any]]:
    """MCP tools as the OpenAI function schemas LiteLLM takes (and tau2 gives its own agents)."""
    return [{"type": "function", "function": {"name": tool.name, "description": tool.description or "",
                                              "parameters": tool.input_schema}} for tool in tools]
