"""The domain's tools as an MCP server (Streamable HTTP) for the agent under test: one per run, per process.

Each simulation in an MCP tools mode opens its tools here under a bearer token
of its own (`open`): a request with that token lists and calls that
simulation's tools, and no other. A `tools/call` becomes an action of the
simulation (`agent_actions`), which tau2's orchestrator runs in the
simulation's environment, exactly once; its result (tau2's text, errors as
`isError`) is the MCP response. With `fixed` serving there is no token: the
agent's MCP client was configured beforehand with the one URL, and calls there
belong to the one simulation in flight (a run in that mode runs one
simulation at a time).

The server is the official `mcp` SDK's, stateless and answering in JSON:
each request stands alone, so no session outlives its simulation. Every
request is metered like an A2A request (latency, bytes, status) into the
simulation's records. A request the server cannot take (no or an unknown
token, a finished simulation, a tool the domain lacks, a malformed or
oversized body) gets an HTTP or MCP error, never a traceback; an MCP error's
message is kept on the request's record, and a call of a tool the
simulation lacks is counted there (`unknown_tool_calls`), whatever protocol
version the client speaks.

Bounds: each simulation's MCP requests and the bytes they carry are spent
from its budget (client/limits.py), and the server's connections are capped
and must send their requests promptly (mcp/connection_guard.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tau2_a2a.client import tracing
from tau2_a2a.client.config import McpServing
from tau2_a2a.client.errors import AgentMalformedReply
from tau2_a2a.client.limits import SimulationBudget
from tau2_a2a.client.records import RequestRecord
from tau2_a2a.mcp.agent_actions import ActionQueue, FailureAction, ToolCallAction, UserMessageAction
from tau2_a2a.mcp.connection_guard import ConnectionGuard, effective_cap
from tau2_a2a.mcp.invitation import SEND_TO_USER, SEND_TO_USER_DESCRIPTION, McpServer
from tau2_a2a.protocol.hosting import BackgroundServer

if TYPE_CHECKING:
    from opentelemetry.context import Context

    from tau2_a2a.client.config import A2AConfig
    from tau2_a2a.client.session import A2ASession

log = logging.getLogger("tau2_a2a.mcp")

MCP_PATH = "/mcp"
MAX_REQUEST_BYTES = 1 << 20  # a tool call is a name and a few arguments; tau2's largest is well under 64 KiB
MCP_BINDING = "MCP"
# In a request's ASGI scope, set by the MCP handlers for its record: the MCP error it was answered, and whether it
# called a tool the simulation lacks.
MCP_ERROR_KEY = "tau2_mcp_error"
UNKNOWN_TOOL_KEY = "tau2_unknown_tool"
_SEND_TO_USER_TOOL = types.Tool(
    name=SEND_TO_USER,
    description=SEND_TO_USER_DESCRIPTION,
    input_schema={"type": "object", "properties": {"message": {"type": "string",
                                                               "description": "What to say to the customer"}},
                  "required": ["message"]},
)


@dataclass
class SimulationTools:
    """One simulation's side of the server: its tools, where its calls go, and the records of its requests."""

    tools: list[types.Tool]
    actions: ActionQueue
    driven: bool
    budget: SimulationBudget | None = None  # None: unbounded (a server tried alone)
    records: list[RequestRecord] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    waiting: bool = False  # a message of tau2's waits for the agent's reply: the time for its tool calls
    # with tracing on, the simulation's turn that sent the request the agent acts on
    trace_context: Context | None = None

    def names(self) -> set[str]:
        return {tool.name for tool in self.tools}

    def take_records(self) -> list[RequestRecord]:
        with self.lock:
            taken, self.records = self.records, []
        return taken


