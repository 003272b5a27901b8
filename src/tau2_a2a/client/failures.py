"""Any exception from a2a-sdk, httpx or grpc turned into one A2AFailure: one clear line, no secret in it.

The failure types themselves are in `tau2_a2a.client.errors`.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import httpx
from a2a.client.errors import A2AClientTimeoutError, AgentCardResolutionError
from a2a.types import Task, TaskState
from a2a.utils.errors import A2AError

from tau2_a2a.client.config import redact
from tau2_a2a.client.errors import (
    A2AFailure,
    AgentAuthError,
    AgentCardError,
    AgentHTTPError,
    AgentMalformedReply,
    AgentProtocolError,
    AgentReplyTooLarge,
    AgentReplyTooSlow,
    AgentTargetRefused,
    AgentTimeout,
    AgentUnreachable,
)
from tau2_a2a.client.records import RequestRecord
from tau2_a2a.protocol.messages import reply_content
from tau2_a2a.terminal import plain

if TYPE_CHECKING:
    import grpc.aio


class Failed(Exception):
    """A request that failed: its failure, its record, and the exception that caused it."""

    def __init__(self, failure: A2AFailure, record: RequestRecord, cause: BaseException | None = None) -> None:
        self.failure = failure
        self.record = record
        self.cause = cause


def card_failure(error: BaseException, endpoint: str, path: str, token: str | None,
                 timeout: float | None) -> A2AFailure:
    """What went wrong fetching the card at `path`: a refusal, an HTTP status, no connection, no valid card."""
    where = f"{endpoint}{path}"
    if not isinstance(error, AgentCardResolutionError):  # connection, timeout, bad JSON
        return classify(error, None, token, f"Fetching the agent card {where}", timeout=timeout)
    status = error.status_code
    if status in (401, 403):
        return AgentAuthError(
            f"The agent at {endpoint} refused the card request with HTTP {status}. "
            "Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN.",
            status=status,
        )
    if status is not None:
        return AgentCardError(f"Fetching the agent card {where} failed with HTTP {status}.", status=status)
    transport_failure = classify(error, None, token, f"Fetching the agent card {where}", timeout=timeout)
    if isinstance(transport_failure, (AgentUnreachable, AgentTimeout, AgentTargetRefused, AgentReplyTooLarge)):
        return transport_failure
    return AgentCardError(
        f"The agent card at {where} is not a valid A2A agent card: {plain(redact(str(error), token))[:500]}"
    )


def task_failure(task: Task, token: str | None) -> AgentProtocolError:
    """A task the agent ended as failed, rejected, canceled or needing auth, with what it said about it."""
    texts, _ = reply_content(task)
    return AgentProtocolError(
        f"the agent ended task {plain(task.id[:100])} as {TaskState.Name(task.status.state)}"
        + (f": {plain(redact(' '.join(texts), token)[:300])}" if texts else "")
    )


def classify(error: BaseException, status: int | None, token: str | None, doing: str,
             body: str = "", timeout: float | None = None) -> A2AFailure:
    """Map any exception from a2a-sdk or httpx to one of our failure types.

    `body` is what the agent said with an HTTP error status: it goes into the
    message (without the token, should the agent echo it), since it usually
    says what went wrong.
    """
    chain = chain_of(error)
    ours = next((e for e in chain if isinstance(e, A2AFailure)), None)  # raised in our transport, under a2a-sdk's
    if ours is not None:
        return ours
    text = plain(redact(str(error), token))  # often the agent's own words
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
        said = plain(" ".join(redact(body, token).split()))
        return AgentHTTPError(f"{doing} failed with HTTP {status}" + (f": {said[:300]}" if said else "."),
                              status=status)
    if any(isinstance(e, (httpx.ConnectError, httpx.UnsupportedProtocol)) for e in chain):
        return AgentUnreachable(
            f"{doing} failed: cannot connect ({root_message(chain, token)}). "
            "Is the agent running, and is the URL right?",
            status=status,
        )
    if any(isinstance(e, httpx.TransportError) for e in chain):
        return AgentUnreachable(
            f"{doing} failed: the connection was dropped ({root_message(chain, token)}). "
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


def _rpc_error(chain: list[BaseException]) -> grpc.aio.AioRpcError | None:
    """The gRPC error in a chain of exceptions, if any (grpc is imported only by gRPC sessions)."""
    import sys

    grpc = sys.modules.get("grpc")
    if grpc is None:
        return None
    return next((e for e in chain if isinstance(e, grpc.aio.AioRpcError)), None)


def grpc_status(error: BaseException | None) -> str | None:
    """The gRPC status code of a request: OK, or the code of the gRPC error that ended it."""
    if error is None:
        return "OK"
    rpc = _rpc_error(chain_of(error))
    return rpc.code().name if rpc is not None else None


GRPC_DEADLINE_DETAILS = "Deadline Exceeded"  # what grpc says when the caller's own deadline expires


def _classify_grpc(chain: list[BaseException], token: str | None, doing: str,
                   timeout: float | None) -> A2AFailure | None:
    """gRPC status codes mapped to the categories HTTP statuses get (None: not a gRPC transport error)."""
    rpc = _rpc_error(chain)
    if rpc is None:
        return None
    code = rpc.code().name
    said = plain(redact(rpc.details() or "", token)[:200])
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


def chain_of(error: BaseException | None) -> list[BaseException]:
    """The exception and its causes, outermost first."""
    chain: list[BaseException] = []
    current = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def root_message(chain: list[BaseException], token: str | None) -> str:
    """The innermost error's words: the one that says what actually happened."""
    return plain(redact(str(chain[-1]) or type(chain[-1]).__name__, token)[:200])


def timed_out_arriving(failure: A2AFailure, received_bytes: int, events: int, doing: str,
                       timeout: float) -> A2AFailure:
    """A timeout that cut a reply already arriving (`received_bytes` read, or `events` received) is
    AgentReplyTooSlow, not retried: the agent is up and answering, and the same request would only take as long
    again. A timeout with nothing of the reply come stays retryable (the request may have been lost)."""
    if not isinstance(failure, AgentTimeout) or not (received_bytes or events):
        return failure
    arrived = f"{events} event{'' if events == 1 else 's'}" if events else f"{received_bytes} bytes"
    return AgentReplyTooSlow(f"{doing} timed out after {timeout:g}s with its reply begun ({arrived} in): the agent "
                             "is answering, so the request was not sent again; raise --a2a-timeout if the agent is "
                             "this slow.", status=failure.status)


def after_attempts(failure: A2AFailure, records: list[RequestRecord], attempts: int) -> A2AFailure:
    """The failure a send ends with, given the records of all its requests: after more than one attempt its
    message says how many there were and how each ended (the records keep each one's own message)."""
    failure.records = records
    if attempts > 1:
        endings = ", ".join(record.error or "ok" for record in records[-attempts:])
        said = str(failure)
        end = "." if said.endswith(".") else ""
        failure.args = (f"{said.removesuffix('.')} ({attempts} attempts: {endings}){end}",)
    return failure


def record_failure(record: RequestRecord, failure: A2AFailure) -> None:
    """The request's record says how it failed, in the failure's words."""
    record.error = failure.category.value
    record.error_message = str(failure)
