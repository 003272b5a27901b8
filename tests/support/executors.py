"""Agents that misbehave on purpose, and middleware that records or disturbs HTTP.

Every agent here is the reference oracle (one plan of golden steps per A2A
context, built from the scripted user's task marker) except for the one
misbehaviour it exists to show, so a run scores 1.0 wherever that
misbehaviour does not strike. The middleware are plain ASGI: `WireLog`
records what the server saw and sent; the others answer some requests with a
status, an echo of the Authorization header, or a dropped connection before
the agent sees them. `KillableProxy` stands in for a host that crashes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from a2a.helpers import new_data_part, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import (
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    Role,
    SecurityScheme,
    TaskState,
)
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tau2_a2a.protocol.messages import IncomingTurn, read_turn
from tau2_a2a.reference.oracle_agent import NO_MARKER, step_parts
from tau2_a2a.tau2bench.oracle_script import (
    OracleStep,
    find_marker,
    oracle_steps,
    task_marker,
)
from tau2_a2a.protocol.hosting import a2a_app, agent_card, free_port

CARD_PATH = "/.well-known/agent-card.json"
REST_METHODS = {"/message:send": "SendMessage", "/message:stream": "SendStreamingMessage"}


# -- agents ----------------------------------------------------------------------


@dataclass
class Seen:
    """One message as the agent received it, and what it answered."""

    context_id: str
    task: str | None  # the tau2 task this context plays, from the marker
    a2a_task_id: str
    continued: bool  # the message continued an existing A2A task
    turn: IncomingTurn
    parts: list[Part]
    reply_parts: list[Part] = field(default_factory=list)


class OracleLike(AgentExecutor):
    """The reference oracle, with a hook (`respond`) for the misbehaviour under test."""

    def __init__(self) -> None:
        self.plans: dict[str, deque[OracleStep]] = {}
        self.task_of: dict[str, str] = {}
        self.seen: list[Seen] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        turn = read_turn(context.message)
        context_id = context.context_id or ""
        marker = find_marker(turn.user_text)
        if marker is not None:
            self.plans[context_id] = deque(oracle_steps(*marker))
            self.task_of[context_id] = marker[1]
        seen = Seen(
            context_id=context_id,
            task=self.task_of.get(context_id),
            a2a_task_id=context.task_id or "",
            continued=context.current_task is not None,
            turn=turn,
            parts=list(context.message.parts),
        )
        self.seen.append(seen)
        await self.respond(context, event_queue, seen)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.plans.pop(context.context_id or "", None)

    def messages_of(self, task: str) -> list[Seen]:
        """Every message received in the contexts that played `task`."""
        return [s for s in self.seen if s.task == task]

    def is_message(self, seen: Seen, task: str, at: int) -> bool:
        """Whether `seen` is message number `at` (0-based) of tau2 task `task`."""
        return seen.task == task and len(self.messages_of(task)) == at + 1

    def next_parts(self, context_id: str) -> list[Part]:
        plan = self.plans.get(context_id)
        return step_parts(plan.popleft()) if plan else [new_text_part(NO_MARKER)]

    def plan_done(self, context_id: str) -> bool:
        return not self.plans.get(context_id)

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        await self.answer(event_queue, seen, self.next_parts(seen.context_id))

    async def answer(self, event_queue: EventQueue, seen: Seen, parts: list[Part]) -> None:
        """Reply with a plain Message carrying `parts`."""
        seen.reply_parts = parts
        message = Message(role=Role.ROLE_AGENT, message_id=str(uuid.uuid4()),
                          context_id=seen.context_id, parts=parts)
        await event_queue.enqueue_event(message)


class WaitsForPeers(OracleLike):
    """Holds the first reply of each context until `peers` contexts are open at once.

    A client that runs simulations one after another never gets there, and the
    agent then answers after `patience` seconds with `max_open` still below `peers`.
    """

    def __init__(self, peers: int, patience: float = 20.0) -> None:
        super().__init__()
        self.peers = peers
        self.patience = patience
        self.open_first_messages = 0
        self.max_open = 0
        self._all_here: asyncio.Event | None = None

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if self._all_here is None:
            self._all_here = asyncio.Event()
        if seen.turn.system is not None and not self._all_here.is_set():
            self.open_first_messages += 1
            self.max_open = max(self.max_open, self.open_first_messages)
            if self.open_first_messages >= self.peers:
                self._all_here.set()
            try:
                await asyncio.wait_for(self._all_here.wait(), self.patience)
            except TimeoutError:
                pass
            self.open_first_messages -= 1
        await super().respond(context, event_queue, seen)


class SlowOnTask(OracleLike):
    """Answers every message of one task only after `release()` (or `hang` seconds)."""

    def __init__(self, task: str, hang: float = 30.0) -> None:
        super().__init__()
        self.task = task
        self.hang = hang
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if seen.task == self.task:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.hang
            while not self._released.is_set() and loop.time() < deadline:
                await asyncio.sleep(0.05)
        await super().respond(context, event_queue, seen)


class ReplyOnTask(OracleLike):
    """Answers message number `at` (0-based) of one task with `parts` instead of a golden step."""

    def __init__(self, task: str, parts: list[Part], at: int = 0) -> None:
        super().__init__()
        self.task = task
        self.parts = parts
        self.at = at

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if self.is_message(seen, self.task, self.at):
            await self.answer(event_queue, seen, self.parts)
            return
        await super().respond(context, event_queue, seen)


class FailsTask(OracleLike):
    """Ends the A2A task of one tau2 task's first message as FAILED, saying `why`."""

    def __init__(self, task: str, why: str) -> None:
        super().__init__()
        self.task = task
        self.why = why

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if seen.task != self.task:
            await super().respond(context, event_queue, seen)
            return
        await event_queue.enqueue_event(new_task(seen.a2a_task_id, seen.context_id, TaskState.TASK_STATE_SUBMITTED))
        updater = TaskUpdater(event_queue, seen.a2a_task_id, seen.context_id)
        seen.reply_parts = [new_text_part(self.why)]
        await updater.failed(updater.new_agent_message(seen.reply_parts))


