"""One A2A session per endpoint: card discovery, one connection pool, send with retries.

The binding (JSON-RPC, HTTP+JSON, gRPC) is chosen from the card once;
a2a-sdk's own transport for it does the talking, blocking or streaming. Under
it: the connections (`transport`), where its coroutines run (`event_loops`),
what a failure means (`failures`), what discovery checks (`card_check`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError

from tau2_a2a.client import request_spans, tracing
from tau2_a2a.client.bindings import GRPC, choose_interface, protocol_version
from tau2_a2a.client.card_check import CARD_PATHS, access_refusal, check_interfaces, missing_card, validate_card
from tau2_a2a.client.config import MAX_TIMEOUT_SECONDS, MESSAGE, A2AConfig, tools_mode_of
from tau2_a2a.client.errors import (
    A2AFailure,
    AgentAuthError,
    AgentCardError,
    AgentMalformedReply,
    AgentTargetRefused,
    AgentTimeout,
)
from tau2_a2a.client.event_loops import BackgroundLoop, in_event_loop, run_here
from tau2_a2a.client.failures import (
    Failed,
    after_attempts,
    card_failure,
    classify,
    grpc_status,
    record_failure,
    task_failure,
    timed_out_arriving,
)
from tau2_a2a.client.limits import request_over_limit
from tau2_a2a.client.records import RequestRecord, TokenCounter
from tau2_a2a.client.sending import Exchange, InFlight, SendOptions, open_task_id
from tau2_a2a.client.targets import TargetPolicy, TargetRefused, TargetUnresolvable
from tau2_a2a.client.transport import (
    Wire,
    current_wire,
    grpc_stream_too_large,
    make_http,
    metered,
    open_grpc_channel,
)
from tau2_a2a.protocol.messages import answer_parts
from tau2_a2a.protocol.stream import StreamedReply
from tau2_a2a.protocol.toolcalls import MalformedReply

if TYPE_CHECKING:
    import grpc.aio

log = logging.getLogger("tau2_a2a.client")
T = TypeVar("T")


class Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)  # a companion of the session (see A2ASession.companion)

POLL_SECONDS = 0.2
_PENDING_STATES = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
_FAILED_STATES = (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED, TaskState.TASK_STATE_CANCELED,
                  TaskState.TASK_STATE_AUTH_REQUIRED)

# An A2A request in an MCP tools mode stays open while the agent acts: the wait for each of its actions is
# bounded (--a2a-timeout), the request as a whole only by this, and it is aborted when its simulation ends.
OPEN_REQUEST_SECONDS = MAX_TIMEOUT_SECONDS


class A2ASession:
    """The A2A side of one run in one process: its card, its connections, and its discovery records. A run
    makes one session from its A2AConfig and closes it at the end; the token lives only in the config it holds."""

    def __init__(self, config: A2AConfig) -> None:
        self.config = config
        self._tokens = TokenCounter()
        self._background = BackgroundLoop(f"a2a-session {config.endpoint}")  # started only when needed
        self._closed = False
        self._card: AgentCard | None = None
        self.protocol_version = ""
        self.binding = ""  # the card's protocol_binding we talk over, once discovered
        self.streaming = False  # whether messages go out as SendStreamingMessage
        self.refusal: AgentAuthError | None = None  # set when the agent refuses us mid-run: nothing more is sent
        self.discovery: list[RequestRecord] = []  # requests made before any simulation: the card, the access check
        self._client: Any = None  # a2a-sdk's Client, made once the card is read (used only after that)
        self._call_context: ClientCallContext | None = None
        self._grpc_channel: grpc.aio.Channel | None = None
        self._discover_lock = threading.Lock()
        self.targets = config.targets or TargetPolicy()
        self._http = make_http(config, self.targets)
        self._tools_mode = MESSAGE  # see tools_mode
        self._companions: dict[Callable[[A2AConfig], Closable], Closable] = {}  # see companion
        self._companions_lock = threading.Lock()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine for the calling thread, and wait for its end.

        Over HTTP the calling thread runs it on its own loop. gRPC's channel
        lives on the background loop, so gRPC coroutines go there; so does
        everything asked from inside a running event loop, which cannot be
        blocked in place.
        """
        if self._grpc or in_event_loop():
            return self._background.run(coroutine)
        return run_here(coroutine)

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
                self._tools_mode = tools_mode_of(self.config, card)
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

    @property
    def tools_mode(self) -> str:
        """How the agent gets its tools: MESSAGE, MCP or DRIVEN (`--a2a-tools auto` asks the card, so this
        discovers it first)."""
        _ = self.card
        return self._tools_mode

    def companion(self, start: Callable[[A2AConfig], C]) -> C:
        """What `start` makes of the config, once, closed with the session (the MCP tools server: mcp/)."""
        with self._companions_lock:
            if start not in self._companions:
                self._companions[start] = start(self.config)
            return cast(C, self._companions[start])

    async def _make_client(self, card: AgentCard) -> Client:
        """a2a-sdk's client for the chosen binding; made on the session's loop, where gRPC needs its channel."""
        config = ClientConfig(streaming=self.streaming, httpx_client=self._http,
                              supported_protocol_bindings=[self.binding],
                              grpc_channel_factory=self._open_grpc_channel)
        return ClientFactory(config).create(card)

    def _open_grpc_channel(self, url: str) -> grpc.aio.Channel:
        """The gRPC channel, pinned to the addresses the target policy allows; kept to close it with the session."""
        self._grpc_channel = open_grpc_channel(url, self.targets, self.config.max_reply_bytes)
        return self._grpc_channel

    @property
    def _grpc(self) -> bool:
        return self.binding == GRPC

    def _context(self, timeout: float | None = None) -> ClientCallContext:
        """The settings of every call: the timeout, and over gRPC the bearer token (HTTP carries it in the client's
        headers). Made once per timeout: a2a-sdk only reads it."""
        parameters = None
        if self._grpc and self.config.auth_token:
            parameters = {"authorization": f"Bearer {self.config.auth_token}"}
        return ClientCallContext(timeout=timeout or self.config.timeout, service_parameters=parameters)

    async def _discover(self) -> tuple[AgentCard, AgentInterface]:
        endpoint = self.config.endpoint
        try:
            self.targets.check(endpoint, f"--a2a-endpoint {endpoint}")
        except TargetUnresolvable:
            pass  # fetching the card says it, as any connection that fails
        except TargetRefused as refused:
            raise AgentTargetRefused(str(refused)) from None
        for path in CARD_PATHS:
            resolver = A2ACardResolver(self._http, endpoint, path)
            try:
                card, record = await self._request("GetAgentCard", None, 1, None, 0, request_spans.fetch_card(resolver),
                                                   discovery=True)
            except Failed as failed:
                failure = card_failure(failed.cause or failed.failure, endpoint, path, self.config.auth_token,
                                       self.config.timeout)
                record_failure(failed.record, failure)
                if isinstance(failure, AgentCardError) and failure.status == 404:
                    continue
                raise failure from None
            try:
                validate_card(card, endpoint)
                interface = choose_interface(card, self.config.transport, endpoint)
                check_interfaces(card, interface.protocol_binding, endpoint, self.targets)
            except (AgentCardError, AgentTargetRefused) as invalid:
                record_failure(record, invalid)
                raise
            return card, interface
        raise missing_card(endpoint)

    async def _check_access(self, interface: AgentInterface) -> None:
        """Ask for a task that does not exist, before any simulation starts.

        An agent that accepts our credentials answers "task not found". Many
        agents serve their card to anyone and guard only their interface, so
        this is where a missing or wrong token shows, and a card naming a URL
        nobody listens on.
        """
        endpoint = self.config.endpoint
        probe = GetTaskRequest(id=f"tau2-a2a-access-check-{uuid.uuid4()}")
        try:
            await self._request("GetTask", None, 1, None, 0, self._get_task_once(probe), discovery=True)
        except Failed as failed:
            if isinstance(failed.cause, TaskNotFoundError):
                failed.record.error = failed.record.error_message = None  # the expected answer: access works
                return
            error = access_refusal(failed, endpoint, interface, self.config.auth_token)
            if error is None:
                log.info("Access check of %s: %s (continuing)", endpoint, failed.failure)
                return
            record_failure(failed.record, error)
            error.records = [failed.record]
            raise error from None

    # -- sending -------------------------------------------------------------------

    def send(self, parts: list[Part], context_id: str | None, task_id: str | None, turn: int,
             on_request: Callable[[Wire], None] | None = None) -> Exchange:
        """Send one message and wait for the agent's reply (retrying transient failures).

        Once the agent has refused our credentials, nothing more is sent: the
        refusal is raised again at once, so the run stops instead of repeating it.
        `on_request` is given the Wire of each request the send makes (every
        attempt, every poll) as it starts, so that another thread can end it
        (`Wire.abort()`): the send then fails with AgentRequestAborted.
        """
        _ = self.card  # discovery errors surface here, before any request
        self.raise_if_refused()
        try:
            return self._call(self._send(parts, context_id, task_id, turn,
                                         SendOptions(self.config.timeout, on_request=on_request)))
        except AgentAuthError as refusal:
            self.refusal = self.refusal or refusal
            raise

    def send_in_background(self, parts: list[Part], context_id: str | None, task_id: str | None, turn: int,
                           may_retry: Callable[[], bool]) -> InFlight:
        """Send one message on a thread of its own and return at once; the reply (or failure) comes through the
        returned InFlight, which can also abort the request. For the MCP tools modes, where the agent acts over
        MCP while its A2A request is open: the request may last OPEN_REQUEST_SECONDS, and a failed attempt is
        retried only while `may_retry()` says the agent has not acted yet."""
        _ = self.card
        self.raise_if_refused()
        in_flight = InFlight()
        options = SendOptions(OPEN_REQUEST_SECONDS, may_retry, in_flight.started)

        def run() -> None:
            try:
                in_flight.future.set_result(self._call(self._send(parts, context_id, task_id, turn, options)))
            except BaseException as error:  # noqa: BLE001  (handed to the simulation's thread)
                if isinstance(error, AgentAuthError):
                    self.refusal = self.refusal or error
                in_flight.future.set_exception(error)

        context = contextvars.copy_context()  # the turn's trace context goes along
        threading.Thread(target=context.run, args=(run,), name=f"a2a-send {context_id or 'new'}", daemon=True).start()
        return in_flight

    def cancel_task(self, task_id: str, turn: int) -> list[RequestRecord]:
        """Ask the agent to cancel its task (the agent-driven mode's end); its records. Failures are recorded,
        not raised: the simulation is over either way."""
        records: list[RequestRecord] = []

        async def cancel() -> None:
            call = self._client.cancel_task(CancelTaskRequest(id=task_id),
                                            context=request_spans.with_trace(self._call_context))
            try:
                _, record = await self._request("CancelTask", turn, 1, None, 0, call)
                records.append(record)
            except Failed as failed:
                records.append(failed.record)

        self._call(cancel())
        return records

    def raise_if_refused(self) -> None:
        if self.refusal is not None:
            raise AgentAuthError(str(self.refusal), status=self.refusal.status)

    async def _send(self, parts: list[Part], context_id: str | None, task_id: str | None, turn: int,
                    options: SendOptions) -> Exchange:
        records: list[RequestRecord] = []
        context = self._call_context if options.timeout == self.config.timeout else self._context(options.timeout)
        input_tokens = self._tokens.count_parts(parts)

        message_id = str(uuid.uuid4())  # one per turn: a retry resends the same message, and says so

        def send_once() -> Coroutine[Any, Any, Message | Task]:
            message = Message(
                role=Role.ROLE_USER,
                parts=parts,
                message_id=message_id,
                context_id=context_id or "",
                task_id=task_id or "",
            )
            return self._send_once(SendMessageRequest(message=message), context)

        method = "SendStreamingMessage" if self.streaming else "SendMessage"
        reply = await self._with_retries(method, turn, context_id, input_tokens, send_once, records, options)
        reply = await self._settle(reply, turn, records, options)
        context_id = reply.context_id or context_id
        for record in records:  # attempts refused before the agent opened the context belong to it too
            record.context_id = record.context_id or context_id
        return Exchange(reply=reply, context_id=context_id, task_id=open_task_id(reply), records=records)

    async def _with_retries(self, method: str, turn: int, context_id: str | None, input_tokens: int,
                            make_call: Callable[[], Coroutine[Any, Any, T]], records: list[RequestRecord],
                            options: SendOptions) -> T:
        """One request, retried with backoff while it fails in a way that may pass and the options allow; never
        once the session is closed (a stopped run closed it under the request: the agent did nothing wrong)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                result, record = await self._request(method, turn, attempt, context_id, input_tokens, make_call(),
                                                     options=options)
                records.append(record)
                return result
            except Failed as failed:
                records.append(failed.record)
                failure = failed.failure
                if failure.retryable and not self._closed and attempt < self.config.retry.max_attempts \
                        and options.may_retry():
                    delay = self.config.retry.delay(attempt)
                    log.warning("A2A request to %s failed (%s); retry %d in %.2fs",
                                self.config.endpoint, failure, attempt, delay)
                    await asyncio.sleep(delay)
                    continue
                raise after_attempts(failure, records, attempt) from None

    async def _send_once(self, request: SendMessageRequest, context: ClientCallContext | None) -> Message | Task:
        """One SendMessage (one event) or SendStreamingMessage (events until the stream ends), as one reply."""
        wire = current_wire.get()
        if self._grpc:
            size = request.ByteSize()
            if size > self.config.max_request_bytes:
                raise request_over_limit(f"SendMessage to {self.config.endpoint}", size,
                                         self.config.max_request_bytes)
            if wire is not None:
                wire.request_bytes += size
        streamed = StreamedReply()
        async for event in self._client.send_message(request, context=request_spans.with_trace(context)):
            if wire is not None:
                wire.saw_event(event.ByteSize() if self._grpc else 0)
                if self._grpc and wire.response_bytes > self.config.max_reply_bytes:
                    raise grpc_stream_too_large(self.config.endpoint, wire.response_bytes,
                                                self.config.max_reply_bytes)
            streamed.add(event)
        try:
            return streamed.reply()
        except MalformedReply as error:
            raise AgentMalformedReply(str(error)) from None

    async def _get_task_once(self, request: GetTaskRequest) -> Task:
        wire = current_wire.get()
        if wire is not None and self._grpc:
            wire.request_bytes += request.ByteSize()
        task = await self._client.get_task(request, context=request_spans.with_trace(self._call_context))
        if wire is not None:
            wire.saw_event(task.ByteSize() if self._grpc else 0)
        return task

    async def _settle(self, reply: Message | Task, turn: int, records: list[RequestRecord],
                      options: SendOptions) -> Message | Task:
        """Poll a task the agent left working until it needs input or ends."""
        deadline = time.monotonic() + options.timeout
        while isinstance(reply, Task) and reply.status.state in _PENDING_STATES:
            if time.monotonic() > deadline:
                error = AgentTimeout(f"task {reply.id} still {TaskState.Name(reply.status.state)} "
                                     f"after {self.config.timeout:g}s; raise --a2a-timeout for slow agents")
                error.records = records
                raise error
            await asyncio.sleep(POLL_SECONDS)
            poll = functools.partial(self._get_task_once, GetTaskRequest(id=reply.id))
            reply = await self._with_retries("GetTask", turn, reply.context_id, 0, poll, records, options)
        if isinstance(reply, Task) and reply.status.state in _FAILED_STATES:
            failed = task_failure(reply, self.config.auth_token)
            record_failure(records[-1], failed)
            failed.records = records
            raise failed
        return reply

    async def _request(self, method: str, turn: int | None, attempt: int, context_id: str | None,
                       input_tokens: int, call: Coroutine[Any, Any, T], discovery: bool = False,
                       options: SendOptions | None = None) -> tuple[T, RequestRecord]:
        """`_metered_request`, in a client span of its own when tracing is on (see `request_spans`)."""
        metered = self._metered_request(method, turn, attempt, context_id, input_tokens, call, discovery, options)
        if not tracing.enabled():
            return await metered
        return await request_spans.traced(metered, self, method, turn, attempt)

    async def _metered_request(self, method: str, turn: int | None, attempt: int, context_id: str | None,
                               input_tokens: int, call: Coroutine[Any, Any, T], discovery: bool = False,
                               options: SendOptions | None = None) -> tuple[T, RequestRecord]:
        """Run one A2A request under the meter; raise Failed with its record on failure.

        Every request gets its record, failed ones too; requests made before
        any simulation (`discovery`) are also kept for the metrics file.
        """
        timeout = options.timeout if options is not None else self.config.timeout
        started = time.perf_counter()
        wire = Wire(deadline=started + timeout)
        if options is not None and options.on_request is not None:
            options.on_request(wire)
        result: Any = None  # the call's answer (a T), or None when it failed: then Failed is raised below
        cause: BaseException | None = None
        failure: A2AFailure | None = None
        try:
            result = await metered(call, wire, timeout if self._grpc else None)
        except Exception as error:  # every failure is classified and recorded
            cause, doing = error, f"{method} to {self.config.endpoint}"
            failure = timed_out_arriving(classify(error, wire.status, self.config.auth_token, doing,
                                                  body=wire.error_body, timeout=timeout),
                                         wire.received_bytes, wire.events, doing, timeout)
        measures = wire.measures(started)
        output_tokens = 0
        if isinstance(result, (Message, Task)):
            try:
                output_tokens = self._tokens.count_parts(answer_parts(result))
            except MalformedReply as unreadable:  # e.g. a data part holding NaN or Infinity
                result, cause = None, unreadable
                failure = AgentMalformedReply(f"{method} to {self.config.endpoint}: {unreadable}")
        record = RequestRecord(
            turn=turn, attempt=attempt, method=method, endpoint=self.config.endpoint,
            protocol_version=self.protocol_version,
            transport=self.binding or None,
            context_id=getattr(result, "context_id", None) or context_id,
            grpc_status=grpc_status(cause) if self._grpc and method != "GetAgentCard" else None,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            **measures,
            error=failure.category.value if failure else None,
            error_message=str(failure) if failure else None,
        )
        if discovery:
            self.discovery.append(record)
        if failure is not None:
            raise Failed(failure, record, cause)
        return result, record

    def __enter__(self) -> A2ASession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._grpc_channel is not None:
            self._call(self._grpc_channel.close())
        self._call(self._http.aclose())
        self._background.close()
        with self._companions_lock:
            companions, self._companions = list(self._companions.values()), {}
        for companion in companions:
            companion.close()
