"""A2AConfig: how tau2-a2a reaches one A2A agent, decided once where a run is asked for.

The config goes, as one object, from the command line (or the service, or a
Python caller) to the run's A2A session. Its bearer token is held in memory
only: `as_record()`, what a results file and the settings' JSON keep of the
config, leaves it out, and `from_record()` takes it back beside the record.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard
from urllib.parse import urlparse, urlsplit

from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.errors import ConfigError

if TYPE_CHECKING:
    from a2a.types import AgentCard

__all__ = ["A2AConfig", "AgentLimits", "ConfigError", "McpServing", "RetryPolicy", "redact", "validate_endpoint",
           "check_limit", "check_timeout"]

AUTH_TOKEN_ENV = "TAU2_A2A_AUTH_TOKEN"
DEFAULT_TIMEOUT_SECONDS = 300.0
MAX_TIMEOUT_SECONDS = 86400.0  # a day per reply; longer ones overflow the clocks deadlines are kept on
# A tau2 turn is kilobytes; a reply is held several times over (bytes, JSON, protobuf, tau2's message)
# in each of up to --max-concurrency simulations, so one hostile agent's reply must not be unbounded.
DEFAULT_MAX_REPLY_BYTES = 8 << 20
# What one agent may drive its simulation to: every tool call it asks for runs here and its result goes back
# to it, so a flood of calls takes the run's memory and disk. The oracle's largest figures over every text
# domain of tau2-bench v1.0.1 are in README.md ("Limits"); these leave a wide margin above them.
DEFAULT_MAX_TOOL_CALLS_PER_REPLY = 128
DEFAULT_MAX_TOOL_CALLS = 1000  # per simulation
DEFAULT_MAX_REQUEST_BYTES = 16 << 20  # one request back to the agent
# What the agent may send in one simulation: MCP requests of every kind, and the bytes of its replies, messages
# and tool arguments (the trajectory keeps them). Set from bench/agent_limits.py's figures (docs/mcp-tools.md).
DEFAULT_MAX_MCP_REQUESTS = 4000
DEFAULT_MAX_AGENT_BYTES = 4 << 20
# The MCP tools server's connections (mcp/connection_guard.py; docs/mcp-tools.md, "Limits").
DEFAULT_MCP_MAX_CONNECTIONS = 256
DEFAULT_MCP_READ_TIMEOUT_SECONDS = 10.0

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
_MAX_CALLS_PER_REPLY = "a2a_max_tool_calls_per_reply"
_MAX_CALLS = "a2a_max_tool_calls"
_MAX_REQUEST = "a2a_max_request_bytes"
_MAX_MCP_REQUESTS = "a2a_max_mcp_requests"
_MAX_AGENT_BYTES = "a2a_max_agent_bytes"
# The limits a record leaves out at their defaults, so records of runs made before a limit existed match.
_LIMITS = ((_MAX_REPLY, "max_reply_bytes", DEFAULT_MAX_REPLY_BYTES, "--a2a-max-reply-bytes"),
           (_MAX_CALLS_PER_REPLY, "max_tool_calls_per_reply", DEFAULT_MAX_TOOL_CALLS_PER_REPLY,
            "--a2a-max-tool-calls-per-reply"),
           (_MAX_CALLS, "max_tool_calls", DEFAULT_MAX_TOOL_CALLS, "--a2a-max-tool-calls"),
           (_MAX_REQUEST, "max_request_bytes", DEFAULT_MAX_REQUEST_BYTES, "--a2a-max-request-bytes"),
           (_MAX_MCP_REQUESTS, "max_mcp_requests", DEFAULT_MAX_MCP_REQUESTS, "--a2a-max-mcp-requests"),
           (_MAX_AGENT_BYTES, "max_agent_bytes", DEFAULT_MAX_AGENT_BYTES, "--a2a-max-agent-bytes"))
MAX_LIMIT = 1 << 40  # beyond any real run: a bigger value is a mistake
_TARGETS = "a2a_allowed_targets"
_TOOLS = "a2a_tools"
_DRIVEN = "a2a_driven"
_MCP_HOST = "a2a_mcp_host"
_MCP_PORT = "a2a_mcp_port"
_MCP_PUBLIC_URL = "a2a_mcp_public_url"
_MCP_FIXED = "a2a_mcp_fixed"
_MCP_PUBLIC_HOST = "a2a_mcp_public_host"
_MCP_MAX_CONNECTIONS = "a2a_mcp_max_connections"
_MCP_READ_TIMEOUT = "a2a_mcp_read_timeout"
_MCP_TOKEN_ENV = "a2a_mcp_token_env"  # the variable's name; its value, the token, never travels
_PRICE_MODEL = "a2a_price_model"

# --a2a-transport choices: `auto` takes the card's first interface we speak.
TRANSPORTS = ("auto", "jsonrpc", "http-json", "grpc")
# --a2a-tools choices: how the agent gets the domain's tools (see mcp/invitation.py); `auto` asks the card.
TOOLS_MODES = ("message", "mcp", "auto")


@dataclass(frozen=True)
class McpServing:
    """Where the MCP tools server of a run listens, the URL agents are told, and the bounds on its connections.

    `fixed`: one URL for every simulation, with no per-simulation token, for agents whose MCP servers are
    configured beforehand; its calls belong to the one simulation in flight. Off loopback it needs `token_env`,
    the environment variable holding a bearer token the agent is configured with too (never on a command line).
    """

    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port
    public_url: str | None = None  # None: http://PUBLIC_HOST:PORT/mcp
    fixed: bool = False
    public_host: str | None = None  # the host name agents reach this machine by (None: HOST, or its address)
    max_connections: int = DEFAULT_MCP_MAX_CONNECTIONS  # open at once; see mcp/connection_guard.py
    read_timeout: float = DEFAULT_MCP_READ_TIMEOUT_SECONDS  # to send a request's headers and body
    token_env: str | None = None  # the variable holding the fixed URL's bearer token

    def __post_init__(self) -> None:
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ConfigError(f"--a2a-mcp-port must be a TCP port (0 for a free one), got {self.port!r}.")
        if self.public_url is not None:
            parsed = urlparse(self.public_url)
            if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.username or parsed.query:
                raise ConfigError("--a2a-mcp-public-url must be an http(s) URL without credentials or query, such "
                                  "as http://tau2:8931/mcp: the agent is told it in every first message.")
            if parsed.path in ("", "/"):
                object.__setattr__(self, "public_url", self.public_url.rstrip("/") + "/mcp")
        if self.fixed and not (self.port or self.public_url):
            raise ConfigError("--a2a-mcp-fixed serves the tools at one URL your agent is configured with "
                              "beforehand: pass --a2a-mcp-port PORT (and --a2a-mcp-public-url if the agent "
                              "reaches this machine by another name).")
        check_limit(self.max_connections, "--a2a-mcp-max-connections")
        check_timeout(self.read_timeout, "--a2a-mcp-read-timeout")
        if self.token_env is not None:
            if not self.fixed:
                raise ConfigError("--a2a-mcp-token-env is the fixed URL's token (--a2a-mcp-fixed); without "
                                  "--a2a-mcp-fixed each simulation has a token of its own.")
            self.fixed_token()
        elif self.fixed and not is_loopback(self.host):
            raise ConfigError(f"--a2a-mcp-fixed on --a2a-mcp-host {self.host} would serve the live simulation's "
                              "tools to anyone on the network, with no token: configure your agent with a bearer "
                              "token and pass --a2a-mcp-token-env NAME, NAME the environment variable holding it "
                              "(or listen on 127.0.0.1).")

    def fixed_token(self) -> str | None:
        """The fixed URL's bearer token, read from `token_env` (None without one); ConfigError when unset."""
        if self.token_env is None:
            return None
        token = os.environ.get(self.token_env, "").strip()
        if not token:
            raise ConfigError(f"--a2a-mcp-token-env {self.token_env}: the environment variable {self.token_env} is "
                              "unset or empty; set it to the bearer token your agent sends.")
        return token


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or name to listen on) is this machine's loopback only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class RetryPolicy:
    """Retries for transient failures: connection failures, 5xx and 429, and timeouts before any of the reply came
    (a reply cut once it had begun is not sent again: see `failures.timed_out_arriving`)."""

    max_attempts: int = 3
    backoff_seconds: float = 0.5
    max_backoff_seconds: float = 8.0

    def delay(self, attempt: int) -> float:
        """Exponential backoff before retry number `attempt` (1-based)."""
        return min(self.backoff_seconds * (2 ** (attempt - 1)), self.max_backoff_seconds)


