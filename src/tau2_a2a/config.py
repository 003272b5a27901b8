"""A2AConfig: how tau2 reaches one A2A agent, carried through tau2's `llm_args`.

tau2 writes `llm_args` into every results file, so the bearer token never
travels there: `to_llm_args()` parks it in a process-local credential store
and leaves only a reference (the endpoint, or a caller-chosen name) behind.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    from tau2_a2a.client.targets import TargetPolicy

AUTH_TOKEN_ENV = "TAU2_A2A_AUTH_TOKEN"
DEFAULT_TIMEOUT_SECONDS = 300.0
MAX_TIMEOUT_SECONDS = 86400.0  # a day per reply; longer ones overflow the clocks deadlines are kept on
# A tau2 turn is kilobytes; a reply is held several times over (bytes, JSON, protobuf, tau2's message)
# in each of up to --max-concurrency simulations, so one hostile agent's reply must not be unbounded.
DEFAULT_MAX_REPLY_BYTES = 8 << 20

# Keys this package reads from `llm_args_agent`. Nothing secret among them.
_ENDPOINT = "a2a_endpoint"
_TIMEOUT = "a2a_timeout"
_DEBUG = "a2a_debug"
_CREDENTIAL = "a2a_credential"
_MAX_ATTEMPTS = "a2a_max_attempts"
_BACKOFF = "a2a_backoff_seconds"
_MAX_BACKOFF = "a2a_max_backoff_seconds"
_TRANSPORT = "a2a_transport"
_STREAMING = "a2a_streaming"
_MAX_REPLY = "a2a_max_reply_bytes"
_TARGETS = "a2a_allowed_targets"

# --a2a-transport choices: `auto` takes the card's first interface we speak.
TRANSPORTS = ("auto", "jsonrpc", "http-json", "grpc")


class ConfigError(ValueError):
    """A setting the user gave cannot work; the message says which and why."""


@dataclass(frozen=True)
class RetryPolicy:
    """Retries for transient failures: timeouts, connection resets, 5xx and 429."""

    max_attempts: int = 3
    backoff_seconds: float = 0.5
    max_backoff_seconds: float = 8.0

    def delay(self, attempt: int) -> float:
        """Exponential backoff before retry number `attempt` (1-based)."""
        return min(self.backoff_seconds * (2 ** (attempt - 1)), self.max_backoff_seconds)


class _CredentialStore:
    """Tokens by reference, kept in memory only, never serialised."""

    def __init__(self) -> None:
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()

    def put(self, reference: str, token: str) -> None:
        with self._lock:
            self._tokens[reference] = token

    def get(self, reference: str) -> str | None:
        with self._lock:
            return self._tokens.get(reference)

    def discard(self, reference: str) -> None:
        with self._lock:
            self._tokens.pop(reference, None)


credentials = _CredentialStore()


def validate_endpoint(endpoint: str) -> str:
    """Return the endpoint without a trailing slash, or say what is wrong with it."""
    parsed = urlparse(endpoint or "")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(
            f"A2A endpoint {endpoint!r} is not an http(s) URL. "
            "Pass the agent's base URL, for example --a2a-endpoint http://127.0.0.1:9000"
        )
    return endpoint.rstrip("/")


def check_timeout(seconds: float, flag: str = "A2A timeout") -> float:
    """A reply timeout is a finite number of seconds above 0 and at most a day; say so otherwise."""
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT_SECONDS):
        raise ConfigError(f"{flag} must be a number of seconds above 0 and at most {MAX_TIMEOUT_SECONDS:g}, "
                          f"got {seconds}.")
    return seconds


@dataclass(frozen=True)
class A2AConfig:
    """Everything the A2A agent type needs to talk to one remote agent, over which binding, blocking or streaming."""

    endpoint: str
    auth_token: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    retry: RetryPolicy = RetryPolicy()
    debug: bool = False
    credential_ref: str | None = None
    transport: str = "auto"
    streaming: bool = False
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    targets: TargetPolicy | None = None  # None: any host but link-local and metadata addresses

    def __post_init__(self) -> None:
        object.__setattr__(self, "endpoint", validate_endpoint(self.endpoint))
        if self.transport not in TRANSPORTS:
            raise ConfigError(f"A2A transport {self.transport!r} is not one of {', '.join(TRANSPORTS)}.")
        check_timeout(self.timeout)
        if self.retry.max_attempts < 1:
            raise ConfigError("A2A max attempts must be at least 1.")
        if not isinstance(self.max_reply_bytes, int) or self.max_reply_bytes < 1:
            raise ConfigError(f"--a2a-max-reply-bytes must be a whole number of bytes, at least 1, "
                              f"got {self.max_reply_bytes!r}.")

    @property
    def reference(self) -> str:
        """The name the token is stored under: deterministic, so resumed runs match."""
        return self.credential_ref or self.endpoint

    def to_llm_args(self) -> dict[str, Any]:
        """Settings for `RunConfig.llm_args_agent`; the token stays in memory."""
        if self.auth_token:
            credentials.put(self.reference, self.auth_token)
        else:  # a run without a token does not inherit one an earlier run in this process stored
            credentials.discard(self.reference)
        args: dict[str, Any] = {
            _ENDPOINT: self.endpoint,
            _TIMEOUT: self.timeout,
            _MAX_ATTEMPTS: self.retry.max_attempts,
            _BACKOFF: self.retry.backoff_seconds,
            _MAX_BACKOFF: self.retry.max_backoff_seconds,
            _DEBUG: self.debug,
            _TRANSPORT: self.transport,
            _STREAMING: self.streaming,
        }
        if self.credential_ref:
            args[_CREDENTIAL] = self.credential_ref
        if self.max_reply_bytes != DEFAULT_MAX_REPLY_BYTES:  # the defaults leave earlier runs' settings as they were
            args[_MAX_REPLY] = self.max_reply_bytes
        if self.targets is not None and self.targets.entries:
            args[_TARGETS] = list(self.targets.entries)
        return args

    @classmethod
    def from_llm_args(cls, llm_args: dict[str, Any] | None) -> "A2AConfig":
        """Rebuild the config inside the agent; the token comes from the store or the env."""
        llm_args = llm_args or {}
        if _ENDPOINT not in llm_args:
            raise ConfigError(
                "The a2a_agent needs an endpoint: pass --a2a-endpoint URL, or put "
                "A2AConfig(endpoint=...).to_llm_args() in RunConfig.llm_args_agent."
            )
        reference = llm_args.get(_CREDENTIAL) or validate_endpoint(llm_args[_ENDPOINT])
        token = credentials.get(reference) or os.environ.get(AUTH_TOKEN_ENV) or None
        targets = None
        if llm_args.get(_TARGETS):
            from tau2_a2a.client.targets import TargetPolicy  # the policy module builds on this one

            targets = TargetPolicy.from_entries(llm_args[_TARGETS])
        return cls(
            endpoint=llm_args[_ENDPOINT],
            auth_token=token,
            timeout=float(llm_args.get(_TIMEOUT, DEFAULT_TIMEOUT_SECONDS)),
            retry=RetryPolicy(
                max_attempts=int(llm_args.get(_MAX_ATTEMPTS, RetryPolicy.max_attempts)),
                backoff_seconds=float(llm_args.get(_BACKOFF, RetryPolicy.backoff_seconds)),
                max_backoff_seconds=float(llm_args.get(_MAX_BACKOFF, RetryPolicy.max_backoff_seconds)),
            ),
            debug=bool(llm_args.get(_DEBUG, False)),
            credential_ref=llm_args.get(_CREDENTIAL),
            transport=str(llm_args.get(_TRANSPORT, "auto")),
            streaming=bool(llm_args.get(_STREAMING, False)),
            max_reply_bytes=int(llm_args.get(_MAX_REPLY, DEFAULT_MAX_REPLY_BYTES)),
            targets=targets,
        )


def redact(text: str, *secrets: str | None) -> str:
    """Replace every secret in `text` so it can be logged or raised safely."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
