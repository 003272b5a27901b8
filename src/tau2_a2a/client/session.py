"""One A2A session per endpoint: card discovery, one connection pool, send with retries.

tau2 runs simulations in worker threads; a2a-sdk is async. Over JSON-RPC and
HTTP+JSON a worker thread runs a2a-sdk's coroutines itself, on an event loop
of its own, and the HTTP exchange underneath goes through one thread-safe
connection pool per session (httpx's): every thread of a run shares the same
connections, and a request costs no hand-over to another thread. gRPC's
channel belongs to one event loop, so a gRPC session keeps that loop in a
background thread and worker threads hand their coroutines to it. The
binding (JSON-RPC, HTTP+JSON, gRPC) is chosen from the card once; a2a-sdk's
own transport for it does the talking, blocking or streaming.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import functools
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientTimeoutError, AgentCardResolutionError
from a2a.types import (
    AgentCard,
    AgentInterface,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError, TaskNotFoundError

from tau2_a2a.client.bindings import GRPC, READABLE, choose_interface, protocol_version
from tau2_a2a.client.errors import (
    A2AFailure,
    AgentAuthError,
    AgentCardError,
    AgentHTTPError,
    AgentMalformedReply,
    AgentProtocolError,
    AgentReplyTooLarge,
    AgentTargetRefused,
    AgentTimeout,
    AgentUnreachable,
)
from tau2_a2a.client.records import RequestRecord, TokenCounter
from tau2_a2a.client.targets import TargetPolicy, TargetRefused, TargetUnresolvable, grpc_host_port
from tau2_a2a.client.config import DEFAULT_MAX_REPLY_BYTES, A2AConfig, redact
from tau2_a2a.protocol.messages import reply_content, answer_parts
from tau2_a2a.protocol.stream import StreamedReply
from tau2_a2a.protocol.toolcalls import MalformedReply

log = logging.getLogger("tau2_a2a.client")
wire_log = logging.getLogger("tau2_a2a.wire")

POLL_SECONDS = 0.2
_NOT_SERVED = (404, 405, 501)  # the access check's answers that say nothing serves the interface at its URL
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
_PENDING_STATES = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
_FAILED_STATES = (
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_AUTH_REQUIRED,
)


@dataclass
class _Wire:
    """What was seen of the exchanges of one request: HTTP by the metering transport, gRPC by the session."""

    status: int | None = None
    request_bytes: int = 0
    response_bytes: int = 0
    error_body: str = ""  # the start of the body of a reply with status >= 400
    events: int = 0  # A2A events received (a blocking call has one)
    first_event_at: float | None = None  # perf_counter() of the first event
    deadline: float | None = None  # perf_counter() by which the reply must be in

    def saw_event(self, size: int) -> None:
        self.events += 1
        self.response_bytes += size
        if self.first_event_at is None:
            self.first_event_at = time.perf_counter()


_current_wire: contextvars.ContextVar[_Wire | None] = contextvars.ContextVar(
    "tau2_a2a_wire", default=None
)


class _CountedStream(httpx.AsyncByteStream):
    """An event stream passed on chunk by chunk (so its events arrive as sent), counted and logged.

    The pool's reads block, each with the timeout the request started with,
    so a stream that falls silent just before its reply is due would wait a
    whole timeout more. At the reply's deadline a timer shuts the
    connection's socket, which ends any read at once, and the stream ends as
    timed out, silent or still flowing.
    """

    def __init__(self, inner: Any, wire: _Wire | None, log_chunk: Any, network_stream: Any,
                 max_bytes: int, request: httpx.Request) -> None:
        self._inner = inner
        self._wire = wire
        self._log_chunk = log_chunk
        self._network_stream = network_stream
        self._max_bytes = max_bytes
        self._request = request

    async def __aiter__(self) -> Any:
        deadline = self._wire.deadline if self._wire is not None else None
        timer = _shut_at(deadline, self._network_stream) if deadline is not None else None
        received = 0
        try:
            for chunk in self._inner:
                received += len(chunk)
                if self._wire is not None:
                    self._wire.response_bytes += len(chunk)
                if received > self._max_bytes:
                    raise AgentReplyTooLarge(_too_large(self._request, received, self._max_bytes))
                self._log_chunk(chunk)
                yield chunk
        except httpx.TransportError:
            if deadline is not None and time.perf_counter() >= deadline:
                raise httpx.ReadTimeout("the reply's time ran out while its event stream was still open") from None
            raise
        finally:
            if timer is not None:
                timer.cancel()

    async def aclose(self) -> None:
        self._inner.close()


def _shut_at(deadline: float, network_stream: Any) -> threading.Timer | None:
    """A timer that shuts the stream's socket at `deadline` (a perf_counter() time), ending its reads."""
    sock = network_stream.get_extra_info("socket") if network_stream is not None else None
    if sock is None:
        return None

    def shut() -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed: the stream ended as the timer fired

    timer = threading.Timer(max(deadline - time.perf_counter(), 0.0), shut)
    timer.daemon = True
    timer.start()
    return timer


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
                    socket_options: Any = None) -> httpcore.NetworkStream:
        try:
            addresses = self._policy.addresses(host, f"A connection to {host}:{port}")
        except TargetUnresolvable as error:
            raise httpcore.ConnectError(str(error)) from None
        except TargetRefused as error:
            raise AgentTargetRefused(str(error)) from None
        failure: Exception | None = None
        for address in addresses:
            try:
                return super().connect_tcp(str(address), port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
        raise failure or httpcore.ConnectError(f"{host} has no address")


class _PinnedTransport(httpx.HTTPTransport):
    """httpx's synchronous pool, its connections opened through `_PolicyBackend`."""

    def __init__(self, policy: TargetPolicy, limits: httpx.Limits) -> None:
        super().__init__(limits=limits)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_PolicyBackend(policy),
        )


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
    malformed reply. Debug logs never show the bearer token, not even when
    the agent echoes it back.
    """

    def __init__(self, inner: httpx.BaseTransport, debug: bool, token: str | None,
                 max_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> None:
        self._inner = inner
        self._debug = debug
        self._token = token
        self._max_bytes = max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        wire = _current_wire.get()
        if not isinstance(request.stream, httpx.SyncByteStream):  # a2a-sdk sends whole JSON bodies; just in case
            request.stream = httpx.ByteStream(await request.aread())
        body = request.content
        if wire is not None and wire.deadline is not None:
            _cut_timeouts(request, wire.deadline)
        if self._debug:
            wire_log.info("A2A request %s %s\n%s", request.method, request.url,
                          redact(body.decode(errors="replace"), self._token))
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
                stream=_CountedStream(response.stream, wire, self._log_reply_chunk,
                                      response.extensions.get("network_stream"), self._max_bytes, request),
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
                          redact(raw.decode(errors="replace"), self._token))
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=httpx.ByteStream(raw),
            extensions=response.extensions,
            request=request,
        )

    def _log_reply_chunk(self, chunk: bytes) -> None:
        if self._debug:
            wire_log.info("A2A reply chunk\n%s", redact(chunk.decode(errors="replace"), self._token))

    async def aclose(self) -> None:
        self._inner.close()


def _cut_timeouts(request: httpx.Request, deadline: float) -> None:
    """Each wait of this request (pool, connect, write, each read) is cut to the time its reply has left."""
    left = max(deadline - time.perf_counter(), 0.001)
    timeouts = request.extensions.get("timeout", {})
    request.extensions["timeout"] = {
        name: left if value is None else min(value, left) for name, value in timeouts.items()
    }


class _OwnLoop:
    """This thread's event loop for a2a-sdk's coroutines; closed when the thread ends."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        self.loop.close()


