"""Where a2a-sdk 1.3.0's servers fall short of A2A 1.0 (spec v1.0.1), a thin layer of ours.

Why each part, and the choices: docs/protocol.md, "Our servers and the A2A 1.0
specification"; what a2a-sdk should fix so that a part can go:
docs/a2a-sdk-conformance.md.

Both `tau2-a2a serve` and the reference agents serve a2a-sdk's own handlers
through tau2_a2a.protocol.hosting, which puts this layer around them:

- gRPC: the SDK checks `A2A-Version` on JSON-RPC and HTTP+JSON but not on
  gRPC. `grpc_context_builder` (the SDK's own context-builder hook) refuses
  an unsupported version with VersionNotSupportedError, which the SDK's
  servicer maps like every A2A error (spec 3.6.2, 5.4, 10.6).
- HTTP (`HttpConformance`, ASGI middleware, innermost):
  - a request body that is not JSON is refused with 415 (spec 9.1, 11.1);
  - a body that is not UTF-8 is a parse error (-32700 on JSON-RPC, 400 on
    HTTP+JSON) where the SDK answers -32603 / 500 (spec 9.5, 14.1.1);
  - a JSON-RPC request naming a version no interface here serves gets
    -32009 for the 0.3 method names too, where the SDK answers -32603;
  - every HTTP+JSON 1.0 response says `application/a2a+json`, errors
    included, where the SDK labels only successes so (spec 11.1, 11.6).
- The card's `Cache-Control` (spec 8.6.1) is the SDK's own option; see
  `CARD_CACHE_CONTROL`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from tau2_a2a.protocol.cards import CARD_PATHS

if TYPE_CHECKING:  # gRPC and a2a-sdk's servers are imported only where they serve
    import grpc.aio
    from a2a.server.context import ServerCallContext
    from a2a.server.request_handlers.grpc_handler import GrpcServerCallContextBuilder
    from starlette.middleware import Middleware
    from starlette.responses import JSONResponse
    from starlette.types import ASGIApp, Receive, Scope, Send
    from starlette.types import Message as AsgiMessage

__all__ = [
    "A2A_JSON",
    "CARD_CACHE_CONTROL",
    "HttpConformance",
    "conformance_middleware",
    "grpc_context_builder",
    "version_supported",
]

# The card changes only when its server restarts with other settings; a client revalidates
# against the ETag after this long, and a 304 costs nothing.
CARD_CACHE_CONTROL = "public, max-age=300"
A2A_JSON = "application/a2a+json"
JSON_MEDIA_TYPES = frozenset({"application/json", A2A_JSON})
V03_REST_PREFIX = "/v1/"  # a2a-sdk's 0.3 HTTP+JSON routes; 0.3 says application/json
SERVED_MAJORS = frozenset({0, 1})  # A2A 0.3 and 1.0 are served on every binding
UNSUPPORTED_MEDIA_TYPE = ("Unsupported Content-Type {found}: send the body as JSON with 'Content-Type: "
                          "application/json' (curl: --json, or -H 'Content-Type: application/json').")
NOT_UTF8 = ("Invalid JSON payload: the body is not UTF-8 (byte 0x{byte:02x} at offset {offset}); "
            "A2A sends JSON as UTF-8.")


def version_supported(value: str | None, expected: str) -> bool:
    """Whether an `A2A-Version` value is served by an interface of version `expected`.

    The rule of a2a-sdk's `validate_version`, which JSON-RPC and HTTP+JSON apply:
    an empty value means 0.3 (spec 3.6.2), the major versions must match.
    """
    actual = (value or "").strip() or "0.3"
    return actual == expected or _major(actual) == _major(expected)


def _major(version: str) -> int | None:
    head = version.split(".", 1)[0].strip()
    return int(head) if head.isdigit() else None


def _not_supported_message(value: str | None, expected: str) -> str:
    named = f"'{value}'" if (value or "").strip() else "none (which means 0.3)"
    return (f"A2A version {named} is not supported by this interface (it serves {expected}); "
            f"send the metadata 'a2a-version: {expected}' or use an interface the agent card declares.")


def grpc_context_builder(expected: str) -> GrpcServerCallContextBuilder:
    """The call-context builder for a gRPC servicer of A2A version `expected` ("1.0" or "0.3")."""
    return _version_checking_builder_class()(expected)


@functools.cache
def _version_checking_builder_class() -> type:
    # Made on first use: it imports a2a-sdk's gRPC server, which only gRPC serving needs.
    from a2a.server.request_handlers.grpc_handler import DefaultGrpcServerCallContextBuilder
    from a2a.utils.errors import VersionNotSupportedError

    class VersionCheckingBuilder(DefaultGrpcServerCallContextBuilder):
        """a2a-sdk's default builder, refusing a call whose `a2a-version` the servicer does not serve.

        The servicer builds the context inside its error handling, so the refusal reaches the
        client as the SDK maps VersionNotSupportedError: its gRPC status with an ErrorInfo
        whose reason is VERSION_NOT_SUPPORTED.
        """

        def __init__(self, expected: str) -> None:
            self.expected = expected

        def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
            value = _metadata_value(context, "a2a-version")
            if not version_supported(value, self.expected):
                raise VersionNotSupportedError(message=_not_supported_message(value, self.expected))
            return super().build(context)

    return VersionCheckingBuilder


def _metadata_value(context: grpc.aio.ServicerContext, key: str) -> str | None:
    for name, value in context.invocation_metadata() or ():
        if name.lower() == key:
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return None


# -- HTTP ------------------------------------------------------------------------------------

def conformance_middleware(jsonrpc_path: str = "/") -> list[Middleware]:
    """The Starlette middleware list entry; put it innermost (last), after auth and size limits."""
    from starlette.middleware import Middleware

    return [Middleware(HttpConformance, jsonrpc_path=jsonrpc_path)]


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((value for key, value in scope.get("headers", []) if key == name), None)


def _has_body(scope: Scope) -> bool:
    length = _header(scope, b"content-length")
    if length is not None:
        return length.strip() not in (b"", b"0")
    return _header(scope, b"transfer-encoding") is not None


def _media_type(scope: Scope) -> str:
    value = (_header(scope, b"content-type") or b"").decode("latin-1")
    return value.split(";", 1)[0].strip().lower()


class HttpConformance:
    """ASGI middleware around a2a-sdk's JSON-RPC and HTTP+JSON routes (see the module docstring)."""

    def __init__(self, app: ASGIApp, jsonrpc_path: str = "/") -> None:
        self.app = app
        self.jsonrpc_path = jsonrpc_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        jsonrpc = path == self.jsonrpc_path
        rest_1_0 = not jsonrpc and path not in CARD_PATHS and not path.startswith(V03_REST_PREFIX)
        if _has_body(scope):
            media_type = _media_type(scope)
            if media_type not in JSON_MEDIA_TYPES:
                found = f"'{media_type}'" if media_type else "(none)"
                await self._refuse_media_type(send, jsonrpc, rest_1_0, UNSUPPORTED_MEDIA_TYPE.format(found=found))
                return
            body, disconnected = await _read_body(receive)
            if disconnected:
                return
            answer = self._body_error(scope, body, jsonrpc, rest_1_0)
            if answer is not None:
                await answer(scope, receive, send)
                return
            receive = _replay(body, receive)
        if rest_1_0:
            send = _relabel_json(send)
        await self.app(scope, receive, send)

    def _body_error(self, scope: Scope, body: bytes, jsonrpc: bool, rest_1_0: bool) -> JSONResponse | None:
        """The response for a body the SDK would answer wrongly, or None."""
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as error:
            message = NOT_UTF8.format(byte=body[error.start], offset=error.start)
            return _jsonrpc_error(None, "parse", message) if jsonrpc else _rest_parse_error(message, rest_1_0)
        if jsonrpc:
            value = (_header(scope, b"a2a-version") or b"").decode("latin-1").strip()
            if value and _major(value) not in SERVED_MAJORS:
                return _jsonrpc_error(_request_id(body), "version",
                                      f"A2A version '{value}' is not supported by this agent (it serves 1.0 "
                                      "and 0.3); send 'A2A-Version: 1.0'.")
        return None

    async def _refuse_media_type(self, send: Send, jsonrpc: bool, rest_1_0: bool, message: str) -> None:
        from a2a.server.jsonrpc_models import InvalidRequestError

        if jsonrpc:
            from a2a.server.request_handlers.response_helpers import build_error_response

            body = build_error_response(None, InvalidRequestError(message=message))
        else:
            body = {"error": {"code": 415, "status": "INVALID_ARGUMENT", "message": message}}
        media_type = A2A_JSON if rest_1_0 else "application/json"
        await _send_json(send, 415, body, media_type)


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The whole request body, and whether the client went away first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"", True
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), False


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the app the body once, then waits on the client as before."""
    sent = False

    async def replay() -> AsgiMessage:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _relabel_json(send: Send) -> Send:
    """A send that labels an `application/json` response `application/a2a+json`."""

    async def relabel(message: AsgiMessage) -> None:
        if message["type"] == "http.response.start":
            headers = [(name, A2A_JSON.encode()) if name == b"content-type"
                       and value.split(b";", 1)[0].strip().lower() == b"application/json" else (name, value)
                       for name, value in message.get("headers", [])]
            message = {**message, "headers": headers}
        await send(message)

    return relabel


def _request_id(body: bytes) -> str | int | None:
    try:
        request_id = json.loads(body).get("id")
    except (ValueError, AttributeError):
        return None
    return request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None


def _jsonrpc_error(request_id: str | int | None, kind: str, message: str) -> JSONResponse:
    from a2a.server.jsonrpc_models import JSONParseError
    from a2a.server.request_handlers.response_helpers import build_error_response
    from a2a.utils.errors import VersionNotSupportedError
    from starlette.responses import JSONResponse

    error = JSONParseError(message=message) if kind == "parse" else VersionNotSupportedError(message=message)
    return JSONResponse(build_error_response(request_id, error))  # JSON-RPC errors travel with 200


def _rest_parse_error(message: str, rest_1_0: bool) -> JSONResponse:
    """The answer a2a-sdk gives a body that is not JSON: 400, INVALID_ARGUMENT, reason INVALID_REQUEST."""
    from a2a.utils.error_handlers import build_rest_error_payload
    from google.protobuf.json_format import ParseError
    from starlette.responses import JSONResponse

    payload = build_rest_error_payload(ParseError(message))
    return JSONResponse(payload, status_code=payload["error"]["code"],
                        media_type=A2A_JSON if rest_1_0 else "application/json")


async def _send_json(send: Send, status: int, body: Mapping[str, object], media_type: str) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", media_type.encode()), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