class _Refused(Exception):
    """A request the server refuses before MCP sees it: its HTTP status and what to say."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ToolServer:
    """The run's MCP server in this process; started on first use, closed with the run's session."""

    def __init__(self, serving: McpServing) -> None:
        self.serving = serving
        self._simulations: dict[str, SimulationTools] = {}  # by token ("" for the fixed URL's one simulation)
        self._lock = threading.Lock()
        self._server: BackgroundServer | None = None
        self.url = ""
        self.fixed_token = serving.fixed_token()  # the fixed URL's bearer token, when the operator set one
        self.guard = ConnectionGuard(effective_cap(serving.max_connections), serving.read_timeout)

    def start(self) -> ToolServer:
        """Listen on the configured host and port (a free one by default)."""
        mcp = Server("tau2", version="1", on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        inner = mcp.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
                                        max_request_body_size=MAX_REQUEST_BYTES,
                                        transport_security=self._security())
        self._server = BackgroundServer(_Gate(inner, self), host=self.serving.host, port=self.serving.port or None,
                                        http=self.guard.protocol(), backlog=self.guard.max_connections).start()
        host = self.serving.public_host or advertised_host(self.serving.host)
        self.url = self.serving.public_url or f"http://{_url_host(host)}:{self._server.port}{MCP_PATH}"
        log.info("MCP tools server on %s:%d, told to agents as %s", self.serving.host, self._server.port, self.url)
        return self

    def _security(self) -> TransportSecuritySettings:
        """DNS-rebinding protection: the Host header must name this server as the agent is told it, or loopback."""
        public = urlsplit(self.serving.public_url) if self.serving.public_url else None
        hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
        if public is not None and public.hostname:
            hosts.append(f"{_url_host(public.hostname)}:{public.port}" if public.port else _url_host(public.hostname))
        elif self.serving.public_host:
            hosts.append(f"{_url_host(self.serving.public_host)}:*")
        elif self.serving.host not in ("127.0.0.1", "localhost", "::1"):
            hosts.append("*")  # every address of this machine: the token is the check
        if "*" in hosts:
            return TransportSecuritySettings(enable_dns_rebinding_protection=False)
        return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                         allowed_origins=[f"http://{h}" for h in hosts])

    def open(self, tools: list[dict[str, Any]], actions: ActionQueue, driven: bool,
             budget: SimulationBudget | None = None) -> McpServer:
        """Serve one simulation's tools (OpenAI-style schemas, as tau2 gives them), spending what its agent sends
        from `budget`; what the agent is told."""
        listed = [_mcp_tool(schema) for schema in tools] + ([_SEND_TO_USER_TOOL] if driven else [])
        simulation = SimulationTools(listed, actions, driven, budget)
        with self._lock:
            if self.serving.fixed:
                if "" in self._simulations:
                    raise RuntimeError("the fixed MCP URL serves one simulation at a time")
                token = ""
            else:
                token = secrets.token_urlsafe(24)
            self._simulations[token] = simulation
        return McpServer(self.url, token or None)

    def simulation(self, server: McpServer) -> SimulationTools:
        return self._simulations[server.token or ""]

    def close_simulation(self, server: McpServer) -> None:
        """Stop serving a simulation's tools: its token opens nothing from now on."""
        with self._lock:
            self._simulations.pop(server.token or "", None)

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
            refused = self.guard.summary()
            if refused:
                log.warning("%s", refused)

    # -- the MCP handlers (on the server's event loop) -------------------------------

    def _find(self, request: Request | None, calling: bool = True) -> SimulationTools:
        """The request's simulation (see _Gate); a call once it is over is refused, a listing is still answered
        (MCP clients list the tools again to check the result of the call that was answered last)."""
        simulation = request.scope.get("tau2_simulation") if request is not None else None
        if simulation is None or (calling and simulation.actions.closed):
            raise _mcp_error(types.INVALID_REQUEST, "This conversation is over: its tools are closed.", request)
        if calling and simulation.budget is not None and simulation.budget.over is not None:
            raise _mcp_error(types.INVALID_REQUEST, f"Over a limit of this conversation: {simulation.budget.over}",
                             request)
        return simulation

    async def _list_tools(self, ctx: ServerRequestContext[object, Request],
                          params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self._find(ctx.request, calling=False).tools)

    async def _call_tool(self, ctx: ServerRequestContext[object, Request],
                         params: types.CallToolRequestParams) -> types.CallToolResult:
        request = ctx.request
        simulation = self._find(request)
        if params.name not in simulation.names():
            if request is not None:
                request.scope[UNKNOWN_TOOL_KEY] = True
            raise _mcp_error(types.INVALID_PARAMS, f"Unknown tool {params.name[:100]!r}: this server offers "
                                                   f"{', '.join(sorted(simulation.names()))}.", request)
        arguments = dict(params.arguments or {})
        size = len(json.dumps(arguments, default=str))
        if params.name == SEND_TO_USER and simulation.driven:
            message = arguments.get("message")
            if not isinstance(message, str):
                raise _mcp_error(types.INVALID_PARAMS, f"{SEND_TO_USER} takes one argument, message: a string.",
                                 request)
            said = UserMessageAction(message, request_bytes=size)
            if not simulation.actions.post(said):
                raise _mcp_error(types.INVALID_REQUEST, "This conversation is over.", request)
            reply = await asyncio.wrap_future(said.reply)
            return types.CallToolResult(content=[types.TextContent(type="text", text=reply)], is_error=False)
        if not simulation.waiting and not simulation.driven:
            late = AgentMalformedReply(
                f"the agent called the tool {params.name[:100]} after it had replied: in the MCP tools mode it calls "
                "tools while tau2's message waits for its reply, then replies (docs/protocol.md)")
            simulation.actions.post(FailureAction(late))
            raise _mcp_error(types.INVALID_REQUEST, "No message of tau2's waits for your reply: call tools while "
                                                    "one does, before you reply.", request)
        call = ToolCallAction(params.name, arguments, request_bytes=size)
        if not simulation.actions.post(call):
            raise _mcp_error(types.INVALID_REQUEST, "This conversation is over: its tools are closed.", request)
        outcome = await asyncio.wrap_future(call.outcome)
        return types.CallToolResult(content=[types.TextContent(type="text", text=outcome.content)],
                                    is_error=outcome.error)


