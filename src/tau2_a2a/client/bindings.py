"""Which of a card's interfaces the client talks to: JSON-RPC, HTTP+JSON or gRPC, A2A 1.0 or 0.3.

A2A 1.0 defines three equivalent bindings; a card lists the interfaces an
agent serves, in the agent's order of preference, possibly once per protocol
version. `--a2a-transport auto` takes the first one we speak; a named binding
takes that binding. Within a binding, protocol 1.0 is preferred to 0.3, as
a2a-sdk's own client does.
"""

from __future__ import annotations

from a2a.types import AgentCard, AgentInterface

from tau2_a2a.client.errors import AgentCardError
from tau2_a2a.terminal import plain

GRPC = "GRPC"
# --a2a-transport name -> the card's protocol_binding (a2a.utils.constants.TransportProtocol's values)
BINDINGS = {"jsonrpc": "JSONRPC", "http-json": "HTTP+JSON", "grpc": GRPC}
_FLAG = {binding: name for name, binding in BINDINGS.items()}
READABLE = {"JSONRPC": "JSON-RPC", "HTTP+JSON": "HTTP+JSON", GRPC: "gRPC"}


def choose_interface(card: AgentCard, transport: str, endpoint: str) -> AgentInterface:
    """The interface to use for `transport` (`auto` or a BINDINGS name); says what the card offers otherwise."""
    interfaces = list(card.supported_interfaces)
    if transport == "auto":
        spoken = [i for i in interfaces if i.protocol_binding in _FLAG]
        if not spoken:
            raise AgentCardError(
                f"The agent card at {endpoint} offers no interface tau2-a2a speaks: it offers "
                f"{_offers(interfaces)}; tau2-a2a speaks JSONRPC, HTTP+JSON and GRPC."
            )
        binding = spoken[0].protocol_binding
    else:
        binding = BINDINGS[transport]
    candidates = [i for i in interfaces if i.protocol_binding == binding]
    if not candidates:
        offered = sorted({_FLAG[i.protocol_binding] for i in interfaces if i.protocol_binding in _FLAG})
        hint = f"pass --a2a-transport {' or '.join(offered)} (or auto)" if offered else "use another agent"
        raise AgentCardError(
            f"--a2a-transport {transport}: the agent card at {endpoint} offers no {binding} interface "
            f"(it offers {_offers(interfaces)}); {hint}."
        )
    return next((i for i in candidates if _major_minor(i.protocol_version) == "1.0"), candidates[0])


def protocol_version(interface: AgentInterface) -> str:
    """The A2A version spoken over `interface`: as its card declares it, 1.0 when it declares none."""
    return interface.protocol_version or "1.0"


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2]) if version else ""


def _offers(interfaces: list[AgentInterface]) -> str:
    if not interfaces:
        return "no interface"
    return plain(", ".join(f"{i.protocol_binding[:40] or '?'} {i.protocol_version[:20] or ''}".strip()
                           + f" at {i.url[:300]}" for i in interfaces[:10]))
