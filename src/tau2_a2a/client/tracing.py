"""OpenTelemetry tracing of a run, across the A2A boundary: off unless OpenTelemetry's own variables ask for it.

Off by default, and then free: no span is made, nothing is sent, no header is
added, and OpenTelemetry's SDK is not even imported (every helper here first
reads one module global). Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT,
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER (other than `none`)
is set and OTEL_SDK_DISABLED is not `true`; the SDK then reads the rest of its
variables itself (OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER,
OTEL_EXPORTER_OTLP_HEADERS, ...). A TracerProvider the program set before is
used as it is: never replaced, no exporter added to it.

The trace context crosses every boundary as W3C Trace Context (`traceparent`,
`tracestate`): each A2A request (HTTP headers, gRPC metadata: see
`client.session`), the MCP tools server's requests (`mcp.tool_server`), Ray
actors (a carrier beside each simulation's arguments) and the evaluation
service's run processes (TRACEPARENT in their environment). Span attributes
never hold a secret: the callers put in names, ids, sizes and tau2's own
messages, never headers, tokens or A2A message parts.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from tau2_a2a.client.config import redact_bearer
from tau2_a2a.errors import ConfigError

if TYPE_CHECKING:  # OpenTelemetry is imported only once tracing is on; Starlette and gRPC only by their servers
    import grpc.aio
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.trace import Span, SpanKind, Tracer
    from starlette.applications import Starlette
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "ContinueTrace", "TRACEPARENT_ENV", "TRACE_URL_ENV", "attributes_of", "carrier", "continue_traces", "continued",
    "enabled",
    "environment", "flush", "setup", "span", "start_span", "stop", "trace_id", "trace_url", "wanted",
]

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
EXPORTER_ENV = "OTEL_TRACES_EXPORTER"
DISABLED_ENV = "OTEL_SDK_DISABLED"
# The environment carrier of a process started inside a trace (the evaluation service's runs).
TRACEPARENT_ENV = "TRACEPARENT"
TRACESTATE_ENV = "TRACESTATE"
# A link template for the trace viewer, e.g. http://localhost:6006/projects/default/traces/{trace_id}.
TRACE_URL_ENV = "TAU2_A2A_TRACE_URL"
SERVICE_NAME = "tau2-a2a"
TRACER_NAME = "tau2_a2a"
MAX_TEXT = 4096  # the longest text an attribute keeps (a message, a tool's arguments or result)

_tracer: Tracer | None = None  # None: tracing is off
_lock = threading.Lock()


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether OpenTelemetry's variables ask for traces to be exported."""
    environ = os.environ if environ is None else environ
    if environ.get(DISABLED_ENV, "").strip().lower() == "true":
        return False
    exporter = environ.get(EXPORTER_ENV, "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(environ.get(ENDPOINT_ENV) or environ.get(TRACES_ENDPOINT_ENV))


def enabled() -> bool:
    return _tracer is not None


def setup() -> bool:
    """Turn tracing on if the environment asks for it (once per process); whether it is on.

    ConfigError, in one line, for an exporter it cannot make (an unknown name, a
    protocol whose package is missing).
    """
    global _tracer
    if _tracer is not None or not wanted():
        return _tracer is not None
    with _lock:
        if _tracer is None:
            from opentelemetry import trace

            if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):  # nobody set one yet
                trace.set_tracer_provider(_provider())
            _tracer = trace.get_tracer_provider().get_tracer(TRACER_NAME)
    return True


def stop() -> None:
    """Send what is pending and make no more spans in this process (the provider stays, for its other users)."""
    global _tracer
    flush()
    _tracer = None