class CallsUnknownToolFirst(OracleLike):
    """Opens every conversation with a call to a tool the domain does not have, then follows the plan."""

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        super().__init__()
        self.tool = tool
        self.arguments = arguments

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if seen.turn.system is not None:
            call = {"tool_calls": [{"name": self.tool, "arguments": self.arguments}]}
            await self.answer(event_queue, seen, [new_data_part(call)])
            return
        await super().respond(context, event_queue, seen)


class AsksForInput(OracleLike):
    """Answers with a Task left in INPUT_REQUIRED, continued by the next message; the last step completes it."""

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if not seen.continued:
            await event_queue.enqueue_event(
                new_task(seen.a2a_task_id, seen.context_id, TaskState.TASK_STATE_SUBMITTED)
            )
        updater = TaskUpdater(event_queue, seen.a2a_task_id, seen.context_id)
        seen.reply_parts = self.next_parts(seen.context_id)
        message = updater.new_agent_message(seen.reply_parts)
        if self.plan_done(seen.context_id):
            await updater.complete(message)
        else:
            await updater.requires_input(message)


class FinishesLater(OracleLike):
    """Answers with a Task left WORKING and completes it `delay` seconds later."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self._later: set[asyncio.Task[None]] = set()

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        await event_queue.enqueue_event(new_task(seen.a2a_task_id, seen.context_id, TaskState.TASK_STATE_WORKING))
        seen.reply_parts = self.next_parts(seen.context_id)
        updater = TaskUpdater(event_queue, seen.a2a_task_id, seen.context_id)

        async def complete() -> None:
            await asyncio.sleep(self.delay)
            await updater.complete(updater.new_agent_message(seen.reply_parts))

        later = asyncio.get_running_loop().create_task(complete())
        self._later.add(later)
        later.add_done_callback(self._later.discard)


class DiesOnTask(OracleLike):
    """Calls `die` (crashing its host) when message number `at` of one task arrives."""

    def __init__(self, task: str, at: int, die: Callable[[], None]) -> None:
        super().__init__()
        self.task = task
        self.at = at
        self.die = die

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if self.is_message(seen, self.task, self.at):
            await asyncio.to_thread(self.die)
        await super().respond(context, event_queue, seen)


class GetsTasksWrong(OracleLike):
    """Skips the work of some conversations and closes with `WRONG_ANSWER`, so tau2 scores them 0.

    Every conversation of a task in `always` fails; of a task in `every_other`, the
    first, third, ... conversation fails (in a run of 2 trials at concurrency 1: trial 0).
    The rest follow the oracle's plan and score 1. Wrong, not broken: no A2A error.
    """

    WRONG_ANSWER = "Sorry, I cannot help with that."

    def __init__(self, always: tuple[str, ...] = (), every_other: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.always = set(always)
        self.every_other = set(every_other)
        self.conversations: dict[str, int] = {}
        self.failing: set[str] = set()  # context ids that get the task wrong

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        if seen.turn.system is not None and seen.task is not None:
            count = self.conversations.get(seen.task, 0)
            self.conversations[seen.task] = count + 1
            if seen.task in self.always or (seen.task in self.every_other and count % 2 == 0):
                self.failing.add(seen.context_id)
        if seen.context_id in self.failing:
            await self.answer(event_queue, seen, [new_text_part(self.WRONG_ANSWER)])
            return
        await super().respond(context, event_queue, seen)


def agent_app(executor: AgentExecutor, url: str, middleware: list[Middleware] | None = None,
              card_url: str | None = None, bearer: bool = False, grpc_url: str | None = None,
              grpc_interceptors: list[Any] | None = None) -> Starlette:
    """An a2a-sdk app for `executor` behind `middleware` (gRPC: behind `grpc_interceptors`).

    Its card names `card_url` (default `url`), `grpc_url` for gRPC if given, and, with
    `bearer`, declares bearer auth. Serve gRPC with BackgroundServer(..., grpc_port=...).
    """
    card = agent_card(
        name="misbehaving test agent",
        description="Behaves like the tau2 oracle except for one misbehaviour under test.",
        url=card_url or url,
        skills=[AgentSkill(id="test", name="test", description="test agent", tags=["test"])],
        grpc_url=grpc_url,
    )
    if bearer:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
        )
    app = a2a_app(executor, card, middleware=middleware or [])
    app.state.grpc_interceptors = list(grpc_interceptors or [])
    return app


def card_app(responses: dict[str, Response]) -> Starlette:
    """A server that answers GET on the given paths with the given responses, 404 elsewhere."""

    def route(path: str, response: Response) -> Route:
        async def endpoint(request: Request) -> Response:
            return response

        return Route(path, endpoint, methods=["GET", "POST"])

    return Starlette(routes=[route(path, response) for path, response in responses.items()])


def card_json(url: str, **changes: Any) -> dict[str, Any]:
    """A valid A2A 1.0 card as JSON, with `changes` applied (None removes a field)."""
    card: dict[str, Any] = {
        "name": "card test agent",
        "description": "serves only a card",
        "version": "0.1.0",
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }
    for key, value in changes.items():
        if value is None:
            card.pop(key, None)
        else:
            card[key] = value
    return card


# -- middleware --------------------------------------------------------------------


@dataclass
class HttpExchange:
    """One HTTP request as the server received it, and the response it sent."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int | None = None
    response_body: bytes = b""

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length")
        return int(value) if value is not None else None

    @property
    def rpc(self) -> dict[str, Any]:
        return _json_object(self.body)

    @property
    def rpc_method(self) -> str | None:
        """The A2A method: JSON-RPC's `method`, or the HTTP+JSON route's (POST /message:send: SendMessage)."""
        if self.method == "POST" and self.path.endswith(tuple(REST_METHODS)):
            return next(name for suffix, name in REST_METHODS.items() if self.path.endswith(suffix))
        return self.rpc.get("method")

    @property
    def sent_message(self) -> dict[str, Any]:
        """The A2A message of a SendMessage request, as the client sent it."""
        return self.rpc.get("params", {}).get("message", {})

    @property
    def reply(self) -> dict[str, Any]:
        """The JSON-RPC result: {"message": ...} or {"task": ...} for SendMessage, a task for GetTask."""
        return _json_object(self.response_body).get("result", {})

    @property
    def reply_context_id(self) -> str | None:
        result = self.reply
        inner = result.get("message") or result.get("task") or result
        return inner.get("contextId")

    @property
    def reply_task(self) -> dict[str, Any]:
        """The Task this request got back (SendMessage or GetTask), or {} for a Message."""
        result = self.reply
        return result.get("task") or (result if "status" in result else {})


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive channel that yields the body already read, then the real channel (disconnects)."""
    delivered = False

    async def replay() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _send_response(send: Send, status: int, body: bytes, content_type: str = "text/plain") -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class _BodyMiddleware:
    """Reads each HTTP request's body once; `intercept` may answer instead of the app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        exchange = HttpExchange(scope["method"], scope["path"], headers, body)
        if not await self.intercept(exchange, send):
            await self.app(scope, _replay(body, receive), self.sender(exchange, send))

    async def intercept(self, exchange: HttpExchange, send: Send) -> bool:
        """Answer `exchange` here and return True, or return False to pass it on."""
        return False

    def sender(self, exchange: HttpExchange, send: Send) -> Send:
        """The send channel handed to the app for `exchange`."""
        return send


