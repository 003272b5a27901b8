"""A2AConfig: how tau2-a2a reaches one A2A agent, decided once where a run is asked for.

The config goes, as one object, from the command line (or the service, or a
Python caller) to the run's A2A session. Its bearer token is held in memory
only: `as_record()`, what a results file and the settings' JSON keep of the
config, leaves it out, and `from_record()` takes it back beside the record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.errors import ConfigError

__all__ = ["A2AConfig", "ConfigError", "RetryPolicy", "redact", "validate_endpoint", "check_timeout"]

AUTH_TOKEN_ENV = "TAU2_A2A_AUTH_TOKEN"
DEFAULT_TIMEOUT_SECONDS = 300.0
MAX_TIMEOUT_SECONDS = 86400.0  # a day per reply; longer ones overflow the clocks deadlines are kept on
# A tau2 turn is kilobytes; a reply is held several times over (bytes, JSON, protobuf, tau2's message)
# in each of up to --max-concurrency simulations, so one hostile agent's reply must not be unbounded.
DEFAULT_MAX_REPLY_BYTES = 8 << 20

# The keys of `as_record()`. Nothing secret among them.
_ENDPOINT = "a2a_endpoint"
_TIMEOUT = "a2a_timeout"
_DEBUG = "a2a_debug"
_MAX_ATTEMPTS = "a2a_max_attempts"
_BACKOFF = "a2a_backoff_seconds"
_MAX_BACKOFF = "a2a_max_backoff_seconds"
_TRANSPORT = "a2a_transport"
_STREAMING = "a2a_streaming"
_MAX_REPLY = "a2a_max_reply_bytes"
_TARGETS = "a2a_allowed_targets"
_PRICE_MODEL = "a2a_price_model"

# --a2a-transport choices: `auto` takes the card's first interface we speak.
TRANSPORTS = ("auto", "jsonrpc", "http-json", "grpc")


@dataclass(frozen=True)
class RetryPolicy:
    """Retries for transient failures: timeouts, connection resets, 5xx and 429."""

    max_attempts: int = 3
    backoff_seconds: float = 0.5
    max_backoff_seconds: float = 8.0

    def delay(self, attempt: int) -> float:
        """Exponential backoff before retry number `attempt` (1-based)."""
        return min(self.backoff_seconds * (2 ** (attempt - 1)), self.max_backoff_seconds)


def validate_endpoint(endpoint: str) -> str:
    """Return the endpoint without a trailing slash, or say what is wrong with it."""
    parsed = urlparse(endpoint or "")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(
            f"A2A endpoint {endpoint!r} is not an http(s) URL. "
            "Pass the agent's base URL, for example --a2a-endpoint http://127.0.0.1:9000"
        )
    return endpoint.rstrip("/")


def check_timeout(seconds: float, flag: str = "--a2a-timeout") -> float:
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
    transport: str = "auto"
    streaming: bool = False
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    targets: TargetPolicy | None = None  # None: any host but link-local and metadata addresses
    # The LiteLLM model whose price applies to tokens the agent reports without a cost or a priced model.
    price_model: str | None = None

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
        if self.price_model is not None:
            from tau2_a2a.client.pricing import check_price_model

            check_price_model(self.price_model)

    def as_record(self) -> dict[str, Any]:
        """The config as a results file keeps it (the agent's `llm_args`) and as run settings travel: no token."""
        record: dict[str, Any] = {
            _ENDPOINT: self.endpoint,
            _TIMEOUT: self.timeout,
            _MAX_ATTEMPTS: self.retry.max_attempts,
            _BACKOFF: self.retry.backoff_seconds,
            _MAX_BACKOFF: self.retry.max_backoff_seconds,
            _DEBUG: self.debug,
            _TRANSPORT: self.transport,
            _STREAMING: self.streaming,
        }
        if self.max_reply_bytes != DEFAULT_MAX_REPLY_BYTES:  # the defaults leave earlier runs' records as they were
            record[_MAX_REPLY] = self.max_reply_bytes
        if self.targets is not None and self.targets.entries:
            record[_TARGETS] = list(self.targets.entries)
        if self.price_model is not None:
            record[_PRICE_MODEL] = self.price_model
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any], auth_token: str | None = None) -> A2AConfig:
        """The config `as_record()` gave, with the token that travelled beside it."""
        if not record.get(_ENDPOINT):
            raise ConfigError("An A2A agent needs an endpoint: pass --a2a-endpoint URL.")
        return cls(
            endpoint=record[_ENDPOINT],
            auth_token=auth_token or None,
            timeout=float(record.get(_TIMEOUT, DEFAULT_TIMEOUT_SECONDS)),
            retry=RetryPolicy(
                max_attempts=int(record.get(_MAX_ATTEMPTS, RetryPolicy.max_attempts)),
                backoff_seconds=float(record.get(_BACKOFF, RetryPolicy.backoff_seconds)),
                max_backoff_seconds=float(record.get(_MAX_BACKOFF, RetryPolicy.max_backoff_seconds)),
            ),
            debug=bool(record.get(_DEBUG, False)),
            transport=str(record.get(_TRANSPORT, "auto")),
            streaming=bool(record.get(_STREAMING, False)),
            max_reply_bytes=int(record.get(_MAX_REPLY, DEFAULT_MAX_REPLY_BYTES)),
            targets=TargetPolicy.from_entries(record[_TARGETS]) if record.get(_TARGETS) else None,
            price_model=record.get(_PRICE_MODEL) or None,
        )


def redact(text: str, *secrets: str | None) -> str:
    """Replace every secret in `text` so it can be logged or raised safely."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
