"""The service's bearer token, checked on every binding: JSON-RPC and HTTP+JSON (ASGI), gRPC (metadata).

The agent card stays public: a caller reads it to learn that a token is needed.
Each evaluation's HTML report (report.py) sits behind the same check.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

import grpc
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tau2_a2a.protocol.cards import CARD_PATHS

UNAUTHORIZED = ("Unauthorized: send 'Authorization: Bearer <token>' (an HTTP header, or gRPC metadata) with "
                "this service's token. The agent card is public.")


def bearer_matches(value: bytes | None, token: bytes) -> bool:
    """Whether an Authorization value is `Bearer <token>` (compared in constant time)."""
    scheme, _, credential = (value or b"").partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), token)


class BearerAuth:
    """ASGI middleware: every request but the card needs `Authorization: Bearer <token>`."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in CARD_PATHS or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        response = JSONResponse({"error": UNAUTHORIZED}, status_code=401,
                                headers={"WWW-Authenticate": 'Bearer realm="tau2-eval"'})
        await response(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        value = next((v for name, v in scope.get("headers", []) if name == b"authorization"), None)
        return bearer_matches(value, self._token)


async def _refuse(request: object, context: grpc.aio.ServicerContext) -> None:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHORIZED)


class GrpcBearerAuth(grpc.aio.ServerInterceptor):
    """A grpc.aio interceptor: every call needs the metadata `authorization: Bearer <token>`."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def intercept_service(
            self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
            details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        value = next((v for name, v in details.invocation_metadata or () if name == "authorization"), "")
        if handler is None or bearer_matches(value.encode(), self._token):
            return handler
        # The same kind of method (A2A has unary and server-streaming ones), answering UNAUTHENTICATED.
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                _refuse, handler.request_deserializer, handler.response_serializer)
        return grpc.unary_unary_rpc_method_handler(_refuse, handler.request_deserializer,
                                                   handler.response_serializer)


def grpc_bearer_auth(token: str) -> GrpcBearerAuth:
    """The gRPC server's check of the service's token."""
    return GrpcBearerAuth(token)