class _Gate:
    """In front of the MCP app: the bearer token names the simulation (or the fixed URL's one in flight), and
    every request is metered into that simulation's records."""

    def __init__(self, inner: ASGIApp, server: ToolServer) -> None:
        self._inner = inner
        self._server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # the server's loop: accept errors are counted, and logged once
            asyncio.get_running_loop().set_exception_handler(self._server.guard.loop_exception_handler)
        if scope["type"] != "http":
            await self._inner(scope, receive, send)
            return
        started = time.perf_counter()
        try:
            simulation = self._simulation(scope)
            spend = _spending(simulation)
        except _Refused as refused:
            await _plain_error(send, refused.status, str(refused))
            return
        scope["tau2_simulation"] = simulation
        metered = _Meter(receive, send, spend)
        try:
            with tracing.within(_trace_parent(scope, simulation)):
                await self._inner(scope, metered.receive, metered.send)
        finally:
            simulation.records.append(metered.record(scope, started, self._server.url))

    def _simulation(self, scope: Scope) -> SimulationTools:
        headers = dict(scope.get("headers") or [])
        bearer = headers.get(b"authorization", b"").decode("latin-1")
        token = bearer[len("Bearer "):].strip() if bearer.startswith("Bearer ") else ""
        simulations = self._server._simulations
        if self._server.serving.fixed:
            expected = self._server.fixed_token
            if expected is not None and not secrets.compare_digest(token.encode(), expected.encode()):
                raise _Refused(401, "Send the bearer token this server was started with (Authorization: Bearer "
                                    "TOKEN), as your MCP client was configured.")
            found = simulations.get("")
            if found is None:
                raise _Refused(409, "No conversation is in progress: the fixed MCP URL serves the tools of the "
                                    "conversation tau2 is having with you, while it lasts.")
            return found
        if not token:
            raise _Refused(401, "Send the bearer token the conversation's first message names "
                                "(Authorization: Bearer TOKEN).")
        found = simulations.get(token)
        if found is None:
            raise _Refused(401, "This token opens no tools: its conversation is over, or it was never given.")
        return found


def _spending(simulation: SimulationTools) -> Callable[[int], None]:
    """Spend one MCP request from the simulation's budget (refused, unkept, once it is spent); what spends the
    request's body bytes as they arrive. Going past a budget ends the simulation."""
    budget = simulation.budget
    if budget is None:
        return lambda size: None
    if budget.over is not None:
        raise _Refused(429, f"Over a limit of this conversation: {budget.over}")
    over = budget.spend_request()
    if over is not None:
        simulation.actions.post(FailureAction(over))
        raise _Refused(429, f"Over a limit of this conversation: {over}")

    def spend(size: int) -> None:
        over = budget.spend_bytes(size, "MCP requests")
        if over is not None:
            simulation.actions.post(FailureAction(over))

    return spend


