"""One A2A session per endpoint: card discovery, one HTTP pool, send with retries.

tau2 runs simulations in worker threads; a2a-sdk is async. Each session owns
one event loop in a background thread and one `httpx.AsyncClient`, so every
thread of a run shares the same connection pool. Worker threads call the
synchronous methods, which hand coroutines to that loop.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientTimeoutError, AgentCardResolutionError
from a2a.types import (
    AgentCard,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError

from tau2_a2a.client.errors import (
    A2AFailure,
    AgentAuthError,
    AgentCardError,
    AgentHTTPError,
    AgentMalformedReply,
    AgentProtocolError,
    AgentTimeout,
    AgentUnreachable,
)
from tau2_a2a.client.metrics import RequestRecord, TokenCounter
from tau2_a2a.config import A2AConfig, redact
from tau2_a2a.protocol.messages import parts_size_text, reply_content

log = logging.getLogger("tau2_a2a.client")
wire_log = logging.getLogger("tau2_a2a.wire")

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
    """What the metering transport saw of the HTTP exchanges of one request."""

    status: int | None = None
    request_bytes: int = 0
    response_bytes: int = 0


_current_wire: contextvars.ContextVar[_Wire | None] = contextvars.ContextVar(
    "tau2_a2a_wire", default=None
)


class _MeteringTransport(httpx.AsyncBaseTransport):
    """Counts bytes and keeps the HTTP status of each request; logs bodies in debug mode."""

    def __init__(self, inner: httpx.AsyncBaseTransport, debug: bool) -> None:
        self._inner = inner
        self._debug = debug

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        wire = _current_wire.get()
        body = request.content
        response = await self._inner.handle_async_request(request)
        raw = b"".join([chunk async for chunk in response.stream])  # type: ignore[union-attr]
        await response.aclose()
        if wire is not None:
            wire.status = response.status_code
            wire.request_bytes += len(body)
            wire.response_bytes += len(raw)
        if self._debug:
            wire_log.info("A2A request %s %s\n%s", request.method, request.url, body.decode(errors="replace"))
            wire_log.info("A2A reply %s\n%s", response.status_code, raw.decode(errors="replace"))
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=httpx.ByteStream(raw),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class Exchange:
    """One send: the agent's final reply and a record per request it took."""

    reply: Message | Task
    context_id: str | None
    task_id: str | None
    records: list[RequestRecord] = field(default_factory=list)


