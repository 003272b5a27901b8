"""Size limits on what callers send, so one huge message can take neither the service's memory nor its disk.

Uvicorn reads a body whole, whatever its size. This ASGI middleware refuses a
declared Content-Length over the limit before reading anything, and stops a
chunked body as soon as it passes the limit, answering 413 with what to do.
gRPC has the same limit as a server option (`grpc.max_receive_message_length`).

Below that, every A2A message is kept: in the task store, the ADK session, the
task's history in replies and ListTasks pages. A message over
`--max-message-bytes` is no request this service could run (a tool call is a
few hundred bytes, a list of every task id of a domain a few hundred
kilobytes): `cut_message` leaves only the first KEPT_TEXT_BYTES of its text
before anything keeps it (none of a request sent as JSON text: the service
scrubs secrets out of a request it can read, and a cut one it cannot), and
the task is rejected saying so.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tau2_a2a.service.wire import JsonObject

if TYPE_CHECKING:
    from a2a.types import Message as A2AMessage

DEFAULT_MAX_REQUEST_BYTES = 10 * 2**20
DEFAULT_MAX_MESSAGE_BYTES = 2**20  # telecom's 2,285 task ids as a task_ids list are 300 KB
KEPT_TEXT_BYTES = 1024  # what is kept of the text of a message over the limit
CUT_KEY = "tau2_eval_cut"  # message metadata: {"bytes": its size, "limit": the limit}, set only here
_MAX_ID = 256  # characters of an id kept from a cut message


def cut_message(message: A2AMessage, max_bytes: int) -> dict[str, int] | None:
    """In place: a message over `max_bytes` (serialized) keeps only the first KEPT_TEXT_BYTES of its text, as one
    text part; its data, metadata and extensions go, and so do ids too long to be real. Its size and the limit
    (also put in its metadata under CUT_KEY, which only this function sets), or None for a message within it."""
    from a2a.helpers import new_text_part

    if CUT_KEY in message.metadata:
        del message.metadata[CUT_KEY]
    size = message.ByteSize()
    if size <= max_bytes:
        return None
    text = "".join(part.text for part in message.parts if part.HasField("text"))
    if text.lstrip().startswith(("{", "[")):  # a request as JSON text: a cut one cannot be scrubbed of its secrets
        kept = "[a JSON request:"
    else:
        kept = text.encode()[:KEPT_TEXT_BYTES].decode(errors="ignore") + " [..."
    del message.parts[:]
    message.parts.append(new_text_part(f"{kept} cut: this message was {size} bytes]"))
    message.metadata.Clear()
    del message.extensions[:]
    del message.reference_task_ids[:]
    if len(message.message_id) > _MAX_ID:
        message.message_id = str(uuid.uuid4())
    for name in ("context_id", "task_id"):
        if len(getattr(message, name)) > _MAX_ID:
            setattr(message, name, "")
    cut = {"bytes": size, "limit": max_bytes}
    message.metadata.update({CUT_KEY: cut})
    return cut


def cut_message_refusal(cut: JsonObject) -> str:
    """Why a cut message was rejected, for its caller."""
    return (f"The message is {int(cut['bytes'])} bytes, over the {int(cut['limit'])} bytes this service reads; "
            f"nothing of it ran, and only the first {KEPT_TEXT_BYTES} bytes of its text are kept (none of a request "
            "sent as JSON text, whose secrets a cut leaves unreadable). Send a shorter "
            "request (a tool call is a few hundred bytes); the operator sets the limit with --max-message-bytes "
            "(TAU2_EVAL_MAX_MESSAGE_BYTES).")


def too_large_message(max_bytes: int) -> str:
    return (f"The request body is larger than this service accepts ({max_bytes} bytes). Send a smaller "
            "message; the operator sets the limit with --max-request-bytes (TAU2_EVAL_MAX_REQUEST_BYTES).")


class RequestSizeLimit:
    """ASGI middleware: 413 for a request body over `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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

        async def counting_receive() -> Message:
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

        async def replacing_send(message: Message) -> None:
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

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"error": too_large_message(self.max_bytes)}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
