"""Fixtures of the service tests: `adk api_server --a2a` and `adk web --a2a` serving adk_agents, real subprocesses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tau2_a2a.protocol.hosting import free_port
from tests.support.paths import REPO
from tests.support.waiting import wait_until

APP = "tau2_eval"


@contextmanager
def adk_serving(command: str, options: list[str], folder: Path, cwd: Path) -> Iterator[tuple[str, str]]:
    """`adk COMMAND --a2a --port P OPTIONS adk_agents` run in `cwd`, results in `folder`; (server URL, endpoint)."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {**os.environ, "TAU2_EVAL_RESULTS_DIR": str(folder), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "TAU2_EVAL_ALLOWED_TARGETS": "public,loopback"}
    adk = Path(sys.executable).parent / "adk"
    log_path = folder / f"adk_{command}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([str(adk), command, "--a2a", "--port", str(port), *options, "adk_agents"],
                                   cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    endpoint = f"{url}/a2a/{APP}"
    try:
        def card_answers() -> bool:
            assert process.poll() is None, log_path.read_text()[-3000:]
            try:
                return httpx.get(f"{endpoint}/.well-known/agent-card.json", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(card_answers, f"adk {command} to serve the card", 240, interval=0.5)
        yield url, endpoint
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`adk api_server --a2a --port P --session_service_uri memory:// adk_agents`, from the repository's root."""
    with adk_serving("api_server", ["--session_service_uri", "memory://"], tmp_path_factory.mktemp("adk_results"),
                     REPO) as (_, endpoint):
        yield endpoint


@pytest.fixture(scope="module")
def adk_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """`adk web --a2a --port P adk_agents`, as docs/service.md has it (sessions in adk_agents/tau2_eval/.adk/),
    in a copy of adk_agents, so that the checkout gets no session files; (server URL, A2A endpoint)."""
    folder = tmp_path_factory.mktemp("adk_web")
    shutil.copytree(REPO / "adk_agents", folder / "adk_agents", ignore=shutil.ignore_patterns(".adk", "__pycache__"))
    with adk_serving("web", [], folder / "results", folder) as served:
        yield served
