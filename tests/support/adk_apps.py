"""ADK agents served for tests: an example app of examples/ under google-adk's own `adk api_server --a2a`, on a
free port, as a user serves it (the app copied into a folder of agents, its card's URL set to the port); and the
ADK reference agent on every binding, as `tau2-a2a agent adk --grpc-port` serves it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tau2_a2a.client.tracing import continue_traces
from tau2_a2a.protocol.hosting import BackgroundServer, free_port, wait_for_card
from tau2_a2a.reference.adk_agent import adk_app
from testbed.standin_llm import MODEL
from tests.support.paths import REPO

BINDINGS = {"jsonrpc": "JSONRPC", "http-json": "HTTP+JSON", "grpc": "GRPC"}  # --a2a-transport: the card's name
STANDIN_ARGS = {"api_key": "standin-key", "temperature": 0.0}


@contextmanager
def adk_agent_on_every_binding(api_base: str, **app_args: Any) -> Iterator[BackgroundServer]:
    """The ADK reference agent (google-adk's A2A executor) with the stand-in LLM at `api_base` as its model,
    serving JSON-RPC and HTTP+JSON at `server.url` and gRPC at `server.grpc_url`, continuing the trace each
    request carries on each (`app_args`: more of `adk_app`'s, e.g. `mcp_url`)."""
    port, grpc_port = free_port(), free_port()
    app = adk_app(MODEL, f"http://127.0.0.1:{port}", api_base, STANDIN_ARGS, grpc_url=f"127.0.0.1:{grpc_port}",
                  **app_args)
    with BackgroundServer(continue_traces(app), port=port, grpc_port=grpc_port) as server:
        yield server


@contextmanager
def adk_api_server(name: str, api_base: str, tmp_path: Path, **env: str) -> Iterator[str]:
    """examples/`name` served with the stand-in LLM at `api_base` as its model (and `env` beside); its A2A
    URL. ADK's log is `tmp_path/adk.log`."""
    port = free_port()
    app = tmp_path / "agents" / name
    shutil.copytree(REPO / "examples" / name, app, ignore=shutil.ignore_patterns("__pycache__"))
    card = app / "agent.json"
    card.write_text(card.read_text().replace("http://127.0.0.1:8000", f"http://127.0.0.1:{port}"))
    environment = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TAU2_ADK_MODEL": MODEL,
                   "TAU2_ADK_API_BASE": api_base, "OPENAI_API_KEY": "standin-key", **env}
    url = f"http://127.0.0.1:{port}/a2a/{name}"
    with (tmp_path / "adk.log").open("w") as log:
        server = subprocess.Popen(
            [str(Path(sys.executable).with_name("adk")), "api_server", "--a2a", "--port", str(port),
             "--session_service_uri", "memory://", str(app.parent)],
            env=environment, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
        )
        try:
            wait_for_card(url, server, timeout=120)
            yield url
        finally:
            server.terminate()
            server.wait(timeout=30)