# The authority of a URL up to its last "@" (lenient, as a client's URL parser may be): userinfo present.
_USERINFO = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.-]*):/*[^/?#]*@")


def has_userinfo(url: object) -> TypeGuard[str]:
    """Whether a URL carries a user name or password (`http://user:pw@host`)."""
    return isinstance(url, str) and _USERINFO.match(url) is not None


def without_userinfo(url: str) -> str:
    """The URL with its user name and password replaced by *** (still refused, no longer secret)."""
    found = _USERINFO.match(url)
    return url if found is None else f"{found.group(1)}://***@{url[found.end():]}"


def has_query_or_fragment(url: object) -> TypeGuard[str]:
    """Whether a URL carries a query string or a fragment (`?token=...`, `#...`), which a base URL has not."""
    return isinstance(url, str) and ("?" in url or "#" in url)


def origin(url: str) -> str:
    """scheme://host:port of `url`, all of it that may be shown of a URL refused for what else it carries."""
    try:
        parsed = urlsplit(url.strip())
        host, port = parsed.hostname, parsed.port
    except ValueError:
        return "(the URL)"
    if not parsed.scheme or not host:
        return "(the URL)"
    host = f"[{host}]" if ":" in host else host
    return f"{parsed.scheme}://{host}" + (f":{port}" if port else "")


def validate_endpoint(endpoint: str) -> str:
    """Return the endpoint without a trailing slash, or say what is wrong with it.

    A user name or password, a query string or a fragment is refused: the
    endpoint is printed and kept with the results, and the card is fetched from
    URL/.well-known/agent-card.json, so none of them could work. The refusal
    shows the URL's scheme, host and port only.
    """
    if has_userinfo(endpoint):
        raise ConfigError(
            f"--a2a-endpoint {origin(endpoint)} must not carry a user name or password (user:password@host): it "
            f"would be printed and kept with the results. Pass the agent's token with --a2a-auth-token or "
            f"{AUTH_TOKEN_ENV}.")
    if has_query_or_fragment(endpoint):
        raise ConfigError(
            f"--a2a-endpoint {origin(endpoint)}/... must not carry a query string or fragment: the agent card is "
            "fetched from URL/.well-known/agent-card.json, so pass the agent's base URL alone; a token goes in "
            f"--a2a-auth-token or {AUTH_TOKEN_ENV}.")
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
class AgentLimits:
    """What one agent under test may take of a run, as A2AConfig holds them: the time a reply may take, the
    bytes of a reply and of a request, the tool calls of a reply and of a simulation, the MCP requests and the
    bytes the agent sends in a simulation. The evaluation service's
    operator sets them for every evaluation it runs (`tau2-a2a serve --agent-*`); see `A2AConfig.limited`."""

    timeout: float = DEFAULT_TIMEOUT_SECONDS
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    max_tool_calls_per_reply: int = DEFAULT_MAX_TOOL_CALLS_PER_REPLY
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_mcp_requests: int = DEFAULT_MAX_MCP_REQUESTS
    max_agent_bytes: int = DEFAULT_MAX_AGENT_BYTES


def check_limit(value: int, flag: str) -> int:
    """A limit is a whole number, at least 1 (and below 2**40); say so otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ConfigError(f"{flag} must be a whole number from 1 to {MAX_LIMIT}, got {value!r}.")
    return value


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
    max_tool_calls_per_reply: int = DEFAULT_MAX_TOOL_CALLS_PER_REPLY
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS  # per simulation
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # one request back to the agent
    max_mcp_requests: int = DEFAULT_MAX_MCP_REQUESTS  # per simulation, of every kind
    max_agent_bytes: int = DEFAULT_MAX_AGENT_BYTES  # what the agent sends in a simulation
    targets: TargetPolicy | None = None  # None: any host but link-local and metadata addresses
    tools: str = "message"  # how the agent gets its tools: in messages, over MCP, or as its card asks (auto)
    driven: bool = False  # the agent drives the conversation: one A2A task, the user an MCP tool (implies MCP)
    mcp: McpServing = McpServing()
    # The LiteLLM model whose price applies to tokens the agent reports without a cost or a priced model.
    price_model: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "endpoint", validate_endpoint(self.endpoint))
        if self.tools not in TOOLS_MODES:
            raise ConfigError(f"--a2a-tools {self.tools!r} is not one of {', '.join(TOOLS_MODES)}.")
        if self.driven and self.tools == "message":
            raise ConfigError("--a2a-driven gives the agent its tools and the user over MCP: leave out "
                              "--a2a-tools message.")
        if self.transport not in TRANSPORTS:
            raise ConfigError(f"A2A transport {self.transport!r} is not one of {', '.join(TRANSPORTS)}.")
        check_timeout(self.timeout)
        if self.retry.max_attempts < 1:
            raise ConfigError("A2A max attempts must be at least 1.")
        for _, name, _, flag in _LIMITS:
            check_limit(getattr(self, name), flag)
        if self.price_model is not None:
            from tau2_a2a.client.pricing import check_price_model

            check_price_model(self.price_model)

    @classmethod
    def limited(cls, endpoint: str, limits: AgentLimits, **settings: Any) -> A2AConfig:
        """A config for `endpoint` whose limits are `limits` (the rest: `settings`, or the defaults)."""
        return cls(endpoint=endpoint, **asdict(limits), **settings)

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
        for key, name, default, _ in _LIMITS:  # the defaults leave earlier runs' records as they were
            if getattr(self, name) != default:
                record[key] = getattr(self, name)
        if self.targets is not None and self.targets.entries:
            record[_TARGETS] = list(self.targets.entries)
        if self.tools != "message" or self.driven:  # the defaults leave earlier runs' records as they were
            record[_TOOLS] = self.tools
            record[_DRIVEN] = self.driven
            record.update({_MCP_HOST: self.mcp.host, _MCP_PORT: self.mcp.port, _MCP_PUBLIC_URL: self.mcp.public_url,
                           _MCP_FIXED: self.mcp.fixed, _MCP_PUBLIC_HOST: self.mcp.public_host})
            bounds: tuple[tuple[str, object, object], ...] = (
                (_MCP_MAX_CONNECTIONS, self.mcp.max_connections, McpServing.max_connections),
                (_MCP_READ_TIMEOUT, self.mcp.read_timeout, McpServing.read_timeout),
                (_MCP_TOKEN_ENV, self.mcp.token_env, None))
            for key, value, unset in bounds:  # the defaults leave earlier runs' records as they were
                if value != unset:
                    record[key] = value
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
            **{name: int(record.get(key, default)) for key, name, default, _ in _LIMITS},
            targets=TargetPolicy.from_entries(record[_TARGETS]) if record.get(_TARGETS) else None,
            tools=str(record.get(_TOOLS, "message")),
            driven=bool(record.get(_DRIVEN, False)),
            mcp=McpServing(host=str(record.get(_MCP_HOST, McpServing.host)),
                           port=int(record.get(_MCP_PORT, McpServing.port)),
                           public_url=record.get(_MCP_PUBLIC_URL),
                           fixed=bool(record.get(_MCP_FIXED, False)),
                           public_host=record.get(_MCP_PUBLIC_HOST),
                           max_connections=int(record.get(_MCP_MAX_CONNECTIONS, McpServing.max_connections)),
                           read_timeout=float(record.get(_MCP_READ_TIMEOUT, McpServing.read_timeout)),
                           token_env=record.get(_MCP_TOKEN_ENV)),
            price_model=record.get(_PRICE_MODEL) or None,
        )

    @property
    def uses_mcp(self) -> bool:
        """Whether the agent may get its tools over MCP (`auto` decides from the card)."""
        return self.tools != "message" or self.driven


def redact(text: str, *secrets: str | None) -> str:
    """Replace every secret in `text` so it can be logged or raised safely."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]+")


def redact_bearer(text: str) -> str:
    """`text` without any bearer token in it (an agent may echo one; the MCP tools modes name each
    simulation's MCP token in its first message)."""
    return _BEARER.sub(r"\1***", text)


# Tools modes, once the card is read: tools in messages, over MCP, or over MCP with the agent driving.
MESSAGE, MCP, DRIVEN = "message", "mcp", "driven"


def tools_mode_of(config: A2AConfig, card: AgentCard) -> str:
    """How the agent of `card` gets its tools under `config`: MESSAGE, MCP or DRIVEN (`auto` asks the card)."""
    from tau2_a2a.protocol.cards import declares_mcp_tools

    if config.driven:
        return DRIVEN
    if config.tools == "mcp" or (config.tools == "auto" and declares_mcp_tools(card)):
        return MCP
    return MESSAGE