class _Meter:
    """Counts one HTTP exchange's bytes (spending those of the request with `spend`) and keeps its status and the
    JSON-RPC method it carried."""

    def __init__(self, receive: Receive, send: Send, spend: Callable[[int], None]) -> None:
        self._receive = receive
        self._send = send
        self._spend = spend
        self.request_bytes = 0
        self.response_bytes = 0
        self.status: int | None = None
        self.body_start = b""
        self.error: str | None = None

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request":
            body = message.get("body", b"")
            self.request_bytes += len(body)
            self._spend(len(body))
            if len(self.body_start) < 512:
                self.body_start += body[:512]
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            self.response_bytes += len(body)
            if b'"isError":true' in body or b'"error":' in body[:200]:
                self.error = "mcp_error"
        await self._send(message)

    def record(self, scope: Scope, started: float, url: str) -> RequestRecord:
        method = _method(self.body_start) or scope.get("method", "")
        refused = scope.get(MCP_ERROR_KEY)  # a handler of ours answered an MCP error: HTTP 200 or 4xx by version
        failed = self.status is None or self.status >= 400
        return RequestRecord(turn=None, attempt=1, method=method, endpoint=url,
                             protocol_version=_header(scope, b"mcp-protocol-version"), context_id=None,
                             http_status=self.status, latency_ms=round((time.perf_counter() - started) * 1000, 3),
                             request_bytes=self.request_bytes, response_bytes=self.response_bytes,
                             input_tokens=0, output_tokens=0, transport=MCP_BINDING, events=1,
                             error="mcp_error" if refused else "http" if failed else self.error,
                             error_message=refused, unknown_tool_calls=1 if scope.get(UNKNOWN_TOOL_KEY) else 0)


def _trace_parent(scope: Scope, simulation: SimulationTools) -> Context | None:
    """With tracing on, the trace an MCP request continues: the agent's, when its headers carry one, else the
    simulation's turn. (The `mcp` SDK's server span then follows a `traceparent` in the request's `_meta`,
    where MCP clients such as ADK's McpToolset put the agent's tool call.)"""
    if not tracing.enabled():
        return None
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope.get("headers") or []
               if name in (b"traceparent", b"tracestate")}
    return tracing.context_from(headers) or simulation.trace_context


def _method(body_start: bytes) -> str | None:
    """The JSON-RPC method of a request body ("tools/call"), from its start."""
    marker = body_start.find(b'"method"')
    if marker < 0:
        return None
    rest = body_start[marker + 8:].lstrip(b" :")
    if not rest.startswith(b'"'):
        return None
    end = rest.find(b'"', 1)
    return rest[1:end].decode("utf-8", "replace")[:64] if end > 0 else None


def _header(scope: Scope, name: bytes) -> str:
    return dict(scope.get("headers") or []).get(name, b"").decode("latin-1")[:32]


async def _plain_error(send: Send, status: int, message: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": types.INVALID_REQUEST, "message": message}})
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body.encode()})


def _mcp_error(code: int, message: str, request: Request | None = None) -> Exception:
    """The MCP error to raise; its message is kept on the request's record."""
    from mcp.shared.exceptions import MCPError

    if request is not None:
        request.scope[MCP_ERROR_KEY] = message[:500]
    return MCPError(code, message)


def _mcp_tool(schema: dict[str, Any]) -> types.Tool:
    """An OpenAI function schema (tau2's `openai_schema`) as an MCP tool."""
    function = schema.get("function", schema)
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    return types.Tool(name=function["name"], description=function.get("description") or "",
                      input_schema=parameters)


def advertised_host(host: str) -> str:
    """The host an agent elsewhere reaches this machine by: `host` itself, unless it means every address."""
    if host not in ("0.0.0.0", "::", ""):
        return host
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))  # no packet is sent: this only picks the outward interface
            return probe.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def tool_server_of(session: A2ASession) -> ToolServer:
    """The run's MCP tools server in this process: started at its first use, closed with the session."""
    return session.companion(_start)


def _start(config: A2AConfig) -> ToolServer:
    return ToolServer(config.mcp).start()
