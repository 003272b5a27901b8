"""One error type per way an A2A exchange can fail, each with its metrics category."""

from __future__ import annotations

from enum import Enum


class ErrorCategory(str, Enum):
    CONNECTION = "connection"
    TIMEOUT = "timeout"
    AUTH = "auth"
    HTTP = "http"
    PROTOCOL = "protocol"
    MALFORMED_REPLY = "malformed-reply"
    LIMIT = "limit"  # the agent asked for more than a limit of the run allows (tool calls, request bytes)
    ABORTED = "aborted"  # we ended the request ourselves (its simulation ended)


class A2AFailure(Exception):
    """Base of every failure talking to the agent under test. Never holds a secret."""

    category: ErrorCategory = ErrorCategory.PROTOCOL
    retryable: bool = False

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.records: list = []  # RequestRecords of the attempts, filled by the session


class AgentUnreachable(A2AFailure):
    category = ErrorCategory.CONNECTION
    retryable = True


class AgentTimeout(A2AFailure):
    category = ErrorCategory.TIMEOUT
    retryable = True


class AgentReplyTooSlow(AgentTimeout):
    """A reply still arriving (bytes or events had come) when its time ran out: the agent is up and answering,
    too slowly. Not retried: sending the request again would only take as long again."""

    retryable = False


class AgentAuthError(A2AFailure):
    """The agent refused our credentials. Never retried: a run that meets it mid-way stops."""

    category = ErrorCategory.AUTH


class AgentHTTPError(A2AFailure):
    """An error status from the binding: HTTP for JSON-RPC and HTTP+JSON, a gRPC code for gRPC.

    Retried like an overloaded or failing server: HTTP 429 and 5xx, gRPC
    RESOURCE_EXHAUSTED, INTERNAL and UNKNOWN.
    """

    category = ErrorCategory.HTTP

    def __init__(self, message: str, status: int | None = None, retryable: bool | None = None) -> None:
        super().__init__(message, status)
        self._retryable = retryable

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        if self._retryable is not None:
            return self._retryable
        return self.status is not None and (self.status == 429 or self.status >= 500)


class AgentProtocolError(A2AFailure):
    category = ErrorCategory.PROTOCOL


class AgentMalformedReply(A2AFailure):
    category = ErrorCategory.MALFORMED_REPLY


class AgentReplyTooLarge(AgentMalformedReply):
    """A reply over --a2a-max-reply-bytes: reading stopped there, so one hostile agent cannot fill the memory."""


class AgentTargetRefused(A2AFailure):
    """A connection the target policy refuses (--a2a-allowed-targets): the endpoint, a URL the card names,
    or an address DNS gave when connecting. Never retried."""

    category = ErrorCategory.CONNECTION


class AgentCardError(A2AFailure):
    """The agent card is missing or invalid: the run cannot start."""

    category = ErrorCategory.PROTOCOL


class AgentOverLimit(A2AFailure):
    """The agent drove its simulation past a limit of the run: tool calls per reply or per simulation, or the
    bytes of a request going back to it. Never retried: the same conversation would reach it again. The
    message names the limit and its flag."""

    category = ErrorCategory.LIMIT


class AgentRequestAborted(A2AFailure):
    """A request we ended ourselves before its reply came (`Wire.abort()`), because its simulation ended."""

    category = ErrorCategory.ABORTED
