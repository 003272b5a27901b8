"""`tau2-a2a card URL`: fetch, validate and show an agent card, as a run would see it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tau2_a2a.cli.common import OneLineParser, add_transport_args, auth_token
from tau2_a2a.client.config import AUTH_TOKEN_ENV, A2AConfig
from tau2_a2a.terminal import plain

if TYPE_CHECKING:
    from a2a.types import AgentCard


def add_card_command(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    card = commands.add_parser("card")
    card.add_argument("url", help="The agent's base URL")
    card.add_argument("--a2a-auth-token", default=None, help=f"Bearer token (or ${AUTH_TOKEN_ENV})")
    card.add_argument("--a2a-timeout", type=float, default=30.0, help="Seconds to wait for the card")
    add_transport_args(card)
    card.set_defaults(func=card_command)


def card_command(args: argparse.Namespace) -> int:
    from tau2_a2a.client.session import A2ASession  # a2a-sdk's client: only to fetch a card

    a2a = A2AConfig(endpoint=args.url, timeout=args.a2a_timeout, transport=args.a2a_transport,
                    streaming=args.a2a_streaming, auth_token=auth_token(args.a2a_auth_token))
    session = A2ASession(a2a)
    try:
        print(describe_card(session.card, a2a.endpoint, a2a.transport, a2a.streaming))
    finally:
        session.close()
    return 0


def describe_card(card: AgentCard, endpoint: str, transport: str = "auto", streaming: bool = False) -> str:
    """What tau2 will use of an agent card, in words a person can check; the agent's words shown as text
    (`plain`: their control characters escaped, so the card cannot drive the terminal)."""
    from tau2_a2a.client.bindings import READABLE, choose_interface, protocol_version

    interfaces = [
        f"{plain(i.protocol_binding)} {plain(i.url)} (A2A {plain(i.protocol_version) or 'unspecified'})"
        for i in card.supported_interfaces
    ]
    chosen = choose_interface(card, transport, endpoint)
    schemes = [plain(name) for name in card.security_schemes.keys()]
    if not card.capabilities.streaming:
        stream = "no (tau2 sends blocking requests)"
    elif streaming:
        stream = "yes (tau2 streams, --a2a-streaming)"
    else:
        stream = "yes (tau2 sends blocking requests; --a2a-streaming to stream)"
    lines = [
        f"Agent card of {endpoint}: valid",
        f"  name:        {plain(card.name)}",
        f"  description: {plain(card.description) or '-'}",
        f"  version:     {plain(card.version) or '-'}",
        "  interfaces:  " + ("\n               ".join(interfaces) or "-"),
        f"  protocol:    A2A {plain(protocol_version(chosen))} over {READABLE[chosen.protocol_binding]} at "
        f"{plain(chosen.url)} "
        f"(what tau2 will speak with --a2a-transport {transport})",
        f"  streaming:   {stream}",
        f"  auth:        {', '.join(schemes) if schemes else 'none declared'}",
        f"  skills:      {plain(', '.join(s.name or s.id for s in card.skills)) or '-'}",
    ]
    return "\n".join(lines)