_own_loops = threading.local()
# A forked worker must not share its parent's loop (its selector and wake-up pipe): it makes its own.
os.register_at_fork(after_in_child=lambda: _own_loops.__dict__.clear())


def _run_here(coroutine: Any) -> Any:
    """Run a coroutine to its end on this thread's own event loop."""
    own: _OwnLoop | None = getattr(_own_loops, "own", None)
    if own is None:
        own = _own_loops.own = _OwnLoop()
    return own.loop.run_until_complete(coroutine)


def _in_event_loop() -> bool:
    """Whether the calling thread is running an event loop (which must not be blocked)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@dataclass
class Exchange:
    """One send: the agent's final reply and a record per request it took."""

    reply: Message | Task
    context_id: str | None
    task_id: str | None
    records: list[RequestRecord] = field(default_factory=list)


class A2ASession:
    """The A2A side of one run in one process: its card, its connections, and its discovery records.

    A run makes one session from its A2AConfig and closes it at the end; the
    token lives only in the config the session holds.
    """

    def __init__(self, config: A2AConfig) -> None:
        self.config = config
        self._tokens = TokenCounter()
        self._loop: asyncio.AbstractEventLoop | None = None  # the background loop, made only when needed
        self._thread: threading.Thread | None = None
        self._loop_lock = threading.Lock()
        self._closed = False
        self._card: AgentCard | None = None
        self.protocol_version = ""
        self.binding = ""  # the card's protocol_binding we talk over, once discovered
        self.streaming = False  # whether messages go out as SendStreamingMessage
        self.refusal: AgentAuthError | None = None  # set when the agent refuses us mid-run: nothing more is sent
        self.discovery: list[RequestRecord] = []  # requests made before any simulation: the card, the access check
        self._client: Any = None
        self._call_context: ClientCallContext | None = None
        self._grpc_channel: Any = None
        self._discover_lock = threading.Lock()
        self.targets = config.targets or TargetPolicy()
        self._http = self._make_http()

    def _make_http(self) -> httpx.AsyncClient:
        headers = {}
        if self.config.auth_token:
            headers["Authorization"] = f"Bearer {self.config.auth_token}"
        transport = _MeteringTransport(
            _PinnedTransport(self.targets,
                             httpx.Limits(max_connections=256, max_keepalive_connections=64, keepalive_expiry=30.0)),
            self.config.debug,
            self.config.auth_token,
            self.config.max_reply_bytes,
        )
        timeout = httpx.Timeout(self.config.timeout, connect=min(self.config.timeout, 10.0))
        return httpx.AsyncClient(headers=headers, timeout=timeout, transport=transport)

    def _call(self, coroutine: Any) -> Any:
        """Run a coroutine for the calling thread, and wait for its end.

        Over HTTP the calling thread runs it on its own loop. gRPC's channel
        lives on the background loop, so gRPC coroutines go there; so does
        everything asked from inside a running event loop, which cannot be
        blocked in place.
        """
        if self._grpc or _in_event_loop():
            return asyncio.run_coroutine_threadsafe(coroutine, self._background_loop()).result()
        return _run_here(coroutine)

    def _background_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name=f"a2a-session {self.config.endpoint}", daemon=True
                )
                self._thread.start()
            return self._loop

    # -- discovery -----------------------------------------------------------------

    @property
    def card(self) -> AgentCard:
        """The agent card, fetched and validated once per session, and access to its interface checked.

        The check runs whatever the card declares: many agents serve their
        card to anyone and guard only the interface, or name a URL nobody
        listens on. A failed discovery is not cached.
        """
        with self._discover_lock:
            if self._card is None:
                card, interface = self._call(self._discover())
                self.binding = interface.protocol_binding
                self.protocol_version = protocol_version(interface)
                self.streaming = self._streams(card)
                self._call_context = self._context()
                self._client = self._call(self._make_client(card))
                self._call(self._check_access(interface))
                self._card = card
        return self._card

    def _streams(self, card: AgentCard) -> bool:
        if self.config.streaming and not card.capabilities.streaming:
            log.warning("--a2a-streaming: the agent at %s does not stream (its card says so); "
                        "sending blocking SendMessage requests instead.", self.config.endpoint)
        return self.config.streaming and card.capabilities.streaming

    async def _make_client(self, card: AgentCard) -> Any:
        """a2a-sdk's client for the chosen binding; made on the session's loop, where gRPC needs its channel."""
        config = ClientConfig(streaming=self.streaming, httpx_client=self._http,
                              supported_protocol_bindings=[self.binding],
                              grpc_channel_factory=self._open_grpc_channel)
        return ClientFactory(config).create(card)

    def _open_grpc_channel(self, url: str) -> Any:
        """A channel to the addresses of the card's gRPC target that the policy allows, resolved now.

        gRPC would resolve the name itself, and again on every reconnect; the
        channel is pinned to the checked addresses instead, the name kept as
        its authority (and, over TLS, as the name the certificate must carry).
        """
        import grpc

        what = f"The gRPC target {url} named by the agent card"
        try:
            host, port = grpc_host_port(url, what)
            addresses = self.targets.addresses(host, what)
        except TargetUnresolvable as error:
            raise AgentUnreachable(str(error)) from None
        except TargetRefused as error:
            raise AgentTargetRefused(str(error)) from None
        family = addresses[0].version
        pinned = ",".join(f"{a}:{port}" if family == 4 else f"[{a}]:{port}"
                          for a in addresses if a.version == family)
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        options = [("grpc.max_send_message_length", 64 << 20),
                   ("grpc.max_receive_message_length", self.config.max_reply_bytes),
                   ("grpc.default_authority", authority)]
        target = f"ipv{family}:{pinned}"
        if url.startswith(("https://", "grpcs://")):
            options.append(("grpc.ssl_target_name_override", host))
            self._grpc_channel = grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(), options)
        else:
            self._grpc_channel = grpc.aio.insecure_channel(target, options)
        return self._grpc_channel

    @property
    def _grpc(self) -> bool:
        return self.binding == GRPC

    def _context(self) -> ClientCallContext:
        """The settings of every call: the timeout, and over gRPC the bearer token (HTTP carries it in the client's
        headers). Made once: a2a-sdk only reads it."""
        parameters = None
        if self._grpc and self.config.auth_token:
            parameters = {"authorization": f"Bearer {self.config.auth_token}"}
        return ClientCallContext(timeout=self.config.timeout, service_parameters=parameters)

    async def _discover(self) -> tuple[AgentCard, AgentInterface]:
        endpoint = self.config.endpoint
        try:
            self.targets.check(endpoint, f"--a2a-endpoint {endpoint}")
        except TargetUnresolvable:
            pass  # fetching the card says it, as any connection that fails
        except TargetRefused as refused:
            raise AgentTargetRefused(str(refused)) from None
        last_error: A2AFailure | None = None
        for path in CARD_PATHS:
            resolver = A2ACardResolver(self._http, endpoint, path)
            try:
                card, record = await self._request("GetAgentCard", None, 1, None, 0, resolver.get_agent_card(),
                                                   discovery=True)
            except _Failed as failed:
                error = failed.cause
                if isinstance(error, AgentCardResolutionError):
                    failure = _card_failure(error, endpoint, path, self.config.auth_token)
                else:  # connection, timeout, bad JSON
                    failure = _classify(error, None, self.config.auth_token,
                                        f"Fetching the agent card {endpoint}{path}", timeout=self.config.timeout)
                failed.record.error = failure.category.value
                failed.record.error_message = str(failure)
                if isinstance(failure, AgentCardError) and failure.status == 404:
                    last_error = failure
                    continue
                raise failure from None
            try:
                validate_card(card, endpoint)
                interface = choose_interface(card, self.config.transport, endpoint)
                self._check_interfaces(card, interface.protocol_binding)
            except (AgentCardError, AgentTargetRefused) as invalid:
                record.error = invalid.category.value
                record.error_message = str(invalid)
                raise
            return card, interface
        assert last_error is not None
        raise AgentCardError(
            f"No agent card at {endpoint}{CARD_PATHS[0]} nor {endpoint}{CARD_PATHS[1]} (HTTP 404). "
            "Check that --a2a-endpoint is the agent's base URL and that the agent serves its card.",
            status=404,
        )

    def _check_interfaces(self, card: AgentCard, binding: str) -> None:
        """Every URL the card names for `binding` (a2a-sdk may take any of them) must pass the target policy."""
        readable = READABLE.get(binding, binding)
        for interface in card.supported_interfaces:
            if interface.protocol_binding != binding:
                continue
            what = f"The agent card at {self.config.endpoint} names {interface.url} for {readable}; that URL"
            try:
                if binding == GRPC:
                    host, _ = grpc_host_port(interface.url, what)
                    self.targets.addresses(host, what)
                else:
                    self.targets.check(interface.url, what)
            except TargetUnresolvable:
                continue  # the access check says nothing answers there
            except TargetRefused as refused:
                raise AgentTargetRefused(str(refused)) from None

    async def _check_access(self, interface: AgentInterface) -> None:
        """Ask for a task that does not exist, before any simulation starts.

        An agent that accepts our credentials answers "task not found". Many
        agents serve their card to anyone and guard only their interface, so
        this is where a missing or wrong token shows, and a card naming a URL
        nobody listens on.
        """
        endpoint = self.config.endpoint
        rpc_url = interface.url
        binding = READABLE.get(interface.protocol_binding, interface.protocol_binding)
        probe = GetTaskRequest(id=f"tau2-a2a-access-check-{uuid.uuid4()}")
        try:
            await self._request("GetTask", None, 1, None, 0, self._get_task_once(probe), discovery=True)
        except _Failed as failed:
            failure, record = failed.failure, failed.record
            if isinstance(failed.cause, TaskNotFoundError):
                record.error = record.error_message = None  # the expected answer: access works
                return
            if isinstance(failure, (AgentTargetRefused, AgentReplyTooLarge)):
                error: A2AFailure = failure
            elif isinstance(failure, AgentAuthError):
                how = f"HTTP {failure.status}" if failure.status else "UNAUTHENTICATED"
                error = AgentAuthError(
                    f"The agent at {endpoint} refused a {binding} request to {rpc_url} with {how}. "
                    "Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN.",
                    status=failure.status,
                )
            elif isinstance(failure, (AgentUnreachable, AgentTimeout)):
                why = _root_message(_chain(failed.cause), self.config.auth_token)
                error = AgentUnreachable(
                    f"The agent card at {endpoint} names {rpc_url} for {binding}, but nothing answers there "
                    f"({why}). Fix the url in the agent's card, or start the agent there.",
                )
            elif isinstance(failure, AgentHTTPError) and failure.status in _NOT_SERVED:
                error = AgentCardError(
                    f"The agent card at {endpoint} names {rpc_url} for {binding}, but that URL answers "
                    f"HTTP {failure.status}: it does not serve {binding}. Fix the url in the agent's card, or "
                    "choose another of its interfaces with --a2a-transport.",
                    status=failure.status,
                )
            else:
                log.info("Access check of %s: %s (continuing)", endpoint, failure)
                return
            record.error = error.category.value
            record.error_message = str(error)
            error.records = [record]
            raise error from None

    # -- sending -------------------------------------------------------------------

    def send(self, parts: list[Part], context_id: str | None, task_id: str | None, turn: int) -> Exchange:
        """Send one message and wait for the agent's reply (retrying transient failures).

        Once the agent has refused our credentials, nothing more is sent: the
        refusal is raised again at once, so the run stops instead of repeating it.
        """
        _ = self.card  # discovery errors surface here, before any request
        self.raise_if_refused()
        try:
            return self._call(self._send(parts, context_id, task_id, turn))
        except AgentAuthError as refusal:
            self.refusal = self.refusal or refusal
            raise

    def raise_if_refused(self) -> None:
        if self.refusal is not None:
            raise AgentAuthError(str(self.refusal), status=self.refusal.status)

    async def _send(self, parts: list[Part], context_id: str | None, task_id: str | None, turn: int) -> Exchange:
        records: list[RequestRecord] = []
        input_tokens = self._tokens.count_parts(parts)

        message_id = str(uuid.uuid4())  # one per turn: a retry resends the same message, and says so

        def send_once() -> Any:
            message = Message(
                role=Role.ROLE_USER,
                parts=parts,
                message_id=message_id,
                context_id=context_id or "",
                task_id=task_id or "",
            )
            return self._send_once(SendMessageRequest(message=message))

        method = "SendStreamingMessage" if self.streaming else "SendMessage"
        reply = await self._with_retries(method, turn, context_id, input_tokens, send_once, records)
        reply = await self._settle(reply, turn, records)
        context_id = reply.context_id or context_id
        for record in records:  # attempts refused before the agent opened the context belong to it too
            record.context_id = record.context_id or context_id
        return Exchange(reply=reply, context_id=context_id, task_id=_open_task_id(reply), records=records)

    async def _with_retries(self, method: str, turn: int, context_id: str | None, input_tokens: int,
                            make_call: Any, records: list[RequestRecord]) -> Any:
        """One request, retried with backoff while it fails in a way that may pass."""
        attempt = 0
        while True:
            attempt += 1
            try:
                result, record = await self._request(method, turn, attempt, context_id, input_tokens, make_call())
                records.append(record)
                return result
            except _Failed as failed:
                records.append(failed.record)
                failure = failed.failure
                if failure.retryable and attempt < self.config.retry.max_attempts:
                    delay = self.config.retry.delay(attempt)
                    log.warning("A2A request to %s failed (%s); retry %d in %.2fs",
                                self.config.endpoint, failure, attempt, delay)
                    await asyncio.sleep(delay)
                    continue
                failure.records = records
                raise failure from None

    async def _send_once(self, request: SendMessageRequest) -> Message | Task:
        """One SendMessage (one event) or SendStreamingMessage (events until the stream ends), as one reply."""
        wire = _current_wire.get()
        if wire is not None and self._grpc:
            wire.request_bytes += request.ByteSize()
        streamed = StreamedReply()
        async for event in self._client.send_message(request, context=self._call_context):
            if wire is not None:
                wire.saw_event(event.ByteSize() if self._grpc else 0)
                if self._grpc and wire.response_bytes > self.config.max_reply_bytes:
                    raise AgentReplyTooLarge(
                        f"the gRPC event stream of SendStreamingMessage to {self.config.endpoint} is over "
                        f"{self.config.max_reply_bytes} bytes (--a2a-max-reply-bytes); tau2-a2a stopped reading it "
                        f"at {wire.response_bytes} bytes. Raise --a2a-max-reply-bytes if the agent's replies are "
                        "really this large.")
            streamed.add(event)
        try:
            return streamed.reply()
        except MalformedReply as error:
            raise AgentMalformedReply(str(error)) from None

    async def _get_task_once(self, request: GetTaskRequest) -> Task:
        wire = _current_wire.get()
        if wire is not None and self._grpc:
            wire.request_bytes += request.ByteSize()
        task = await self._client.get_task(request, context=self._call_context)
        if wire is not None:
            wire.saw_event(task.ByteSize() if self._grpc else 0)
        return task

    def _get_task(self, task_id: str) -> Any:
        return self._get_task_once(GetTaskRequest(id=task_id))

    async def _settle(self, reply: Message | Task, turn: int, records: list[RequestRecord]) -> Message | Task:
        """Poll a task the agent left working until it needs input or ends."""
        deadline = time.monotonic() + self.config.timeout
        while isinstance(reply, Task) and reply.status.state in _PENDING_STATES:
            if time.monotonic() > deadline:
                error = AgentTimeout(f"task {reply.id} still {TaskState.Name(reply.status.state)} "
                                     f"after {self.config.timeout:g}s; raise --a2a-timeout for slow agents")
                error.records = records
                raise error
            await asyncio.sleep(POLL_SECONDS)
            reply = await self._with_retries("GetTask", turn, reply.context_id, 0,
                                             functools.partial(self._get_task, reply.id), records)
        if isinstance(reply, Task) and reply.status.state in _FAILED_STATES:
            texts, _ = reply_content(reply)
            error = AgentProtocolError(
                f"the agent ended task {reply.id} as {TaskState.Name(reply.status.state)}"
                + (f": {redact(' '.join(texts), self.config.auth_token)[:300]}" if texts else "")
            )
            records[-1].error = error.category.value
            records[-1].error_message = str(error)
            error.records = records
            raise error
        return reply

    async def _request(self, method: str, turn: int | None, attempt: int, context_id: str | None,
                       input_tokens: int, call: Any, discovery: bool = False) -> tuple[Any, RequestRecord]:
        """Run one A2A request under the meter; raise _Failed with its record on failure.

        Every request gets its record, failed ones too; requests made before
        any simulation (`discovery`) are also kept for the metrics file.
        """
        started = time.perf_counter()
        wire = _Wire(deadline=started + self.config.timeout)
        token = _current_wire.set(wire)
        cause: BaseException | None = None
        try:
            if self._grpc:  # over HTTP the pool's blocking calls keep to the deadline themselves
                result = await asyncio.wait_for(call, timeout=self.config.timeout)
            else:
                result = await call
            failure = None
        except Exception as error:  # every failure is classified and recorded
            result = None
            cause = error
            failure = _classify(error, wire.status, self.config.auth_token, f"{method} to {self.config.endpoint}",
                                body=wire.error_body, timeout=self.config.timeout)
        finally:
            _current_wire.reset(token)
        latency_ms = (time.perf_counter() - started) * 1000.0
        first_event_ms = None if wire.first_event_at is None else round((wire.first_event_at - started) * 1000.0, 3)
        output_tokens = 0
        if isinstance(result, (Message, Task)):
            try:
                output_tokens = self._tokens.count_parts(answer_parts(result))
            except MalformedReply as unreadable:  # e.g. a data part holding NaN or Infinity
                result, cause = None, unreadable
                failure = AgentMalformedReply(f"{method} to {self.config.endpoint}: {unreadable}")
        record = RequestRecord(
            turn=turn,
            attempt=attempt,
            method=method,
            endpoint=self.config.endpoint,
            protocol_version=self.protocol_version,
            transport=self.binding or None,
            context_id=getattr(result, "context_id", None) or context_id,
            http_status=wire.status,
            grpc_status=_grpc_status(cause) if self._grpc and method != "GetAgentCard" else None,
            latency_ms=round(latency_ms, 3),
            request_bytes=wire.request_bytes,
            response_bytes=wire.response_bytes,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            events=wire.events,
            first_event_ms=first_event_ms,
            error=failure.category.value if failure else None,
            error_message=str(failure) if failure else None,
        )
        if discovery:
            self.discovery.append(record)
        if failure is not None:
            raise _Failed(failure, record, cause)
        return result, record

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._grpc_channel is not None:
            self._call(self._grpc_channel.close())
        self._call(self._http.aclose())
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            self._loop.close()


