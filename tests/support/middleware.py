"""ASGI middleware that records or disturbs HTTP, and a gRPC interceptor that aborts.

Plain ASGI: `WireLog` records what the server saw and sent; the others answer
some requests with a status, an echo of the Authorization header, or a dropped
connection before the agent sees them. `GrpcAbort` does the same over gRPC.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import grpc
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

REST_METHODS = {"/message:send": "SendMessage", "/message:stream": "SendStreamingMessage"}


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


class GrpcMetadataLog(grpc.aio.ServerInterceptor):
    """Records each gRPC call's method and metadata (`seen`) and passes it on unchanged."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str]]] = []

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        self.seen.append((details.method, {k: v for k, v in details.invocation_metadata or ()}))
        return await continuation(details)
