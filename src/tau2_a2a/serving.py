"""Serving an a2a-sdk agent: its card, its JSON-RPC app, uvicorn in the foreground or a thread."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette


def agent_card(
    name: str,
    description: str,
    url: str,
    skills: list[AgentSkill] | None = None,
    streaming: bool = False,
    version: str = "0.1.0",
) -> AgentCard:
    """An A2A 1.0 card with one JSON-RPC interface at `url`."""
    return AgentCard(
        name=name,
        description=description,
        version=version,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills or [],
    )


def a2a_app(executor: AgentExecutor, card: AgentCard, **starlette_args: Any) -> Starlette:
    """Card at /.well-known/agent-card.json, JSON-RPC (A2A 1.0 and 0.3) at /."""
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
    ]
    return Starlette(routes=routes, **starlette_args)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class BackgroundServer:
    """uvicorn serving an ASGI app in a daemon thread; for tests, demos and benchmarks."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.host = host
        self.port = port or free_port(host)
        config = uvicorn.Config(app, host=host, port=self.port, log_level="warning", lifespan="auto")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"uvicorn:{self.port}", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"server on {self.url} did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for_card(url: str, process: Any = None, timeout: float = 120.0) -> None:
    """Block until `url` serves its agent card; fail early if `process` (a Popen) exits."""
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