class _Failed(Exception):
    def __init__(self, failure: A2AFailure, record: RequestRecord, cause: BaseException | None = None) -> None:
        self.failure = failure
        self.record = record
        self.cause = cause


def _open_task_id(reply: Message | Task) -> str | None:
    """A task the agent left waiting for input is continued; any other is not."""
    if isinstance(reply, Task) and reply.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
        return reply.id
    return None


def validate_card(card: AgentCard, endpoint: str) -> None:
    """A card tau2 can use names the agent and lists an interface (which one we use: `choose_interface`)."""
    problems = []
    if not card.name:
        problems.append("it has no name")
    if not card.supported_interfaces:
        problems.append("it lists no interface (supportedInterfaces, or url in a 0.3 card)")
    if problems:
        raise AgentCardError(f"The agent card at {endpoint} is invalid: {'; '.join(problems)}.")


def _card_failure(error: AgentCardResolutionError, endpoint: str, path: str, token: str | None) -> A2AFailure:
    status = error.status_code
    where = f"{endpoint}{path}"
    if status in (401, 403):
        return AgentAuthError(
            f"The agent at {endpoint} refused the card request with HTTP {status}. "
            "Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN.",
            status=status,
        )
    if status is not None:
        return AgentCardError(f"Fetching the agent card {where} failed with HTTP {status}.", status=status)
    transport_failure = _classify(error, None, token, f"Fetching the agent card {where}")
    if isinstance(transport_failure, (AgentUnreachable, AgentTimeout, AgentTargetRefused, AgentReplyTooLarge)):
        return transport_failure
    return AgentCardError(
        f"The agent card at {where} is not a valid A2A agent card: {redact(str(error), token)}"
    )


