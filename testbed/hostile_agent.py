"""A hostile A2A agent on loopback: what an agent under test may do to the run that evaluates it.

A real a2a-sdk agent (JSON-RPC and HTTP+JSON under uvicorn, gRPC on a real
grpc.aio server, each for A2A 1.0 and 0.3: protocol/hosting.py) that
misbehaves as `Hostility` says:

- `flood`: every reply asks for that many calls of a cheap read tool (the
  first tool it was sent that needs no argument), and never says anything;
- `stall`: it never answers a message (the connection stays open, silent);
- `fail_text`: it ends every task `failed` with that status message;
- `reply_text`: what it says instead of the usual "Done.";
- `name`, `description`: its card's (400 characters, escape sequences...);
- `error_body`: every A2A request (POST) is answered HTTP 400 with that body;
- `trickle`: the responses it dribbles a byte every `trickle_seconds`, status
  line and headers included: "card" (the card fetch), "reply" (SendMessage),
  or "all". A TCP relay in front of the agent does it, so the card's URL is
  the relay's;
- `drip_seconds`: every message gets a task that stays `working`, a status
  update every that many seconds, never ending: streamed, a reply that keeps
  arriving event by event; blocking, a silent one.
- in the MCP tools modes, on each message, with the official MCP client at
  the server the first message names: `mcp_lists` tools/list requests,
  `mcp_unknown_calls` calls of a tool the server lacks, and `mcp_big_calls`
  calls of the cheapest tool with an extra argument of `big_bytes` bytes;
  then it replies `reply_text`.

Run on its own, for measurements and by hand (prints its URL, serves until stopped):

    python -m testbed.hostile_agent --port 9400 --flood 10000
    python -m testbed.hostile_agent --port 9400 --trickle card --trickle-seconds 2
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from a2a.helpers import new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentSkill, Message, Role, TaskState
from mcp.shared.exceptions import MCPError
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from tau2_a2a.mcp.invitation import McpServer, read_mcp_invitation
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, agent_card, free_port
from tau2_a2a.protocol.messages import read_turn, tool_calls_reply
from tau2_a2a.protocol.toolcalls import ToolCallRequest
from tau2_a2a.reference.mcp_client import mcp_session

TRICKLED = ("card", "reply", "all")


@dataclass(frozen=True)
class Hostility:
    """How the agent misbehaves (see the module's docstring); the defaults make a harmless agent."""

    flood: int = 0
    stall: bool = False
    fail_text: str | None = None
    reply_text: str = "Done."
    name: str = "hostile agent"
    description: str = "An agent under test that misbehaves on purpose."
    error_body: str | None = None
    trickle: str | None = None
    trickle_seconds: float = 1.0
    drip_seconds: float = 0.0
    mcp_lists: int = 0
    mcp_unknown_calls: int = 0
    mcp_big_calls: int = 0
    big_bytes: int = 0


class HostileExecutor(AgentExecutor):
    """Answers every message as `hostility` says."""

    def __init__(self, hostility: Hostility) -> None:
        self.hostility = hostility
        self.flood_tool: dict[str, str] = {}  # context id -> the tool it floods
        self.mcp_servers: dict[str, McpServer] = {}  # context id -> the MCP server its first message named
        self.mcp_errors: list[str] = []  # what the MCP server answered its misbehaviour
        self.released = threading.Event()  # set when the agent stops: a stalled reply ends then
        self.messages = 0

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.messages += 1
        hostility = self.hostility
        context_id = context.context_id or ""
        if hostility.stall:
            while not self.released.is_set():
                await asyncio.sleep(0.1)
            return
        if hostility.fail_text is not None:
            task_id = context.task_id or ""
            await event_queue.enqueue_event(new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED))
            updater = TaskUpdater(event_queue, task_id, context_id)
            await updater.failed(updater.new_agent_message([new_text_part(hostility.fail_text)]))
            return
        if hostility.drip_seconds:
            await self._drip(context, event_queue)
            return
        parts = [new_text_part(hostility.reply_text)]
        invitation = read_mcp_invitation(context.message)
        if invitation is not None:
            self.mcp_servers[context_id] = invitation.server
        if context_id in self.mcp_servers:
            await self._misuse_mcp(self.mcp_servers[context_id])
        if hostility.flood:
            turn = read_turn(context.message)
            if turn.tools:
                self.flood_tool[context_id] = cheapest_tool(turn.tools)
            tool = self.flood_tool.get(context_id)
            if tool is not None:
                parts = tool_calls_reply([ToolCallRequest(name=tool, arguments={})] * hostility.flood)
        await event_queue.enqueue_event(Message(role=Role.ROLE_AGENT, message_id=str(uuid.uuid4()),
                                                context_id=context_id, parts=parts))

    async def _misuse_mcp(self, server: McpServer) -> None:
        """Spend the MCP budgets as `hostility` says; what the server answers is kept in `mcp_errors`."""
        hostility = self.hostility
        if not (hostility.mcp_lists or hostility.mcp_unknown_calls or hostility.mcp_big_calls):
            return
        try:
            async with mcp_session(server) as session:
                listed = (await session.list_tools()).tools
                for _ in range(hostility.mcp_lists):
                    await session.list_tools()
                for _ in range(hostility.mcp_unknown_calls):
                    await self._call(session, "no_such_tool", {})
                cheapest = cheapest_tool([{"name": t.name, "parameters": t.input_schema} for t in listed])
                for _ in range(hostility.mcp_big_calls):
                    await self._call(session, cheapest, {"note": "x" * hostility.big_bytes})
        except Exception as error:  # noqa: BLE001  (the server refused us: what we want to see)
            self.mcp_errors.append(f"{type(error).__name__}: {error}")

    async def _call(self, session: Any, name: str, arguments: dict[str, Any]) -> None:
        try:
            await session.call_tool(name, arguments)
        except MCPError as error:
            self.mcp_errors.append(error.error.message)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        pass

    async def _drip(self, context: RequestContext, event_queue: EventQueue) -> None:
        """A task left working, with a status update every `drip_seconds` until the agent stops."""
        task_id, context_id = context.task_id or "", context.context_id or ""
        await event_queue.enqueue_event(new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED))
        updater = TaskUpdater(event_queue, task_id, context_id)
        while not self.released.is_set():
            await updater.start_work(updater.new_agent_message([new_text_part("still working")]))
            await asyncio.sleep(self.hostility.drip_seconds)