def flush(timeout_millis: int = 30000) -> None:
    """Send the spans ended so far (before a process or a Ray actor goes away)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    force_flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if callable(force_flush):
        force_flush(timeout_millis)


def _provider() -> TracerProvider:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": SERVICE_NAME}),
                              id_generator=_ids())
    for exporter in _exporters():
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _ids() -> IdGenerator:
    """Trace and span ids from a generator of their own. The SDK's default draws them from Python's global
    `random`, which tau2 seeds with the run's seed before every run: two runs in one process would then reuse
    the same ids, and their traces would merge."""
    import random

    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class OwnRandomIds(RandomIdGenerator):
        def __init__(self) -> None:
            self._random = random.Random(os.urandom(32))

        def generate_span_id(self) -> int:
            while True:
                span_id = self._random.getrandbits(64)
                if span_id:
                    return span_id

        def generate_trace_id(self) -> int:
            while True:
                trace_id = self._random.getrandbits(128)
                if trace_id:
                    return trace_id

    return OwnRandomIds()


def _exporters() -> list[SpanExporter]:
    names = [n.strip().lower() for n in os.environ.get(EXPORTER_ENV, "otlp").split(",") if n.strip()]
    exporters: list[SpanExporter] = []
    for name in names:
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter(out=sys.stderr))
        elif name == "otlp":
            exporters.append(_otlp_exporter())
        elif name != "none":
            raise ConfigError(f"{EXPORTER_ENV}={name!r} is not an exporter tau2-a2a makes: use otlp or console "
                              "(or set up your own TracerProvider before the run).")
    return exporters


def _otlp_exporter() -> SpanExporter:
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        elif protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        else:
            raise ConfigError(f"OTLP protocol {protocol!r} is not one tau2-a2a exports with: use http/protobuf "
                              "(or grpc with opentelemetry-exporter-otlp-proto-grpc installed).")
    except ImportError:
        package = "opentelemetry-exporter-otlp-proto-grpc" if protocol == "grpc" else "tau2-a2a[otel]"
        raise ConfigError(f"Tracing is asked for ({ENDPOINT_ENV} or {EXPORTER_ENV} is set) but its exporter is "
                          f"not installed: pip install '{package}', or unset the OTEL_ variables.") from None
    return OTLPSpanExporter()


# -- spans ------------------------------------------------------------------------------------


def attributes_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """Span attributes from `values`: None left out (unknown stays unknown), long texts cut to MAX_TEXT."""
    kept: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        kept[key] = value[:MAX_TEXT] if isinstance(value, str) else value
    return kept


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None, *, kind: str = "internal",
         context: Context | None = None, new_trace: bool = False) -> Iterator[Any]:
    """A span current while inside (None when tracing is off; typed Any, not `Span | None`, for the callers that
    checked `enabled()`). An exception marks it failed by its type only:
    exception messages are not copied, so nothing they hold can leak. `new_trace`: the span starts a trace of
    its own, linked to the current span (a simulation of a run: one trace each, small enough to read)."""
    if _tracer is None:
        yield None
        return
    from opentelemetry import trace
    from opentelemetry.context import Context

    links = None
    if new_trace:
        parent = trace.get_current_span(context).get_span_context()
        links = [trace.Link(parent)] if parent.is_valid else None
        context = Context()
    with _tracer.start_as_current_span(name, context=context, kind=_kind(kind), links=links,
                                       attributes=attributes_of(attributes or {}), record_exception=False,
                                       set_status_on_exception=False) as current:
        try:
            yield current
        except BaseException as error:
            current.set_attribute("error.type", type(error).__name__)
            current.set_status(trace.StatusCode.ERROR, type(error).__name__)
            raise


def start_span(name: str, attributes: Mapping[str, Any] | None = None, *, start_time: int | None = None,
               kind: str = "internal") -> Span | None:
    """A span under the current one, ended by the caller (`span.end(end_time=...)`); None when tracing is off."""
    if _tracer is None:
        return None
    return _tracer.start_span(name, kind=_kind(kind), attributes=attributes_of(attributes or {}),
                              start_time=start_time)


def failed(current: Span | None, error_type: str, description: str | None = None) -> None:
    """Mark `current` failed: `error_type` (a category, never a message) and a description the caller vouches
    holds no secret."""
    if current is None:
        return
    from opentelemetry import trace

    current.set_attribute("error.type", error_type)
    current.set_status(trace.StatusCode.ERROR, redact_bearer(description or error_type)[:MAX_TEXT])


def _kind(kind: str) -> SpanKind:
    from opentelemetry.trace import SpanKind

    return {"client": SpanKind.CLIENT, "server": SpanKind.SERVER}.get(kind, SpanKind.INTERNAL)


# -- context across processes ---------------------------------------------------------------


def carrier() -> dict[str, str]:
    """The current trace context as W3C headers (`traceparent`, `tracestate`); empty when tracing is off."""
    if _tracer is None:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    headers: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(headers)
    return headers


def context_from(headers: Mapping[str, str] | None) -> Context | None:
    """The trace context a W3C carrier names; None without a valid `traceparent` (or with tracing off)."""
    if _tracer is None or not headers or not headers.get("traceparent"):
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = TraceContextTextMapPropagator().extract(dict(headers))
    return context if trace.get_current_span(context).get_span_context().is_valid else None


@contextmanager
def continued(headers: Mapping[str, str] | None) -> Iterator[None]:
    """Inside, the trace the carrier names is the current one (nothing changes without one)."""
    with within(context_from(headers)):
        yield


def current_context() -> Context | None:
    """The current OpenTelemetry context, to continue elsewhere (None when tracing is off)."""
    if _tracer is None:
        return None
    from opentelemetry import context as contexts

    return contexts.get_current()


@contextmanager
def within(context: Context | None) -> Iterator[None]:
    """Inside, `context` (from `current_context`) is the current one; nothing changes for None."""
    if context is None:
        yield
        return
    from opentelemetry import context as contexts

    token = contexts.attach(context)
    try:
        yield
    finally:
        contexts.detach(token)


def trace_id() -> str | None:
    """The current trace's id, 32 hex digits; None when tracing is off or no trace is current."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None


def environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The OTEL_ variables of this process, for a process it starts elsewhere (a Ray actor) to trace alike."""
    environ = os.environ if environ is None else environ
    return {name: value for name, value in environ.items() if name.startswith("OTEL_")}


def environment_carrier() -> dict[str, str]:
    """The trace context this process was started inside (TRACEPARENT, TRACESTATE), as a W3C carrier."""
    found = {"traceparent": os.environ.get(TRACEPARENT_ENV, ""), "tracestate": os.environ.get(TRACESTATE_ENV, "")}
    return {name: value for name, value in found.items() if value}


def trace_url(trace: str | None, template: str | None = None) -> str | None:
    """The link to a trace in the user's viewer, from TAU2_A2A_TRACE_URL (`{trace_id}` replaced); None without
    a template or a trace."""
    template = os.environ.get(TRACE_URL_ENV) if template is None else template
    if not template or not trace:
        return None
    return template.replace("{trace_id}", trace)


# -- servers ------------------------------------------------------------------------------


class ContinueTrace:
    """ASGI middleware: a request carrying W3C trace context is served in a span of that trace.

    With tracing off it passes every request straight through.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _tracer is None or scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope.get("headers") or []
                   if name in (b"traceparent", b"tracestate")}
        method, path = scope.get("method", ""), scope.get("path", "")
        with span(f"{method} {path}", {"http.request.method": method, "url.path": path}, kind="server",
                  context=context_from(headers)) as current:

            async def send_seen(message: Message) -> None:
                if message.get("type") == "http.response.start":
                    status = int(message.get("status", 0))
                    current.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        failed(current, str(status))
                await send(message)

            await self.app(scope, receive, send_seen)


def continue_traces(app: Starlette) -> Starlette:
    """`app` (made by `protocol.hosting.a2a_app`) continuing the trace each request carries, on every binding:
    ContinueTrace over JSON-RPC and HTTP+JSON, `grpc_continue_trace` over its gRPC server. Add it before the app
    starts; while tracing is off both pass every request straight through."""
    app.add_middleware(ContinueTrace)
    app.state.grpc_interceptors = [grpc_continue_trace(), *getattr(app.state, "grpc_interceptors", [])]
    return app


def grpc_continue_trace() -> grpc.aio.ServerInterceptor:
    """A grpc.aio server interceptor, gRPC's ContinueTrace: a call whose metadata carries W3C trace context is
    served in a span of that trace. With tracing off it passes every call straight through."""
    import inspect

    import grpc

    class ContinueGrpcTrace(grpc.aio.ServerInterceptor):  # type: ignore[misc]
        async def intercept_service(
                self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
                details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
            handler = await continuation(details)
            if handler is None or _tracer is None or not (handler.unary_unary or handler.unary_stream):
                return handler
            headers = {name: value for name, value in details.invocation_metadata or ()
                       if name in ("traceparent", "tracestate")}
            method = details.method

            def served() -> AbstractContextManager[Span | None]:
                return span(f"gRPC {method}", {"rpc.system": "grpc", "rpc.method": method.rsplit("/", 1)[-1]},
                            kind="server", context=context_from(headers))

            if handler.unary_stream:
                inner = handler.unary_stream

                async def stream(request: object, context: grpc.aio.ServicerContext) -> AsyncIterator[object]:
                    with served():
                        answered = inner(request, context)
                        if inspect.isasyncgen(answered):
                            async for item in answered:
                                yield item
                        else:
                            await answered

                return grpc.unary_stream_rpc_method_handler(stream, handler.request_deserializer,
                                                            handler.response_serializer)
            inner_unary = handler.unary_unary

            async def unary(request: object, context: grpc.aio.ServicerContext) -> object:
                with served():
                    return await inner_unary(request, context)

            return grpc.unary_unary_rpc_method_handler(unary, handler.request_deserializer,
                                                       handler.response_serializer)

    return ContinueGrpcTrace()

