"""What tau2 will use of an agent card, in words a person can check."""

from __future__ import annotations

from a2a.types import AgentCard

from tau2_a2a.client.session import jsonrpc_version


def describe_card(card: AgentCard, endpoint: str) -> str:
    interfaces = [
        f"{i.protocol_binding} {i.url} (A2A {i.protocol_version or 'unspecified'})"
        for i in card.supported_interfaces
    ]
    schemes = list(card.security_schemes.keys())
    lines = [
        f"Agent card of {endpoint}: valid",
        f"  name:        {card.name}",
        f"  description: {card.description or '-'}",
        f"  version:     {card.version or '-'}",
        "  interfaces:  " + ("\n               ".join(interfaces) or "-"),
        f"  protocol:    A2A {jsonrpc_version(card)} over JSON-RPC (what tau2 will speak)",
        f"  streaming:   {'yes' if card.capabilities.streaming else 'no'} (tau2 sends blocking requests)",
        f"  auth:        {', '.join(schemes) if schemes else 'none declared'}",
        f"  skills:      {', '.join(s.name or s.id for s in card.skills) or '-'}",
    ]
    return "\n".join(lines)