class WireLog(_BodyMiddleware):
    """Records every request and the response it got into `exchanges`; place it outermost."""

    def __init__(self, app: ASGIApp, exchanges: list[HttpExchange]) -> None:
        super().__init__(app)
        self.exchanges = exchanges

    async def intercept(self, exchange: HttpExchange, send: Send) -> bool:
        self.exchanges.append(exchange)
        return False

    def sender(self, exchange: HttpExchange, send: Send) -> Send:
        async def capture(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                exchange.status = message["status"]
            elif message["type"] == "http.response.body":
                exchange.response_body += message.get("body", b"")
            await send(message)

        return capture


class FailFirst(_BodyMiddleware):
    """Answers the first `count` requests of RPC method `rpc_method` with HTTP `status`."""

    def __init__(self, app: ASGIApp, status: int, count: int, rpc_method: str = "SendMessage") -> None:
        super().__init__(app)
        self.status = status
        self.left = count
        self.rpc_method = rpc_method

    async def intercept(self, exchange: HttpExchange, send: Send) -> bool:
        if self.left > 0 and exchange.rpc_method == self.rpc_method:
            self.left -= 1
            await _send_response(send, self.status, f"agent overloaded ({self.status}), try again".encode())
            return True
        return False


class FailWhen(_BodyMiddleware):
    """Answers HTTP `status` to every request whose body contains `needle`."""

    def __init__(self, app: ASGIApp, status: int, needle: str) -> None:
        super().__init__(app)
        self.status = status
        self.needle = needle.encode()

    async def intercept(self, exchange: HttpExchange, send: Send) -> bool:
        if self.needle in exchange.body:
            await _send_response(send, self.status, b"internal error")
            return True
        return False


class ResetFirst(_BodyMiddleware):
    """Drops the connection of the first `count` SendMessage requests in the middle of the reply."""

    def __init__(self, app: ASGIApp, count: int) -> None:
        super().__init__(app)
        self.left = count

    async def intercept(self, exchange: HttpExchange, send: Send) -> bool:
        if self.left > 0 and exchange.rpc_method == "SendMessage":
            self.left -= 1
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", b"1000")]})
            await send({"type": "http.response.body", "body": b'{"jsonrpc": "2.0", ', "more_body": True})
            raise ConnectionResetError("test agent drops the connection mid-reply")
        return False


class RequireBearer(_BodyMiddleware):
    """`status` (401) unless `Authorization: Bearer <token>`; guards JSON-RPC only, or the card too.

    With `echo`, the refusal repeats the Authorization header it got, as some servers do.
    """

    def __init__(self, app: ASGIApp, token: str, guard_card: bool = False, echo: bool = False,
                 status: int = 401) -> None:
        super().__init__(app)
        self.token = token
        self.guard_card = guard_card
        self.echo = echo
        self.status = status

    async def intercept(self, exchange: HttpExchange, send: Send) -> bool:
        guarded = exchange.method == "POST" or self.guard_card
        received = exchange.headers.get("authorization", "")
        if guarded and received != f"Bearer {self.token}":
            body = f"unauthorized: got Authorization: {received}" if self.echo else "unauthorized"
            await _send_response(send, self.status, body.encode())
            return True
        return False


class EchoAuthorization(_BodyMiddleware):
    """Repeats the Authorization header back in error replies, as a careless server might.

    A SendMessage whose body contains `jsonrpc_error_on` gets a JSON-RPC error (HTTP 200)
    quoting the header; SendMessage number `http_500_at` (1-based) gets HTTP 500 quoting it.
    """

    def __init__(self, app: ASGIApp, jsonrpc_error_on: str | None = None, http_500_at: int | None = None) -> None:
        super().__init__(app)
        self.needle = jsonrpc_error_on.encode() if jsonrpc_error_on else None
        self.http_500_at = http_500_at
        self.sends = 0

    async def intercept(self, exchange: HttpExchange, send: Send) -> bool:
        if exchange.rpc_method != "SendMessage":
            return False
        self.sends += 1
        header = exchange.headers.get("authorization", "")
        if self.needle is not None and self.needle in exchange.body:
            error = {"jsonrpc": "2.0", "id": exchange.rpc.get("id"),
                     "error": {"code": -32000, "message": f"rejected request with Authorization: {header}"}}
            await _send_response(send, 200, json.dumps(error).encode(), "application/json")
            return True
        if self.sends == self.http_500_at:
            await _send_response(send, 500, f"crash while handling Authorization: {header}".encode())
            return True
        return False


def middleware(cls: type, **options: Any) -> Middleware:
    return Middleware(cls, **options)


# -- gRPC interceptors ------------------------------------------------------------------


class GrpcAbort(grpc.aio.ServerInterceptor):
    """A grpc.aio interceptor whose SendMessage handler aborts with `code` instead of answering:
    the first `count` calls, or every call whose request mentions `needle`. It records each
    SendMessage's metadata (`seen`) and the status it chose (`statuses`, "OK" when passed on)."""

    def __init__(self, code: str | None = None, count: int = 0, needle: str | None = None,
                 token: str | None = None) -> None:
        self.code = getattr(grpc.StatusCode, code) if code else None
        self.left = count
        self.needle = needle
        self.token = token
        self.seen: list[dict[str, str]] = []
        self.statuses: list[str] = []

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = await continuation(details)
        if handler is None or not details.method.endswith("/SendMessage"):
            return handler
        metadata = {k: v for k, v in details.invocation_metadata or ()}
        if self.token is not None and metadata.get("authorization") != f"Bearer {self.token}":
            return _aborting(handler, grpc.StatusCode.UNAUTHENTICATED, "unauthorized", self, metadata)
        inner = handler.unary_unary

        async def behave(request: Any, context: Any) -> Any:
            self.seen.append(metadata)
            if self.code is not None and (self.left > 0 or (self.needle and self.needle in str(request))):
                self.left = max(self.left - 1, 0)
                self.statuses.append(self.code.name)
                await context.abort(self.code, f"agent says {self.code.name.lower()}")
            self.statuses.append("OK")
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(behave, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)


def _aborting(handler: Any, code: Any, details: str, recorder: GrpcAbort, metadata: dict[str, str]) -> Any:
    async def refuse(request: Any, context: Any) -> Any:
        recorder.seen.append(metadata)
        recorder.statuses.append(code.name)
        await context.abort(code, details)

    return grpc.unary_unary_rpc_method_handler(refuse, request_deserializer=handler.request_deserializer,
                                               response_serializer=handler.response_serializer)


# -- a host that crashes -------------------------------------------------------------


class KillableProxy:
    """A TCP relay on loopback in front of an agent; `kill()` drops every connection
    and stops listening, as when the agent's host dies."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"proxy:{self.port}", daemon=True)

    def start(self, target_port: int) -> KillableProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(target_port), self._loop).result(timeout=10)
        return self

    async def _listen(self, target_port: int) -> None:
        async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        async def accept(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", target_port)
            self._writers.update((client_writer, upstream_writer))
            await asyncio.gather(relay(client_reader, upstream_writer), relay(upstream_reader, client_writer))

        self._server = await asyncio.start_server(accept, "127.0.0.1", self.port)

    def kill(self) -> None:
        """Stop listening and reset every open connection; returns once done."""

        async def die() -> None:
            assert self._server is not None
            self._server.close()
            for writer in self._writers:
                writer.transport.abort()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(die(), self._loop).result(timeout=10)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)


# -- the command line ----------------------------------------------------------------------


def run_cli(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
            new_session: bool = False) -> subprocess.Popen[str]:
    """Start `tau2-a2a ARGS` as a real process, stdout and stderr captured; the caller waits.

    The environment is this one plus `env`, without any ambient TAU2_A2A_AUTH_TOKEN. With
    `new_session` it leads its own process group, as a command typed at a terminal does.
    """
    script = Path(sys.executable).with_name("tau2-a2a")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "tau2_a2a.cli"]
    full_env = {k: v for k, v in os.environ.items() if k != "TAU2_A2A_AUTH_TOKEN"}
    full_env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})})
    return subprocess.Popen(command + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env, cwd=cwd, start_new_session=new_session)


def marker(task: str) -> str:
    """The scripted user's marker for an airline task, as it appears in a request body."""
    return task_marker("airline", task)



# -- reading a run -------------------------------------------------------------------------


def by_task(outcome: Any) -> dict[str, Any]:
    """The simulations of a one-trial run, by tau2 task id."""
    simulations = {s.task_id: s for s in outcome.results.simulations}
    assert len(simulations) == len(outcome.results.simulations), "expected one trial per task"
    return simulations


def records_of(outcome: Any, task: str) -> list[dict[str, Any]]:
    """The metrics records of a one-trial run's simulation of `task`, in order."""
    [simulation] = [s for s in outcome.report["simulations"] if s["task_id"] == task]
    return simulation["requests"]


def outline(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(turn, attempt, method, http_status, error) of each record: the shape of an exchange."""
    return [(r["turn"], r["attempt"], r["method"], r["http_status"], r["error"]) for r in records]


class NullResult(_BodyMiddleware):
    """Answers every JSON-RPC request of `rpc_method` with a well-formed reply whose result is null."""

    def __init__(self, app: ASGIApp, rpc_method: str = "SendMessage") -> None:
        super().__init__(app)
        self.rpc_method = rpc_method

    async def intercept(self, exchange: HttpExchange, send: Send) -> bool:
        if exchange.rpc_method != self.rpc_method:
            return False
        body = json.dumps({"jsonrpc": "2.0", "id": exchange.rpc.get("id"), "result": None}).encode()
        await _send_response(send, 200, body, "application/json")
        return True
