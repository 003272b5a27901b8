"""Fixtures of the service tests: `adk api_server --a2a` serving adk_agents, a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tau2_a2a.protocol.hosting import free_port
from tests.support.paths import REPO

APP = "tau2_eval"


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`adk api_server --a2a --port P --session_service_uri memory:// adk_agents`, a real subprocess."""
    results = tmp_path_factory.mktemp("adk_results")
    port = free_port()
    env = {**os.environ, "TAU2_EVAL_RESULTS_DIR": str(results), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "TAU2_EVAL_ALLOWED_TARGETS": "public,loopback"}
    adk = Path(sys.executable).parent / "adk"
    with open(results / "adk_server.log", "wb") as log:
        process = subprocess.Popen(
            [str(adk), "api_server", "--a2a", "--port", str(port), "--session_service_uri", "memory://",
             "adk_agents"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    endpoint = f"http://127.0.0.1:{port}/a2a/{APP}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, (results / "adk_server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "adk api_server did not serve the card in time"
            try:
                if httpx.get(f"{endpoint}/.well-known/agent-card.json", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
