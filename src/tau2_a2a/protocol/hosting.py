"""Serving an a2a-sdk agent over every A2A binding, for protocol 1.0 and 0.3.

One Starlette app serves the card, JSON-RPC and HTTP+JSON on the HTTP port;
a grpc.aio server on its own port shares the app's request handler, in the
same event loop, so a task started over one binding can be read or canceled
over another. The app records that handler in `app.state.a2a_handler`, and
the gRPC interceptors and options it needs (the service's bearer check, its
request size limit) in `app.state.grpc_interceptors` and `grpc_options`.

Where a2a-sdk's handlers fall short of A2A 1.0, tau2_a2a.protocol.conformance corrects
them: its middleware wraps the HTTP routes (a2a_app adds it; the service adds
`conformance_middleware()` innermost), and `grpc_server` gives both gRPC
servicers its version-checking context builder.

    port, grpc_port = free_port(), free_port()
    card = agent_card(name, description, f"http://127.0.0.1:{port}", grpc_url=f"127.0.0.1:{grpc_port}")
    with BackgroundServer(a2a_app(executor, card), port=port, grpc_port=grpc_port) as server:
        server.url, server.grpc_url
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler, RequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCard
from starlette.applications import Starlette
from starlette.routing import BaseRoute
from starlette.types import ASGIApp

from tau2_a2a.protocol.cards import CARD_PATHS, agent_card
from tau2_a2a.protocol.conformance import CARD_CACHE_CONTROL, conformance_middleware, grpc_context_builder

if TYPE_CHECKING:
    import subprocess

    import grpc.aio

__all__ = [
    "BackgroundServer",
    "a2a_app",
    "a2a_routes",
    "conformance_middleware",
    "agent_card",
    "free_port",
    "grpc_server",
    "serve_forever",
    "wait_for_card",
]

GRPC_GRACE_SECONDS = 2.0


def a2a_routes(handler: RequestHandler, card: AgentCard) -> list[BaseRoute]:
    """The card (both well-known paths, with Cache-Control), JSON-RPC at / and HTTP+JSON below /, each with
    0.3 compatibility. Serve them inside `conformance_middleware()`."""
    return [
        *(route for path in CARD_PATHS
          for route in create_agent_card_routes(card, card_url=path, cache_control=CARD_CACHE_CONTROL)),
        *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
        *create_rest_routes(handler, enable_v0_3_compat=True),  # last: it mounts a catch-all /{tenant}
    ]


def a2a_app(executor: AgentExecutor, card: AgentCard, **starlette_args: Any) -> Starlette:
    """A Starlette app serving `executor` at the URLs `card` declares (gRPC: see `grpc_server`)."""
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    middleware = [*starlette_args.pop("middleware", ()), *conformance_middleware()]
    app = Starlette(routes=a2a_routes(handler, card), middleware=middleware, **starlette_args)
    app.state.a2a_handler = handler
    return app


def grpc_server(app: ASGIApp, address: str) -> grpc.aio.Server:
    """A grpc.aio server on `address` (host:port), A2A 1.0 and 0.3, sharing `app`'s request handler.

    Create and start it inside the event loop that serves `app`.
    """
    import grpc
    from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
    from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
    from a2a.server.request_handlers import GrpcHandler
    from a2a.types import a2a_pb2_grpc

    state = getattr(app, "state", None)
    handler = getattr(state, "a2a_handler", None)
    if handler is None:
        raise ValueError("gRPC needs an app made by tau2_a2a.protocol.hosting.a2a_app or the service's build_app.")
    server = grpc.aio.server(interceptors=list(getattr(state, "grpc_interceptors", ())),
                             options=list(getattr(state, "grpc_options", ())))
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(
        GrpcHandler(handler, context_builder=grpc_context_builder("1.0")), server)
    a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(
        CompatGrpcHandler(handler, context_builder=grpc_context_builder("0.3")), server)
    server.add_insecure_port(address)
    return server


async def _serve(server: uvicorn.Server, app: ASGIApp, grpc_address: str | None) -> None:
    """uvicorn and, when asked, the gRPC server beside it in the same event loop."""
    grpc = grpc_server(app, grpc_address) if grpc_address else None
    if grpc is not None:
        await grpc.start()
    try:
        await server.serve()
    finally:
        if grpc is not None:
            await grpc.stop(GRPC_GRACE_SECONDS)


def _uvicorn(app: ASGIApp, host: str, port: int, log_level: str, graceful_seconds: int | None = None,
             http: type[asyncio.Protocol] | str = "auto", backlog: int = 2048) -> uvicorn.Server:
    # The plain asyncio loop: grpc.aio shares it.
    return uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="auto",
                                         loop="asyncio", timeout_graceful_shutdown=graceful_seconds, http=http,
                                         backlog=backlog))


def serve_forever(app: ASGIApp, host: str, port: int, grpc_port: int | None = None,
                  log_level: str = "warning") -> None:
    """Serve `app` on host:port (and gRPC on host:grpc_port) until interrupted (Ctrl-C, SIGTERM)."""
    grpc_address = f"{host}:{grpc_port}" if grpc_port else None
    try:
        asyncio.run(_serve(_uvicorn(app, host, port, log_level), app, grpc_address))
    except KeyboardInterrupt:
        pass  # uvicorn hands Ctrl-C back once it has shut down


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class BackgroundServer:
    """An ASGI app (and, with `grpc_port`, its gRPC server) in a daemon thread; for tests, demos, benchmarks."""

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int | None = None,
                 grpc_port: int | None = None, http: type[asyncio.Protocol] | str = "auto",
                 backlog: int = 2048) -> None:
        """`http`: uvicorn's HTTP protocol (a class of its own bounds, as the MCP tools server's); `backlog`: the
        listen queue, which is also how many connections asyncio accepts at once."""
        self.host = host
        self.port = port or free_port(host)
        self.grpc_port = grpc_port
        self.app = app
        # Stopping ends requests still being answered after a moment (an agent under test may never answer).
        self._server = _uvicorn(app, host, self.port, "warning", graceful_seconds=2, http=http, backlog=backlog)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"uvicorn:{self.port}", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def grpc_url(self) -> str | None:
        """host:port of the gRPC server, as cards declare it; None without gRPC."""
        return f"{self.host}:{self.grpc_port}" if self.grpc_port else None

    def _run(self) -> None:
        try:
            asyncio.run(_serve(self._server, self.app, self.grpc_url))
        except BaseException as error:  # noqa: BLE001  (reported by start(); uvicorn exits on a taken port)
            self._error = error

    def start(self, timeout: float = 30.0) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                reason = f": {self._error!r}" if self._error else ""
                raise RuntimeError(f"server on {self.url} did not start{reason}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for_card(url: str, process: subprocess.Popen[bytes] | subprocess.Popen[str] | None = None,
                  timeout: float = 120.0) -> None:
    """Block until `url` serves its agent card; fail early if `process` exits."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/.well-known/agent-card.json", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server for {url} exited with code {process.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no agent card at {url} after {timeout:g} s")
        time.sleep(0.2)
