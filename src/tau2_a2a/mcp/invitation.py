"""The MCP tools modes, as the A2A conversation carries them: how the first message names the MCP server. No I/O.

In the MCP tools mode the agent under test calls the domain's tools with its
own MCP client, on an MCP server (Streamable HTTP) tau2-a2a serves; the A2A
messages carry the policy and the user's words, and the agent's A2A reply is
its message to the user. In the agent-driven mode the whole simulation is one
A2A task, and the user is one more MCP tool, `send_message_to_user`.

The first message names the server twice: in a data part shaped like the
`mcpServers` entry MCP clients are configured with (name, transport, URL,
headers), and in its text, for agents that read text only. An agent declares
that it takes its tools over MCP in its card (`protocol.cards.MCP_TOOLS_EXTENSION`);
`--a2a-tools auto` looks for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from a2a.helpers import new_data_part, new_text_part
from a2a.types import Message, Part
from google.protobuf.json_format import MessageToDict

from tau2_a2a.protocol.messages import HISTORY, KIND, SEED, SYSTEM, TOOLS, mark

SERVER_NAME = "tau2"  # the server's name in the mcpServers entry
SEND_TO_USER = "send_message_to_user"  # the agent-driven mode's tool that reaches the user
MODE_KEY = "tau2_tools"  # beside mcpServers: "mcp", or "agent_driven"
MCP = "mcp"
AGENT_DRIVEN = "agent_driven"

SEND_TO_USER_DESCRIPTION = (
    "Send a message to the customer and wait for their reply, which this tool returns. This is the only way to "
    "talk to the customer. When the customer ends the conversation the tool says so: then end your task.")
CONVERSATION_ENDED = "The customer has ended the conversation. Send nothing more: end your task now."
SIMULATION_ENDED = "This conversation is over; the tool was not run."


@dataclass(frozen=True)
class McpServer:
    """Where the agent reaches its tools: the URL, and the bearer token that opens this simulation's tools (None:
    the one fixed URL, whose calls belong to the one simulation in flight)."""

    url: str
    token: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def entry(self) -> dict[str, object]:
        """The `mcpServers` entry MCP clients are configured with (Claude, Cursor, VS Code, ADK recipes)."""
        server: dict[str, object] = {"type": "http", "url": self.url}
        if self.headers:
            server["headers"] = self.headers
        return {"mcpServers": {SERVER_NAME: server}}


def tools_text(server: McpServer, driven: bool) -> str:
    """The first message's words about the tools, for agents that read text only."""
    auth = (f" Send the header `Authorization: Bearer {server.token}` with every request: it opens this "
            "conversation's tools only." if server.token else "")
    how = (f"Talk to the customer only by calling the tool {SEND_TO_USER}(message), which returns the customer's "
           "reply; the customer's first words are below. When the conversation is over, end your task."
           if driven else
           "Call them with your MCP client as often as you need; each result is the tool's output. Your reply to "
           "each message is your message to the customer.")
    return (f"<tools>\nYour tools are on an MCP server (Streamable HTTP) at {server.url}.{auth} {how}\n</tools>")


def mcp_conversation_start(system_prompt: str, server: McpServer, driven: bool, turn_parts: list[Part],
                           history: list[dict[str, object]], seed: int | None = None) -> list[Part]:
    """Parts of a simulation's first message in an MCP tools mode: the system prompt (instructions and
    policy, the trial's seed in its metadata), the MCP server as text and as an `mcpServers` data part, the
    conversation so far, then the turn itself (the user's words)."""
    system = mark(SYSTEM, new_text_part(system_prompt))
    if seed is not None:
        system.metadata.update({SEED: seed})
    return [
        system,
        mark(TOOLS, new_text_part(tools_text(server, driven))),
        mark(TOOLS, new_data_part({**server.entry(), MODE_KEY: AGENT_DRIVEN if driven else MCP})),
        mark(HISTORY, new_data_part({"history": history})),
        *turn_parts,
    ]


@dataclass(frozen=True)
class McpInvitation:
    """What an agent reads from a first message in an MCP tools mode (the agent-side view)."""

    server: McpServer
    driven: bool


def read_mcp_invitation(message: Message) -> McpInvitation | None:
    """The MCP server a first message names, and whether the agent drives the conversation; None when the
    message names none (the message tools mode, or a later message)."""
    for part in message.parts:
        if not part.HasField("data") or (KIND in part.metadata and part.metadata[KIND] != TOOLS):
            continue
        data = MessageToDict(part.data)
        invitation = invitation_from_entry(data) if isinstance(data, dict) else None
        if invitation is not None:
            return invitation
    return None


def invitation_from_entry(data: Mapping[str, object]) -> McpInvitation | None:
    """An invitation from the JSON of the data part `mcp_conversation_start` writes."""
    servers = data.get("mcpServers")
    server = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    if not isinstance(server, dict) or not isinstance(server.get("url"), str):
        return None
    headers = server["headers"] if isinstance(server.get("headers"), dict) else {}
    bearer = str(headers.get("Authorization", ""))
    token = bearer[len("Bearer "):] if bearer.startswith("Bearer ") else None
    return McpInvitation(McpServer(server["url"], token), data.get(MODE_KEY) == AGENT_DRIVEN)