def cheapest_tool(tools: list[dict[str, Any]]) -> str:
    """The first tool that needs no argument (a read: list_all_airports in airline), else the first."""
    for schema in tools:
        function = schema.get("function", schema)
        if not (function.get("parameters") or {}).get("required"):
            return function["name"]
    return tools[0].get("function", tools[0])["name"]


class _ErrorBody:
    """ASGI middleware: every POST answered HTTP 400 with `body` (as an agent's error page)."""

    def __init__(self, app: ASGIApp, body: str) -> None:
        self.app = app
        self.body = body.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 400,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(self.body)).encode())]})
        await send({"type": "http.response.body", "body": self.body})


class TricklingRelay:
    """A TCP relay in front of an HTTP server that dribbles chosen responses a byte at a time.

    Each request is read whole and sent to the server on a connection of its
    own, marked `Connection: close`; the server's whole response comes back
    to the client at once, or, when `trickled(head, body)` says so, a byte
    every `seconds`, status line and headers first. The client then sees the
    connection close (the response says so), so every request is decided alone.
    """

    def __init__(self, target_port: int, trickle: str, seconds: float, port: int | None = None) -> None:
        if trickle not in TRICKLED:
            raise ValueError(f"trickle must be one of {', '.join(TRICKLED)}, got {trickle!r}")
        self.target_port = target_port
        self.trickle = trickle
        self.seconds = seconds
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.trickled = 0  # responses dribbled so far
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"relay:{self.port}", daemon=True)

    def start(self) -> TricklingRelay:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(timeout=10)
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)

    async def _close(self) -> None:
        """Stop listening and end every relay in progress."""
        if self._server is not None:
            self._server.close()
        relays = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in relays:
            task.cancel()
        await asyncio.gather(*relays, return_exceptions=True)

    def trickles(self, head: bytes, body: bytes) -> bool:
        card = head.startswith(b"GET /.well-known/")
        reply = b"SendMessage" in body or b"message/send" in body or b"/message:send " in head.split(b"\r\n")[0]
        return self.trickle == "all" or (self.trickle == "card" and card) or (self.trickle == "reply" and reply)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            body = await reader.readexactly(length)
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
            upstream_writer.write(_closing(head) + body)
            await upstream_writer.drain()
            response = await upstream_reader.read()  # to the end: the server closes after it
            upstream_writer.close()
            if self.trickles(head, body):
                self.trickled += 1
                for index in range(len(response)):
                    if self._stopping.is_set():
                        break
                    writer.write(response[index:index + 1])
                    await writer.drain()
                    await asyncio.sleep(self.seconds)
            else:
                writer.write(response)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ValueError):
            pass  # the client went away: what it does about the trickle is the point
        finally:
            writer.close()


