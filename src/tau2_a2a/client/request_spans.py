"""An A2A request as a span, and the trace context it carries (see `tracing`; nothing here runs with it off).

Each attempt of a request is a client span: what is asked before it is sent
(the method, the binding, the turn, the attempt), what its record measured
once it ended (status, bytes, events), and its failure by category. The
request carries the current trace context as a2a-sdk's service parameters,
which a2a-sdk sends as HTTP headers (JSON-RPC, HTTP+JSON) and as gRPC
metadata alike, streaming or not; the card's GET carries it as headers.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol, TypeVar
from urllib.parse import urlsplit

from a2a.client import A2ACardResolver, ClientCallContext
from a2a.types import AgentCard

from tau2_a2a.client import tracing
from tau2_a2a.client.config import A2AConfig
from tau2_a2a.client.failures import Failed
from tau2_a2a.client.records import RequestRecord

if TYPE_CHECKING:
    from opentelemetry.trace import Span

T = TypeVar("T")

_SENDS = ("SendMessage", "SendStreamingMessage")


class TracedSession(Protocol):
    """What a request's span says of the session sending it (`session.A2ASession`)."""

    config: A2AConfig
    _card: AgentCard | None
    binding: str
    protocol_version: str
    streaming: bool


async def fetch_card(resolver: A2ACardResolver) -> AgentCard:
    """The agent's card, its GET carrying the current trace context (awaited inside the card fetch's span, under
    the run's): the agent's server span of it then joins the run's trace instead of starting one of its own."""
    headers = tracing.carrier()
    return await resolver.get_agent_card(http_kwargs={"headers": headers} if headers else None)


def with_trace(context: ClientCallContext | None) -> ClientCallContext | None:
    """`context` carrying the current trace context (W3C `traceparent`, `tracestate`) when tracing is on."""
    headers = tracing.carrier()
    if not headers or context is None:
        return context
    return ClientCallContext(timeout=context.timeout,
                             service_parameters={**(context.service_parameters or {}), **headers})


async def traced(request: Awaitable[tuple[T, RequestRecord]], session: TracedSession, method: str,
                 turn: int | None, attempt: int) -> tuple[T, RequestRecord]:
    """Await one metered request of `session` inside its span; the span ends with what its
    record says."""
    with tracing.span(f"A2A {method}", _before(session, method, turn, attempt), kind="client") as span:
        try:
            result, record = await request
        except Failed as failed:
            _after(span, failed.record)
            raise
        _after(span, record)
        return result, record


def _before(session: TracedSession, method: str, turn: int | None, attempt: int) -> dict[str, object]:
    """What a request's span says before it is sent (OpenTelemetry's GenAI and RPC conventions where they fit);
    the agent by its card's name and its endpoint's host and port, never the whole URL."""
    card = session._card
    endpoint = urlsplit(session.config.endpoint)
    return {"rpc.system": "a2a", "rpc.method": method, "a2a.binding": session.binding or None,
            "a2a.protocol_version": session.protocol_version or None, "a2a.turn": turn, "a2a.attempt": attempt,
            "a2a.streaming": session.streaming if method in _SENDS else None,
            "gen_ai.operation.name": "invoke_agent" if method in _SENDS else None,
            "gen_ai.agent.name": card.name if card is not None else None,
            "server.address": endpoint.hostname, "server.port": endpoint.port}


def _after(span: Span, record: RequestRecord) -> None:
    """A request's span, once it ended: its record's measures, and its failure by category."""
    span.set_attributes(tracing.attributes_of({
        "gen_ai.conversation.id": record.context_id, "http.response.status_code": record.http_status,
        "rpc.grpc.status_code": record.grpc_status, "a2a.request.bytes": record.request_bytes,
        "a2a.response.bytes": record.response_bytes, "a2a.events": record.events,
        "a2a.first_event_ms": record.first_event_ms, "a2a.message.input_tokens": record.input_tokens,
        "a2a.message.output_tokens": record.output_tokens}))
    if record.error:
        tracing.failed(span, record.error, record.error_message)