class A2ASession:
    """Everything shared by the simulations of one endpoint in this process."""

    def __init__(self, config: A2AConfig) -> None:
        self.config = config
        self._tokens = TokenCounter()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"a2a-session {config.endpoint}", daemon=True
        )
        self._thread.start()
        self._card: AgentCard | None = None
        self.protocol_version = ""
        self._client: Any = None
        self._discover_lock = threading.Lock()
        self._http = self._call(self._make_http())

    async def _make_http(self) -> httpx.AsyncClient:
        headers = {}
        if self.config.auth_token:
            headers["Authorization"] = f"Bearer {self.config.auth_token}"
        transport = _MeteringTransport(
            httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=256, max_keepalive_connections=64)),
            self.config.debug,
        )
        timeout = httpx.Timeout(self.config.timeout, connect=min(self.config.timeout, 10.0))
        return httpx.AsyncClient(headers=headers, timeout=timeout, transport=transport)

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    # -- discovery -----------------------------------------------------------------

    @property
    def card(self) -> AgentCard:
        """The agent card, fetched and validated once per session."""
        with self._discover_lock:
            if self._card is None:
                card = self._call(self._discover())
                config = ClientConfig(streaming=False, httpx_client=self._http)
                self._client = ClientFactory(config).create(card)
                self.protocol_version = jsonrpc_version(card)
                self._card = card
        return self._card

    async def _discover(self) -> AgentCard:
        endpoint = self.config.endpoint
        last_error: A2AFailure | None = None
        for path in CARD_PATHS:
            try:
                card = await A2ACardResolver(self._http, endpoint, path).get_agent_card()
            except AgentCardResolutionError as error:
                failure = _card_failure(error, endpoint, path, self.config.auth_token)
                if isinstance(failure, AgentCardError) and error.status_code == 404:
                    last_error = failure
                    continue
                raise failure from None
            except Exception as error:  # connection, timeout, bad JSON
                raise _classify(error, None, self.config.auth_token, f"fetching the agent card of {endpoint}") from None
            validate_card(card, endpoint)
            return card
        assert last_error is not None
        raise AgentCardError(
            f"No agent card at {endpoint}{CARD_PATHS[0]} nor {endpoint}{CARD_PATHS[1]} (HTTP 404). "
            "Check that --a2a-endpoint is the agent's base URL and that the agent serves its card.",
            status=404,
        )

    # -- sending -------------------------------------------------------------------

    def send(self, parts: list[Part], context_id: str | None, task_id: str | None, turn: int) -> Exchange:
        """Send one message and wait for the agent's reply (retrying transient failures)."""
        self.card  # discovery errors surface here, before any request
        return self._call(self._send(parts, context_id, task_id, turn))

    async def _send(self, parts: list[Part], context_id: str | None, task_id: str | None, turn: int) -> Exchange:
        records: list[RequestRecord] = []
        input_tokens = self._tokens.count(parts_size_text(parts))
        attempt = 0
        while True:
            attempt += 1
            message = Message(
                role=Role.ROLE_USER,
                parts=parts,
                message_id=str(uuid.uuid4()),
                context_id=context_id or "",
                task_id=task_id or "",
            )
            request = SendMessageRequest(message=message)
            try:
                reply, record = await self._request("SendMessage", turn, attempt, context_id, input_tokens,
                                                    self._send_once(request))
                records.append(record)
                break
            except _Failed as failed:
                records.append(failed.record)
                failure = failed.failure
                if failure.retryable and attempt < self.config.retry.max_attempts:
                    delay = self.config.retry.delay(attempt)
                    log.warning("A2A request to %s failed (%s); retry %d in %.1fs",
                                self.config.endpoint, failure, attempt, delay)
                    await asyncio.sleep(delay)
                    continue
                failure.records = records
                raise failure from None
        reply = await self._settle(reply, turn, records)
        return Exchange(reply=reply, context_id=reply.context_id or context_id,
                        task_id=_open_task_id(reply), records=records)

    async def _send_once(self, request: SendMessageRequest) -> Message | Task:
        context = ClientCallContext(timeout=self.config.timeout)
        async for event in self._client.send_message(request, context=context):
            if event.HasField("message"):
                return event.message
            if event.HasField("task"):
                return event.task
        raise AgentMalformedReply("expected a Message or a Task in reply to SendMessage, got nothing")

    async def _settle(self, reply: Message | Task, turn: int, records: list[RequestRecord]) -> Message | Task:
        """Poll a task the agent left working until it needs input or ends."""
        deadline = time.monotonic() + self.config.timeout
        while isinstance(reply, Task) and reply.status.state in _PENDING_STATES:
            if time.monotonic() > deadline:
                error = AgentTimeout(f"task {reply.id} still {TaskState.Name(reply.status.state)} "
                                     f"after {self.config.timeout:.0f}s; raise --a2a-timeout for slow agents")
                error.records = records
                raise error
            await asyncio.sleep(0.2)
            try:
                reply, record = await self._request("GetTask", turn, 1, reply.context_id, 0,
                                                    self._client.get_task(GetTaskRequest(id=reply.id)))
            except _Failed as failed:
                records.append(failed.record)
                failed.failure.records = records
                raise failed.failure from None
            records.append(record)
        if isinstance(reply, Task) and reply.status.state in _FAILED_STATES:
            texts, _ = reply_content(reply)
            error = AgentProtocolError(
                f"the agent ended task {reply.id} as {TaskState.Name(reply.status.state)}"
                + (f": {' '.join(texts)[:300]}" if texts else "")
            )
            records[-1].error = error.category.value
            records[-1].error_message = str(error)
            error.records = records
            raise error
        return reply

    async def _request(self, method: str, turn: int, attempt: int, context_id: str | None,
                       input_tokens: int, call: Any) -> tuple[Any, RequestRecord]:
        """Run one A2A request under the meter; raise _Failed with its record on failure."""
        wire = _Wire()
        token = _current_wire.set(wire)
        started = time.perf_counter()
        try:
            result = await asyncio.wait_for(call, timeout=self.config.timeout)
            failure = None
        except Exception as error:  # every failure is classified and recorded
            result = None
            failure = _classify(error, wire.status, self.config.auth_token, f"{method} to {self.config.endpoint}")
        finally:
            _current_wire.reset(token)
        latency_ms = (time.perf_counter() - started) * 1000.0
        output_tokens = 0
        if result is not None:
            texts, datas = reply_content(result)
            output_tokens = self._tokens.count("\n".join(texts + [json.dumps(d, sort_keys=True) for d in datas]))
        record = RequestRecord(
            turn=turn,
            attempt=attempt,
            method=method,
            endpoint=self.config.endpoint,
            protocol_version=self.protocol_version,
            context_id=(result.context_id if result is not None else None) or context_id,
            http_status=wire.status,
            latency_ms=round(latency_ms, 3),
            request_bytes=wire.request_bytes,
            response_bytes=wire.response_bytes,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            error=failure.category.value if failure else None,
            error_message=str(failure) if failure else None,
        )
        if failure is not None:
            raise _Failed(failure, record)
        return result, record

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._call(self._http.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()


class _Failed(Exception):
    def __init__(self, failure: A2AFailure, record: RequestRecord) -> None:
        self.failure = failure
        self.record = record


def _open_task_id(reply: Message | Task) -> str | None:
    """A task the agent left waiting for input is continued; any other is not."""
    if isinstance(reply, Task) and reply.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
        return reply.id
    return None


def jsonrpc_version(card: AgentCard) -> str:
    """The protocol version a2a-sdk's client will speak to this card's JSON-RPC interface."""
    versions = [i.protocol_version for i in card.supported_interfaces if i.protocol_binding == "JSONRPC"]
    if "1.0" in versions:
        return "1.0"
    return (versions or ["1.0"])[0] or "1.0"


def validate_card(card: AgentCard, endpoint: str) -> None:
    """A card tau2 can use names the agent and offers a JSON-RPC interface."""
    problems = []
    if not card.name:
        problems.append("it has no name")
    bindings = [i.protocol_binding for i in card.supported_interfaces]
    if not card.supported_interfaces:
        problems.append("it lists no interface (supportedInterfaces, or url in a 0.3 card)")
    elif "JSONRPC" not in bindings:
        problems.append(f"it offers no JSONRPC interface (offers {', '.join(bindings)})")
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
    if isinstance(transport_failure, (AgentUnreachable, AgentTimeout)):
        return transport_failure
    return AgentCardError(
        f"The agent card at {where} is not a valid A2A agent card: {redact(str(error), token)}"
    )


def _classify(error: BaseException, status: int | None, token: str | None, doing: str) -> A2AFailure:
    """Map any exception from a2a-sdk or httpx to one of our failure types."""
    if isinstance(error, A2AFailure):
        return error
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    text = redact(str(error), token)
    if status in (401, 403):
        return AgentAuthError(
            f"{doing} was refused with HTTP {status}: the agent needs a valid bearer token "
            "(--a2a-auth-token or TAU2_A2A_AUTH_TOKEN).",
            status=status,
        )
    if any(isinstance(e, (httpx.TimeoutException, asyncio.TimeoutError, TimeoutError, A2AClientTimeoutError))
           for e in chain):
        return AgentTimeout(f"{doing} timed out; raise --a2a-timeout if the agent is slow.", status=status)
    if status is not None and status >= 400:
        return AgentHTTPError(f"{doing} failed with HTTP {status}: {text[:300]}", status=status)
    if any(isinstance(e, httpx.TransportError) for e in chain):
        return AgentUnreachable(
            f"{doing} failed: cannot connect ({_root_message(chain, token)}). "
            "Is the agent running, and is the URL right?",
            status=status,
        )
    if any(isinstance(e, (json.JSONDecodeError, ValueError)) and not isinstance(e, A2AError) for e in chain):
        return AgentMalformedReply(f"{doing}: the reply is not valid A2A JSON-RPC ({text[:300]})", status=status)
    return AgentProtocolError(f"{doing} failed: {text[:300]}", status=status)


def _root_message(chain: list[BaseException], token: str | None) -> str:
    """The innermost error's words: the one that says what actually happened."""
    return redact(str(chain[-1]) or type(chain[-1]).__name__, token)[:200]


class _SessionPool:
    """Sessions by (endpoint, credential reference, timeout, retries, debug) for this process."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[Any, ...], A2ASession] = {}
        self._lock = threading.Lock()

    def get(self, config: A2AConfig) -> A2ASession:
        key = (config.endpoint, config.reference, config.auth_token, config.timeout, config.retry, config.debug)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                session = self._sessions[key] = A2ASession(config)
            return session

    def close_all(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()


sessions = _SessionPool()
atexit.register(sessions.close_all)
