"""The connections under a2a-sdk's transports: HTTP's metered pool and gRPC's channel, both pinned by the target policy.

Over JSON-RPC and HTTP+JSON the HTTP exchange goes through one thread-safe
connection pool per session (httpcore's, as httpx uses it), called straight
from the coroutine that a worker thread runs on its own event loop: every
thread of a run shares the same connections, and a request costs no
hand-over to another thread. Each connection opens only to addresses the
target policy allows, resolved right then; gRPC's channel is pinned the same
way.

A reply has a wall-clock deadline (`Wire.deadline`) that holds inside the
connection: every read and write of the socket waits at most the time the
reply has left, so an agent that trickles its headers or its body a byte at a
time is cut off on time, for every request (the card, a blocking reply, an
event stream, a poll). gRPC's whole call is bounded the same way
(`metered`). `Wire.abort()` ends a request in flight from another thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import httpcore
import httpx

from tau2_a2a.client.config import DEFAULT_MAX_REPLY_BYTES, DEFAULT_MAX_REQUEST_BYTES, A2AConfig, redact, redact_bearer
from tau2_a2a.client.errors import (
    AgentReplyTooLarge,
    AgentRequestAborted,
    AgentTargetRefused,
    AgentUnreachable,
)
from tau2_a2a.client.httpcore_transport import HttpcoreTransport
from tau2_a2a.client.limits import request_over_limit
from tau2_a2a.client.targets import TargetPolicy, TargetRefused, TargetUnresolvable, grpc_host_port
from tau2_a2a.protocol.timestamps import event_lines_as_utc, naive_status_times_as_utc

if TYPE_CHECKING:
    import ssl

    import grpc.aio

T = TypeVar("T")

wire_log = logging.getLogger("tau2_a2a.wire")


@dataclass
class Wire:
    """What was seen of the exchanges of one request: HTTP by the metering transport, gRPC by the session.

    It also holds what ends the request early: its `deadline`, which every read and write of its
    connection keeps to, and `abort()`, which another thread calls to end it at once.
    """

    status: int | None = None
    request_bytes: int = 0
    response_bytes: int = 0
    received_bytes: int = 0  # all it read of its reply over HTTP, status line and headers too: did any of it come?
    error_body: str = ""  # the start of the body of a reply with status >= 400
    events: int = 0  # A2A events received (a blocking call has one)
    first_event_at: float | None = None  # perf_counter() of the first event
    deadline: float | None = None  # perf_counter() by which the reply must be in
    aborted: bool = False
    finished: bool = False  # the request is over: its connection may serve another one now
    _stream: httpcore.NetworkStream | None = field(default=None, repr=False)  # the connection serving it (HTTP)
    _task: asyncio.Task[object] | None = field(default=None, repr=False)  # the task awaiting the call (gRPC)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)  # and the task's loop
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def saw_event(self, size: int) -> None:
        self.events += 1
        self.response_bytes += size
        if self.first_event_at is None:
            self.first_event_at = time.perf_counter()

    def measures(self, started: float) -> dict[str, Any]:
        """The request's measures in its record's fields, `started` being its perf_counter() start; taken at its end."""
        first_event_ms = None if self.first_event_at is None else round((self.first_event_at - started) * 1000.0, 3)
        return {"http_status": self.status, "latency_ms": round((time.perf_counter() - started) * 1000.0, 3),
                "request_bytes": self.request_bytes, "response_bytes": self.response_bytes, "events": self.events,
                "first_event_ms": first_event_ms}

    def abort(self) -> None:
        """End the request in flight, from any thread: the socket of the connection serving it is shut (HTTP),
        the task awaiting it cancelled (gRPC). The request then fails with AgentRequestAborted, and is not
        retried; a request not yet begun fails as it begins."""
        with self._lock:
            if self.finished:
                return  # over already: its connection may serve another request now
            self.aborted = True
            stream, task, loop = self._stream, self._task, self._loop
        if stream is not None:
            _shut(stream)
        if task is not None and loop is not None:
            try:
                loop.call_soon_threadsafe(self._cancel, task)
            except RuntimeError:
                pass  # the loop is closed: nothing awaits the call any more

    def _cancel(self, task: asyncio.Task[object]) -> None:
        """On the call's loop: cancel `task` if it still awaits this request."""
        if self._task is task:
            task.cancel()

    def _serving(self, stream: httpcore.NetworkStream) -> None:
        """`stream` serves the request now (the connection's reads and writes say so)."""
        with self._lock:
            self._stream = stream
            aborted = self.aborted
        if aborted:
            raise _aborted()

    def _awaited_by(self, task: asyncio.Task[object] | None, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            self._task, self._loop = task, loop
            aborted = self.aborted
        if aborted:
            raise _aborted()


def _aborted() -> AgentRequestAborted:
    return AgentRequestAborted("the request was aborted before its reply came (its simulation ended)")


def _shut(stream: httpcore.NetworkStream) -> None:
    """Shut a connection's socket, which ends any read or write on it at once, in whatever thread."""
    sock = stream.get_extra_info("socket")
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


current_wire: contextvars.ContextVar[Wire | None] = contextvars.ContextVar(
    "tau2_a2a_wire", default=None
)


async def metered(call: Coroutine[Any, Any, T], wire: Wire, timeout: float | None) -> T:
    """Await a request's coroutine with `wire` current, so that the transport under a2a-sdk counts into it.

    `timeout`: the time the reply has, for a transport that cannot keep to it
    itself (gRPC: the whole call, a stream's events included, is bounded here,
    and `wire.abort()` cancels it); over HTTP the connection's reads and writes
    keep to `wire.deadline`, and `wire.abort()` shuts its socket.
    """
    token = current_wire.set(wire)
    try:
        if timeout is None:
            return await call
        task = asyncio.current_task()
        try:
            wire._awaited_by(task, asyncio.get_running_loop())
        except AgentRequestAborted:
            call.close()  # never begun
            raise
        try:  # the whole call, a stream's events included (gRPC's own deadline, the same, is there too)
            return await asyncio.wait_for(call, timeout=timeout)
        except asyncio.CancelledError:
            if not wire.aborted or task is None:
                raise
            task.uncancel()  # the cancel was ours, for this request only
            raise _aborted() from None
        finally:
            wire._task = None
    finally:
        with wire._lock:
            wire.finished = True
        current_wire.reset(token)


class _CountedStream(httpx.AsyncByteStream):
    """An event stream passed on chunk by chunk (so its events arrive as sent), counted and logged.

    Its reads keep to the reply's deadline like any other (see `_DeadlineStream`),
    so a stream that falls silent, or trickles on, ends as timed out at the deadline.
    Events pass on line by line, each line whole (see `protocol.timestamps.event_lines_as_utc`).
    """

    def __init__(self, inner: Any, wire: Wire | None, log_chunk: Callable[[bytes], None], max_bytes: int,
                 request: httpx.Request) -> None:
        self._inner = inner
        self._wire = wire
        self._log_chunk = log_chunk
        self._max_bytes = max_bytes
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        partial_line = bytearray()  # events are read line by line: a chunk may end inside a line
        for chunk in self._inner:
            received += len(chunk)
            if self._wire is not None:
                self._wire.response_bytes += len(chunk)
            if received > self._max_bytes:
                raise AgentReplyTooLarge(_too_large(self._request, received, self._max_bytes))
            self._log_chunk(chunk)
            end = chunk.rfind(b"\n") + 1
            if not end:
                partial_line += chunk
                continue
            lines, partial_line = bytes(partial_line) + chunk[:end], bytearray(chunk[end:])
            yield event_lines_as_utc(lines)
        if partial_line:
            yield event_lines_as_utc(bytes(partial_line))

    async def aclose(self) -> None:
        self._inner.close()


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write keeps to the deadline of the request it serves.

    httpcore gives each read the request's read timeout afresh, so a reply
    trickled a byte at a time, headers or body, would never time out. Here each
    read and write looks up the request being served (`current_wire`: httpx's
    synchronous pool runs in the coroutine's own thread, in its context) and
    waits at most the time its reply has left; once that is gone it fails as
    timed out. It also tells the request which connection serves it, so that
    `Wire.abort()` can shut it.
    """

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        wire = current_wire.get()
        timeout = self._bounded(wire, timeout, httpcore.ReadTimeout)
        try:
            data = self._inner.read(max_bytes, timeout)
        except Exception:
            if wire is not None and wire.aborted:
                raise _aborted() from None
            raise
        if wire is not None:
            wire.received_bytes += len(data)
            if wire.aborted:
                raise _aborted()
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        wire = current_wire.get()
        timeout = self._bounded(wire, timeout, httpcore.WriteTimeout)
        try:
            self._inner.write(buffer, timeout)
        except Exception:
            if wire is not None and wire.aborted:
                raise _aborted() from None
            raise

    def _bounded(self, wire: Wire | None, timeout: float | None, expired: type[Exception]) -> float | None:
        """The wait of one read or write: `timeout`, cut to the time the reply has left."""
        if wire is None:
            return timeout
        wire._serving(self)
        if wire.deadline is None:
            return timeout
        left = wire.deadline - time.perf_counter()
        if left <= 0:
            raise expired("the reply's time ran out (--a2a-timeout) before it was complete")
        return left if timeout is None else min(timeout, left)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


def _too_large(request: httpx.Request, received: int, max_bytes: int) -> str:
    return (f"the reply to {request.method} {request.url} is over {max_bytes} bytes "
            f"(--a2a-max-reply-bytes); tau2-a2a stopped reading it at {received} bytes. Raise "
            "--a2a-max-reply-bytes if the agent's replies are really this large.")


class _PolicyBackend(httpcore.SyncBackend):
    """Opens each TCP connection only to addresses the target policy allows, resolved right then.

    The host is resolved here, when the connection opens, every address is
    checked, and the socket connects to those very addresses: what is
    checked is what is connected to, so a DNS answer that changed since an
    earlier check is caught. TLS still verifies the certificate against
    the URL's host name (httpcore passes it as the server name).
    """

    def __init__(self, policy: TargetPolicy) -> None:
        self._policy = policy

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.NetworkStream:
        try:
            addresses = self._policy.addresses(host, f"A connection to {host}:{port}")
        except TargetUnresolvable as error:
            raise httpcore.ConnectError(str(error)) from None
        except TargetRefused as error:
            raise AgentTargetRefused(str(error)) from None
        failure: Exception | None = None
        for address in addresses:
            try:
                return _DeadlineStream(super().connect_tcp(str(address), port, timeout, local_address,
                                                           socket_options))
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
        raise failure or httpcore.ConnectError(f"{host} has no address")


def _pinned_transport(policy: TargetPolicy, limits: httpx.Limits) -> HttpcoreTransport:
    """httpx's synchronous pool, as HTTPTransport makes it, its connections opened through `_PolicyBackend`."""
    return HttpcoreTransport(httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=_PolicyBackend(policy),
    ))


class _MeteringTransport(httpx.AsyncBaseTransport):
    """Counts bytes and keeps the HTTP status of each request; logs bodies in debug mode.

    Underneath is httpx's synchronous, thread-safe connection pool, called
    straight from the coroutine: the coroutine runs on the event loop of the
    thread that waits for its reply, so blocking there holds up nothing else,
    and no thread hand-over or async socket layer is paid per request. Each
    request's timeouts are cut to the time its reply has left.

    A request body counts as sent unless the connection could not even be
    opened; the status counts as soon as the status line arrives, even if the
    body is then cut off. An event stream (SSE) passes through chunk by chunk,
    so its events arrive as sent; any other body is read whole (an error body's
    words go into the error message). Reading stops once a reply is over
    `max_bytes`, whole body or event stream, and the request fails as a
    malformed reply. A request body over `max_request_bytes` is not sent.
    Debug logs never show the bearer token, not even when the agent echoes it
    back. A task status's timestamp written without a UTC offset is read as
    UTC (protocol/timestamps.py); nothing else is changed.
    """

    def __init__(self, inner: httpx.BaseTransport, debug: bool, token: str | None,
                 max_bytes: int = DEFAULT_MAX_REPLY_BYTES,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        self._inner = inner
        self._debug = debug
        self._token = token
        self._max_bytes = max_bytes
        self._max_request_bytes = max_request_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        wire = current_wire.get()
        if not isinstance(request.stream, httpx.SyncByteStream):  # a2a-sdk sends whole JSON bodies; just in case
            request.stream = httpx.ByteStream(await request.aread())
        body = request.content
        if len(body) > self._max_request_bytes:
            raise request_over_limit(f"{request.method} {request.url}", len(body), self._max_request_bytes)
        if wire is not None and wire.deadline is not None:
            _cut_timeouts(request, wire.deadline)
        if self._debug:
            wire_log.info("A2A request %s %s\n%s", request.method, request.url,
                          _shown(body, self._token))
        try:
            response = self._inner.handle_request(request)
        except (httpx.ConnectError, httpx.ConnectTimeout, AgentTargetRefused):
            raise  # nothing was sent
        except BaseException:
            if wire is not None:
                wire.request_bytes += len(body)
            raise
        if wire is not None:
            wire.request_bytes += len(body)
            wire.status = response.status_code
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return httpx.Response(
                response.status_code,
                headers=response.headers,
                stream=_CountedStream(response.stream, wire, self._log_reply_chunk, self._max_bytes, request),
                extensions=response.extensions,
                request=request,
            )
        chunks: list[bytes] = []
        received = 0
        try:
            for chunk in response.stream:  # type: ignore[union-attr]
                chunks.append(chunk)
                received += len(chunk)
                if received > self._max_bytes:
                    raise AgentReplyTooLarge(_too_large(request, received, self._max_bytes),
                                             status=response.status_code)
        finally:
            response.close()
            if wire is not None:
                wire.response_bytes += received
        raw = b"".join(chunks)
        if wire is not None and response.status_code >= 400:
            wire.error_body = raw[:2000].decode(errors="replace")
        if self._debug:
            wire_log.info("A2A reply %s\n%s", response.status_code,
                          _shown(raw, self._token))
        headers = response.headers
        read = naive_status_times_as_utc(raw)
        if read is not raw:
            headers = httpx.Headers({k: v for k, v in headers.items() if k.lower() != "content-length"})
        return httpx.Response(
            response.status_code,
            headers=headers,
            stream=httpx.ByteStream(read),
            extensions=response.extensions,
            request=request,
        )

    def _log_reply_chunk(self, chunk: bytes) -> None:
        if self._debug:
            wire_log.info("A2A reply chunk\n%s", _shown(chunk, self._token))

    async def aclose(self) -> None:
        self._inner.close()


def _shown(body: bytes, token: str | None) -> str:
    """A body as the debug log shows it: without the agent's token, nor any bearer token it carries."""
    return redact_bearer(redact(body.decode(errors="replace"), token))


def _cut_timeouts(request: httpx.Request, deadline: float) -> None:
    """Each wait of this request (pool, connect, write, each read) is cut to the time its reply has left."""
    left = max(deadline - time.perf_counter(), 0.001)
    timeouts = request.extensions.get("timeout", {})
    request.extensions["timeout"] = {
        name: left if value is None else min(value, left) for name, value in timeouts.items()
    }


def make_http(config: A2AConfig, targets: TargetPolicy) -> httpx.AsyncClient:
    """The session's HTTP client: its bearer token, its timeouts, its metered and pinned connection pool."""
    headers = {}
    if config.auth_token:
        headers["Authorization"] = f"Bearer {config.auth_token}"
    transport = _MeteringTransport(
        _pinned_transport(targets,
                          httpx.Limits(max_connections=256, max_keepalive_connections=64, keepalive_expiry=30.0)),
        config.debug,
        config.auth_token,
        config.max_reply_bytes,
        config.max_request_bytes,
    )
    timeout = httpx.Timeout(config.timeout, connect=min(config.timeout, 10.0))
    return httpx.AsyncClient(headers=headers, timeout=timeout, transport=transport)


def open_grpc_channel(url: str, targets: TargetPolicy, max_reply_bytes: int) -> grpc.aio.Channel:
    """A channel to the addresses of the card's gRPC target that the policy allows, resolved now.

    gRPC would resolve the name itself, and again on every reconnect; the
    channel is pinned to the checked addresses instead, the name kept as
    its authority (and, over TLS, as the name the certificate must carry).
    """
    import grpc

    what = f"The gRPC target {url} named by the agent card"
    try:
        host, port = grpc_host_port(url, what)
        addresses = targets.addresses(host, what)
    except TargetUnresolvable as error:
        raise AgentUnreachable(str(error)) from None
    except TargetRefused as error:
        raise AgentTargetRefused(str(error)) from None
    family = addresses[0].version
    pinned = ",".join(f"{a}:{port}" if family == 4 else f"[{a}]:{port}"
                      for a in addresses if a.version == family)
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    options = [("grpc.max_send_message_length", 64 << 20),
               ("grpc.max_receive_message_length", max_reply_bytes),
               ("grpc.default_authority", authority)]
    target = f"ipv{family}:{pinned}"
    if url.startswith(("https://", "grpcs://")):
        options.append(("grpc.ssl_target_name_override", host))
        return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(), options)
    return grpc.aio.insecure_channel(target, options)


def grpc_stream_too_large(endpoint: str, received: int, max_bytes: int) -> AgentReplyTooLarge:
    """gRPC counts a stream's events one by one (see `Wire.saw_event`); their sum has a limit too."""
    return AgentReplyTooLarge(
        f"the gRPC event stream of SendStreamingMessage to {endpoint} is over {max_bytes} bytes "
        f"(--a2a-max-reply-bytes); tau2-a2a stopped reading it at {received} bytes. Raise "
        "--a2a-max-reply-bytes if the agent's replies are really this large.")
