"""What discovery checks: the card itself, the target policy on the URLs it names, and access to its interface."""

from __future__ import annotations

from a2a.types import AgentCard, AgentInterface

from tau2_a2a.client.bindings import GRPC, READABLE
from tau2_a2a.client.errors import (
    A2AFailure,
    AgentAuthError,
    AgentCardError,
    AgentHTTPError,
    AgentReplyTooLarge,
    AgentTargetRefused,
    AgentTimeout,
    AgentUnreachable,
)
from tau2_a2a.client.failures import Failed, chain_of, root_message
from tau2_a2a.client.targets import TargetPolicy, TargetRefused, TargetUnresolvable, grpc_host_port
from tau2_a2a.terminal import plain

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
_NOT_SERVED = (404, 405, 501)  # the access check's answers that say nothing serves the interface at its URL


def validate_card(card: AgentCard, endpoint: str) -> None:
    """A card tau2 can use names the agent and lists an interface (which one we use: `choose_interface`)."""
    problems = []
    if not card.name:
        problems.append("it has no name")
    if not card.supported_interfaces:
        problems.append("it lists no interface (supportedInterfaces, or url in a 0.3 card)")
    if problems:
        raise AgentCardError(f"The agent card at {endpoint} is invalid: {'; '.join(problems)}.")


def missing_card(endpoint: str) -> AgentCardError:
    """Neither card path answered: most likely the endpoint is not the agent's base URL."""
    return AgentCardError(
        f"No agent card at {endpoint}{CARD_PATHS[0]} nor {endpoint}{CARD_PATHS[1]} (HTTP 404). "
        "Check that --a2a-endpoint is the agent's base URL and that the agent serves its card.",
        status=404,
    )


def check_interfaces(card: AgentCard, binding: str, endpoint: str, targets: TargetPolicy) -> None:
    """Every URL the card names for `binding` (a2a-sdk may take any of them) must pass the target policy."""
    readable = READABLE.get(binding, binding)
    for interface in card.supported_interfaces:
        if interface.protocol_binding != binding:
            continue
        what = f"The agent card at {endpoint} names {plain(interface.url[:300])} for {readable}; that URL"
        try:
            if binding == GRPC:
                host, _ = grpc_host_port(interface.url, what)
                targets.addresses(host, what)
            else:
                targets.check(interface.url, what)
        except TargetUnresolvable:
            continue  # the access check says nothing answers there
        except TargetRefused as refused:
            raise AgentTargetRefused(str(refused)) from None


def access_refusal(failed: Failed, endpoint: str, interface: AgentInterface, token: str | None) -> A2AFailure | None:
    """What a failed access check means: the failure that stops the run, or None if the run may go on.

    A wrong token, a URL nobody listens on, a URL that serves another
    binding: each is said in the card's terms, so the user knows what to fix.
    """
    failure, rpc_url = failed.failure, plain(interface.url[:300])
    binding = READABLE.get(interface.protocol_binding, interface.protocol_binding)
    if isinstance(failure, (AgentTargetRefused, AgentReplyTooLarge)):
        return failure
    if isinstance(failure, AgentAuthError):
        how = f"HTTP {failure.status}" if failure.status else "UNAUTHENTICATED"
        return AgentAuthError(
            f"The agent at {endpoint} refused a {binding} request to {rpc_url} with {how}. "
            "Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN.",
            status=failure.status,
        )
    if isinstance(failure, (AgentUnreachable, AgentTimeout)):
        why = root_message(chain_of(failed.cause), token)
        return AgentUnreachable(
            f"The agent card at {endpoint} names {rpc_url} for {binding}, but nothing answers there "
            f"({why}). Fix the url in the agent's card, or start the agent there.",
        )
    if isinstance(failure, AgentHTTPError) and failure.status in _NOT_SERVED:
        return AgentCardError(
            f"The agent card at {endpoint} names {rpc_url} for {binding}, but that URL answers "
            f"HTTP {failure.status}: it does not serve {binding}. Fix the url in the agent's card, or "
            "choose another of its interfaces with --a2a-transport.",
            status=failure.status,
        )
    return None