def _classify(error: BaseException, status: int | None, token: str | None, doing: str,
              body: str = "", timeout: float | None = None) -> A2AFailure:
    """Map any exception from a2a-sdk or httpx to one of our failure types.

    `body` is what the agent said with an HTTP error status: it goes into the
    message (without the token, should the agent echo it), since it usually
    says what went wrong.
    """
    chain = _chain(error)
    ours = next((e for e in chain if isinstance(e, A2AFailure)), None)  # raised in our transport, under a2a-sdk's
    if ours is not None:
        return ours
    text = redact(str(error), token)
    if status in (401, 403):
        return AgentAuthError(
            f"{doing} was refused with HTTP {status}: the agent needs a valid bearer token "
            "(--a2a-auth-token or TAU2_A2A_AUTH_TOKEN).",
            status=status,
        )
    rpc_failure = _classify_grpc(chain, token, doing, timeout)
    if rpc_failure is not None:
        return rpc_failure
    if any(isinstance(e, (httpx.TimeoutException, asyncio.TimeoutError, TimeoutError, A2AClientTimeoutError))
           for e in chain):
        after = f" after {timeout:g}s" if timeout else ""
        return AgentTimeout(f"{doing} timed out{after}; raise --a2a-timeout if the agent is slow.", status=status)
    if status is not None and status >= 400:
        said = " ".join(redact(body, token).split())
        return AgentHTTPError(f"{doing} failed with HTTP {status}" + (f": {said[:300]}" if said else "."),
                              status=status)
    if any(isinstance(e, (httpx.ConnectError, httpx.UnsupportedProtocol)) for e in chain):
        return AgentUnreachable(
            f"{doing} failed: cannot connect ({_root_message(chain, token)}). "
            "Is the agent running, and is the URL right?",
            status=status,
        )
    if any(isinstance(e, httpx.TransportError) for e in chain):
        return AgentUnreachable(
            f"{doing} failed: the connection was dropped ({_root_message(chain, token)}). "
            "Did the agent crash or restart?",
            status=status,
        )
    if any(isinstance(e, (json.JSONDecodeError, ValueError)) and not isinstance(e, A2AError) for e in chain):
        return AgentMalformedReply(f"{doing}: the reply is not valid A2A JSON-RPC ({text[:300]})", status=status)
    if _failed_reading_reply(chain):
        why = "null where an A2A object belongs, e.g. a JSON-RPC result of null" if "NoneType" in text else text
        return AgentMalformedReply(f"{doing}: the reply does not hold a valid A2A result ({why[:300]})",
                                   status=status)
    return AgentProtocolError(f"{doing} failed: {text[:300]}", status=status)


