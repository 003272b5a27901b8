"""A size limit on request bodies, so one huge message cannot take the service's memory.

Uvicorn reads a body whole, whatever its size. This ASGI middleware refuses a
declared Content-Length over the limit before reading anything, and stops a
chunked body as soon as it passes the limit, answering 413 with what to do.
gRPC has the same limit as a server option (`grpc.max_receive_message_length`).
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_MAX_REQUEST_BYTES = 10 * 2**20


def too_large_message(max_bytes: int) -> str:
    return (f"The request body is larger than this service accepts ({max_bytes} bytes). Send a smaller "
            "message; the operator sets the limit with --max-request-bytes (TAU2_EVAL_MAX_REQUEST_BYTES).")


class RequestSizeLimit:
    """ASGI middleware: 413 for a request body over `max_bytes`."""

    def __init__(self, app: Any, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = next((value for name, value in scope.get("headers", []) if name == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        received = 0
        too_large = False
        refused = False

        async def counting_receive() -> dict[str, Any]:
            nonlocal received, too_large
            if too_large:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:  # the app sees an empty end, and its answer is replaced
                    too_large = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def replacing_send(message: dict[str, Any]) -> None:
            nonlocal refused
            if not too_large:
                await send(message)
            elif not refused:
                refused = True
                await self._refuse(send)

        try:
            await self.app(scope, counting_receive, replacing_send)
        except Exception:
            if not too_large:
                raise
        if too_large and not refused:
            await self._refuse(send)

    async def _refuse(self, send: Any) -> None:
        body = json.dumps({"error": too_large_message(self.max_bytes)}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