def _closing(head: bytes) -> bytes:
    """The request's head asking the server to close the connection after its response."""
    lines = [line for line in head[:-4].split(b"\r\n") if not line.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n"


class HostileAgent:
    """The hostile agent served on loopback: `url` (the relay's when it trickles), `grpc_url` with gRPC."""

    def __init__(self, hostility: Hostility, grpc: bool = False, port: int | None = None) -> None:
        self.hostility = hostility
        self.executor = HostileExecutor(hostility)
        public = port or free_port()  # the relay's when it trickles, else the agent's own
        agent_port = free_port() if hostility.trickle else public
        self.grpc_port = free_port() if grpc else None
        self.relay = (TricklingRelay(agent_port, hostility.trickle, hostility.trickle_seconds, port=public)
                      if hostility.trickle else None)
        self.url = f"http://127.0.0.1:{public}"
        self.grpc_url = f"127.0.0.1:{self.grpc_port}" if self.grpc_port else None
        card = agent_card(hostility.name, hostility.description, self.url, grpc_url=self.grpc_url, streaming=True,
                          skills=[AgentSkill(id="hostile", name="hostile", description="Misbehaves on purpose.",
                                             tags=["test"])])
        middleware = [Middleware(_ErrorBody, body=hostility.error_body)] if hostility.error_body is not None else []
        self.server = BackgroundServer(a2a_app(self.executor, card, middleware=middleware), port=agent_port,
                                       grpc_port=self.grpc_port)

    def start(self) -> HostileAgent:
        self.server.start()
        if self.relay is not None:
            self.relay.start()
        return self

    def stop(self) -> None:
        self.executor.released.set()
        if self.relay is not None:
            self.relay.stop()
        self.server.stop()

    def __enter__(self) -> HostileAgent:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=None, help="the relay's port when it trickles, else the agent's")
    parser.add_argument("--grpc", action="store_true", help="serve gRPC too")
    parser.add_argument("--flood", type=int, default=0, help="tool calls per reply")
    parser.add_argument("--stall", action="store_true", help="never answer a message")
    parser.add_argument("--fail-text", default=None, help="end every task failed with this status message")
    parser.add_argument("--name", default=Hostility.name, help="the card's name")
    parser.add_argument("--error-body", default=None, help="answer every POST with HTTP 400 and this body")
    parser.add_argument("--trickle", choices=TRICKLED, default=None, help="responses to dribble a byte at a time")
    parser.add_argument("--trickle-seconds", type=float, default=1.0)
    parser.add_argument("--drip-seconds", type=float, default=0.0, help="a working status update every so often")
    args = parser.parse_args()
    hostility = Hostility(flood=args.flood, stall=args.stall, fail_text=args.fail_text, name=args.name,
                          error_body=args.error_body, trickle=args.trickle, trickle_seconds=args.trickle_seconds,
                          drip_seconds=args.drip_seconds)
    with HostileAgent(hostility, grpc=args.grpc, port=args.port) as agent:
        print(agent.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
