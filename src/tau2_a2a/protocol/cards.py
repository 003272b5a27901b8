"""The cards we serve: every binding an agent speaks, each declared for A2A 1.0 and 0.3.

Why both versions: a2a-sdk 1.x writes the 0.3 card fields (`url`,
`preferredTransport`, `protocolVersion`, `additionalInterfaces`) only when an
interface declares a 0.3 version, and 0.3 clients (AgentBeats' gateway) reject
a card without them. Why this order (JSON-RPC, then HTTP+JSON, then gRPC):
clients that take the first interface keep speaking JSON-RPC, and the 0.3
fields name JSON-RPC as the preferred transport.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from a2a.types import AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")  # A2A >= 0.3, and the older path
VERSIONS = (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3)
HTTP_BINDINGS = (TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON)
# The URI an agent's card declares in capabilities.extensions to get its tools over MCP (docs/protocol.md).
MCP_TOOLS_EXTENSION = "urn:tau2-a2a:extension:mcp-tools:v1"


def interfaces(url: str, grpc_url: str | None = None,
               http_bindings: tuple[str, ...] = HTTP_BINDINGS) -> list[AgentInterface]:
    """Each binding served, for 1.0 then 0.3: `http_bindings` at `url`, gRPC at `grpc_url` (host:port)."""
    served = [(binding, url) for binding in http_bindings]
    if grpc_url:
        served.append((TransportProtocol.GRPC, grpc_url))
    return [AgentInterface(url=where, protocol_binding=binding, protocol_version=version)
            for binding, where in served for version in VERSIONS]


def agent_card(
    name: str,
    description: str,
    url: str,
    skills: list[AgentSkill] | None = None,
    streaming: bool = False,
    version: str = "0.1.0",
    grpc_url: str | None = None,
    http_bindings: tuple[str, ...] = HTTP_BINDINGS,
    extensions: list[AgentExtension] | None = None,
) -> AgentCard:
    """A card declaring JSON-RPC and HTTP+JSON at `url` (and gRPC at `grpc_url`), for A2A 1.0 and 0.3, and the
    A2A extensions the agent supports."""
    return AgentCard(
        name=name,
        description=description,
        version=version,
        supported_interfaces=interfaces(url, grpc_url, http_bindings),
        capabilities=AgentCapabilities(streaming=streaming, extensions=extensions or []),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills or [],
    )


def card_json(card: AgentCard) -> dict[str, Any]:
    """The card as a2a-sdk serves it: the A2A 1.0 fields plus the 0.3 ones older clients read."""
    from a2a.server.request_handlers.response_helpers import agent_card_to_dict  # 0.5 s of imports

    return agent_card_to_dict(card)


def declares_mcp_tools(card: AgentCard) -> bool:
    """Whether the card asks for its tools over MCP (the extension in capabilities.extensions)."""
    return any(extension.uri == MCP_TOOLS_EXTENSION for extension in card.capabilities.extensions)


def declare_mcp_tools(card: AgentCard) -> AgentCard:
    """`card`, declaring that the agent takes its tools over MCP (what `--a2a-tools auto` looks for)."""
    card.capabilities.extensions.append(AgentExtension(
        uri=MCP_TOOLS_EXTENSION, description="Give this agent the domain's tools over MCP (docs/protocol.md).",
        required=False))
    return card
