"""What tau2 will use of an agent card, in words a person can check."""

from __future__ import annotations

from a2a.types import AgentCard

from tau2_a2a.client.bindings import READABLE, choose_interface, protocol_version


def describe_card(card: AgentCard, endpoint: str, transport: str = "auto", streaming: bool = False) -> str:
    interfaces = [
        f"{i.protocol_binding} {i.url} (A2A {i.protocol_version or 'unspecified'})"
        for i in card.supported_interfaces
    ]
    chosen = choose_interface(card, transport, endpoint)
    schemes = list(card.security_schemes.keys())
    if not card.capabilities.streaming:
        stream = "no (tau2 sends blocking requests)"
    elif streaming:
        stream = "yes (tau2 streams, --a2a-streaming)"
    else:
        stream = "yes (tau2 sends blocking requests; --a2a-streaming to stream)"
    lines = [
        f"Agent card of {endpoint}: valid",
        f"  name:        {card.name}",
        f"  description: {card.description or '-'}",
        f"  version:     {card.version or '-'}",
        "  interfaces:  " + ("\n               ".join(interfaces) or "-"),
        f"  protocol:    A2A {protocol_version(chosen)} over {READABLE[chosen.protocol_binding]} at {chosen.url} "
        f"(what tau2 will speak with --a2a-transport {transport})",
        f"  streaming:   {stream}",
        f"  auth:        {', '.join(schemes) if schemes else 'none declared'}",
        f"  skills:      {', '.join(s.name or s.id for s in card.skills) or '-'}",
    ]
    return "\n".join(lines)