_READERS = ("google/protobuf/json_format.py", "a2a/utils/proto_utils.py")  # where a2a-sdk reads a reply's JSON


def _failed_reading_reply(chain: list[BaseException]) -> bool:
    """Whether an error came from reading the reply's JSON into A2A's types (a shape the types do not allow)."""
    for error in chain:
        trace = error.__traceback__
        while trace is not None:
            if trace.tb_frame.f_code.co_filename.replace("\\", "/").endswith(_READERS):
                return True
            trace = trace.tb_next
    return False


def _rpc_error(chain: list[BaseException]) -> Any:
    """The gRPC error in a chain of exceptions, if any (grpc is imported only by gRPC sessions)."""
    import sys

    grpc = sys.modules.get("grpc")
    if grpc is None:
        return None
    return next((e for e in chain if isinstance(e, grpc.aio.AioRpcError)), None)


def _grpc_status(error: BaseException | None) -> str | None:
    """The gRPC status code of a request: OK, or the code of the gRPC error that ended it."""
    if error is None:
        return "OK"
    rpc = _rpc_error(_chain(error))
    return rpc.code().name if rpc is not None else None


GRPC_DEADLINE_DETAILS = "Deadline Exceeded"  # what grpc says when the caller's own deadline expires


def _classify_grpc(chain: list[BaseException], token: str | None, doing: str,
                   timeout: float | None) -> A2AFailure | None:
    """gRPC status codes mapped to the categories HTTP statuses get (None: not a gRPC transport error)."""
    rpc = _rpc_error(chain)
    if rpc is None:
        return None
    code = rpc.code().name
    said = redact(rpc.details() or "", token)[:200]
    if code == "RESOURCE_EXHAUSTED" and "larger than max" in said:
        return AgentReplyTooLarge(f"{doing}: the reply is over the --a2a-max-reply-bytes limit (gRPC: {said}); "
                                  "raise --a2a-max-reply-bytes if the agent's replies are really this large.")
    if code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        return AgentAuthError(f"{doing} was refused with gRPC {code}: the agent needs a valid bearer token "
                              "(--a2a-auth-token or TAU2_A2A_AUTH_TOKEN).")
    if code == "DEADLINE_EXCEEDED":
        if said and said != GRPC_DEADLINE_DETAILS:  # the agent aborted so itself; our timeout did not expire
            return AgentTimeout(f"{doing} failed: the agent answered gRPC DEADLINE_EXCEEDED ({said}), a timeout "
                                "on its side; if it recurs, ask the agent's operator.")
        after = f" after {timeout:g}s" if timeout else ""
        return AgentTimeout(f"{doing} timed out{after} (gRPC DEADLINE_EXCEEDED); raise --a2a-timeout if the agent "
                            "is slow.")
    if code == "UNAVAILABLE":
        return AgentUnreachable(f"{doing} failed: gRPC UNAVAILABLE ({said}). Is the agent running, and is the "
                                "gRPC address in its card right?")
    if code in ("RESOURCE_EXHAUSTED", "INTERNAL", "UNKNOWN"):
        return AgentHTTPError(f"{doing} failed with gRPC {code}: {said}", retryable=True)
    return None


def _chain(error: BaseException | None) -> list[BaseException]:
    """The exception and its causes, outermost first."""
    chain: list[BaseException] = []
    current = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _root_message(chain: list[BaseException], token: str | None) -> str:
    """The innermost error's words: the one that says what actually happened."""
    return redact(str(chain[-1]) or type(chain[-1]).__name__, token)[:200]


class _SessionPool:
    """Sessions by their whole configuration (endpoint, token, binding, streaming, ...) for this process."""

    def __init__(self) -> None:
        self._sessions: dict[A2AConfig, A2ASession] = {}
        self._lock = threading.Lock()

    def get(self, config: A2AConfig) -> A2ASession:
        with self._lock:
            session = self._sessions.get(config)
            if session is None:
                session = self._sessions[config] = A2ASession(config)
            return session

    def close_all(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()


sessions = _SessionPool()
atexit.register(sessions.close_all)
