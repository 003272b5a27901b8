"""`tau2-a2a serve` as an operator starts it: every setting from its TAU2_EVAL_* variable, then every flag over
those variables. Each service is a real process; what it runs with is read where an operator and a caller see
it: the lines it prints at start, its card, its answers (bearer token, body size limit) and the files it makes.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tau2_a2a.cli import main
from tau2_a2a.protocol.hosting import free_port
from tests.support.service import CLI, STARTUP_SECONDS, call_tool, served_card
from tests.support.waiting import wait_until

ENV_TOKEN, FLAG_TOKEN = "env-token-4d1c", "flag-token-9b27"


def environment(folder: Path) -> dict[str, str]:
    """Every TAU2_EVAL_* setting, each with a value of its own."""
    return {
        "TAU2_EVAL_RESULTS_DIR": str(folder / "env_results"),
        "TAU2_EVAL_MAX_RUNNING": "3", "TAU2_EVAL_MAX_QUEUED": "7", "TAU2_EVAL_MAX_SIMULATIONS": "11",
        "TAU2_EVAL_MAX_CONCURRENCY": "5",
        "TAU2_EVAL_ALLOWED_TARGETS": "loopback",
        "TAU2_EVAL_MODEL": "openai/env-model", "TAU2_EVAL_MODEL_API_BASE": "http://127.0.0.1:9/env-model/v1",
        "TAU2_EVAL_AUTH_TOKEN": ENV_TOKEN,
        "TAU2_EVAL_RAY_ADDRESS": "auto",
        "TAU2_EVAL_DATABASE": str(folder / "env.sqlite"),
        "TAU2_EVAL_REPLICA": "env-replica",
        "TAU2_EVAL_LEASE_SECONDS": "45",
        "TAU2_EVAL_MAX_REQUEST_BYTES": "5000",
        "TAU2_EVAL_EVALUATION_NICE": "4",
        "TAU2_EVAL_ALLOWED_USER_LLMS": "openai/env-user",
        "TAU2_EVAL_USER_LLM_API_BASE": "http://127.0.0.1:9/env-user/v1",
        "TAU2_EVAL_LOG_LEVEL": "warning",
        "TAU2_EVAL_MAX_MESSAGE_BYTES": "4000",
        "TAU2_EVAL_AGENT_TIMEOUT": "41", "TAU2_EVAL_AGENT_MAX_REPLY_BYTES": "42000",
        "TAU2_EVAL_AGENT_MAX_REQUEST_BYTES": "43000", "TAU2_EVAL_AGENT_MAX_TOOL_CALLS_PER_REPLY": "44",
        "TAU2_EVAL_AGENT_MAX_TOOL_CALLS": "45", "TAU2_EVAL_AGENT_MAX_MCP_REQUESTS": "46",
        "TAU2_EVAL_AGENT_MAX_AGENT_BYTES": "47000",
        "TAU2_EVAL_MCP_HOST": "0.0.0.0", "TAU2_EVAL_MCP_PUBLIC_HOST": "env-tau2",
        "TAU2_EVAL_MCP_MAX_CONNECTIONS": "48", "TAU2_EVAL_MCP_READ_TIMEOUT": "49",
    }


def flags(folder: Path, grpc_port: int) -> list[str]:
    """Every flag of `serve` but --write-card, each with a value other than its variable's."""
    return ["--host", "127.0.0.1", "--grpc-port", str(grpc_port),
            "--public-url", "http://tau2-eval.example:8443", "--public-grpc-url", "tau2-eval.example:8444",
            "--results-dir", str(folder / "flag_results"),
            "--max-running", "2", "--max-queued", "9", "--max-simulations", "13", "--max-concurrency", "6",
            "--allowed-targets", "public,loopback",
            "--model", "openai/flag-model", "--model-api-base", "http://127.0.0.1:9/flag-model/v1",
            "--auth-token", FLAG_TOKEN,
            "--ray", "local",
            "--database", str(folder / "flag.sqlite"),
            "--replica-id", "flag-replica",
            "--lease-seconds", "50",
            "--max-request-bytes", "8000",
            "--evaluation-nice", "6",
            "--allowed-user-llms", "openai/flag-user,openai/flag-user-2",
            "--user-llm-api-base", "http://127.0.0.1:9/flag-user/v1",
            "--max-message-bytes", "7000",
            "--agent-timeout", "51", "--agent-max-reply-bytes", "52000", "--agent-max-request-bytes", "53000",
            "--agent-max-tool-calls-per-reply", "54", "--agent-max-tool-calls", "55",
            "--agent-max-mcp-requests", "56", "--agent-max-agent-bytes", "57000",
            "--mcp-host", "127.0.0.1", "--mcp-public-host", "flag-tau2",
            "--mcp-max-connections", "58", "--mcp-read-timeout", "59"]


class Serving:
    """`tau2-a2a serve --port P ARGS` with `env`; its first lines, once its card answers."""

    def __init__(self, folder: Path, args: list[str], env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / f"serve-{self.port}.log"
        base = {k: v for k, v in os.environ.items() if not k.startswith("TAU2_EVAL_")}
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([CLI, "serve", "--port", str(self.port), *args], cwd=folder,
                                            env={**base, **env}, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        wait_until(self.serving, "the service to serve its card", STARTUP_SECONDS, interval=0.5)
        self.lines = self.log.read_text().splitlines()
        self.card = httpx.get(f"{self.url}/.well-known/agent-card.json").json()

    def serving(self) -> bool:
        assert self.process.poll() is None, self.log.read_text()[-3000:]
        return self.card_answers()

    def card_answers(self) -> bool:
        try:
            return httpx.get(f"{self.url}/.well-known/agent-card.json", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def post(self, body: bytes, token: str | None) -> int:
        headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
        headers |= {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.post(f"{self.url}/", content=body, headers=headers, timeout=60).status_code

    def list_domains(self, token: str) -> list[str]:
        data = asyncio.run(call_tool(self.url, "list_domains", token=token, card=served_card(self.url)))
        return [d["domain"] for d in data["domains"]]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Any]:
    started: list[Serving] = []

    def start(args: list[str], env: dict[str, str]) -> Serving:
        started.append(Serving(tmp_path, args, env))
        return started[-1]

    yield start
    for service in started:
        service.stop()


def run_schema(card: dict[str, Any]) -> dict[str, Any]:
    """The argument schema the card's run_tau2_evaluation skill publishes."""
    [run] = [skill for skill in card["skills"] if skill["id"] == "run_tau2_evaluation"]
    return json.loads(run["description"].split("Arguments (JSON Schema): ", 1)[1])["properties"]


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError:
        return False
    return True


def test_every_setting_comes_from_its_environment_variable(serving: Any, tmp_path: Path) -> None:
    folder = tmp_path.resolve()
    service = serving([], environment(folder))
    url = service.url
    assert service.lines == [
        f"tau2 evaluation service at {url} (card: {url}/.well-known/agent-card.json)",
        f"  bindings (A2A 1.0 and 0.3): JSON-RPC and HTTP+JSON at {url}",
        f"  results: {folder}/env_results   auth: bearer token   model: openai/env-model at "
        "http://127.0.0.1:9/env-model/v1",
        "  limits: 3 running, 7 queued, 11 simulations per request, max_concurrency 5, request bodies up to 5000 "
        "bytes   targets: loopback",
        "  each agent: 41 s per reply, 42000 bytes per reply, 43000 bytes per request, 44 tool calls per reply, "
        "45 per simulation, 46 MCP requests and 47000 bytes sent per simulation; messages to this service: 4000 bytes",
        "  user LLMs: openai/env-user (or scripted_user), at http://127.0.0.1:9/env-user/v1",
        "  simulations: on the Ray cluster at auto, 4 nice steps below the service; MCP tools at 0.0.0.0, reached as "
        "env-tau2, 48 connections at most, 49 s to send each request",
        f"  database: {folder}/env.sqlite   replica: env-replica   lease: 45 s",
    ]
    schema = run_schema(service.card)
    assert (schema["max_concurrency"]["maximum"], schema["num_trials"]["maximum"]) == (5, 11)
    assert schema["user_llm"]["enum"] == ["openai/env-user"]
    assert "bearer" in service.card["securitySchemes"]
    assert service.post(b"{}", token=None) == 401
    assert service.post(b" " * 6000, token=ENV_TOKEN) == 413
    assert "airline" in service.list_domains(ENV_TOKEN)
    assert (folder / "env.sqlite").is_file() and (folder / "env_results").is_dir()


def test_flags_override_the_environment(serving: Any, tmp_path: Path) -> None:
    folder = tmp_path.resolve()
    grpc_port = free_port()
    service = serving(flags(folder, grpc_port), environment(folder))
    public = "http://tau2-eval.example:8443"
    assert service.lines == [
        f"tau2 evaluation service at {public} (card: {public}/.well-known/agent-card.json)",
        f"  bindings (A2A 1.0 and 0.3): JSON-RPC and HTTP+JSON at {public}, gRPC at tau2-eval.example:8444",
        f"  results: {folder}/flag_results   auth: bearer token   model: openai/flag-model at "
        "http://127.0.0.1:9/flag-model/v1",
        "  limits: 2 running, 9 queued, 13 simulations per request, max_concurrency 6, request bodies up to 8000 "
        "bytes   targets: public,loopback",
        "  each agent: 51 s per reply, 52000 bytes per reply, 53000 bytes per request, 54 tool calls per reply, "
        "55 per simulation, 56 MCP requests and 57000 bytes sent per simulation; messages to this service: 7000 bytes",
        "  user LLMs: openai/flag-user, openai/flag-user-2 (or scripted_user), at http://127.0.0.1:9/flag-user/v1",
        "  simulations: on the Ray cluster at local, 6 nice steps below the service; MCP tools at 127.0.0.1, reached "
        "as flag-tau2, 58 connections at most, 59 s to send each request",
        f"  database: {folder}/flag.sqlite   replica: flag-replica   lease: 50 s",
    ]
    assert {(i["protocolBinding"], i["url"]) for i in service.card["supportedInterfaces"]} == {
        ("JSONRPC", public), ("HTTP+JSON", public), ("GRPC", "tau2-eval.example:8444")}
    schema = run_schema(service.card)
    assert (schema["max_concurrency"]["maximum"], schema["num_trials"]["maximum"]) == (6, 13)
    assert schema["user_llm"]["enum"] == ["openai/flag-user", "openai/flag-user-2"]
    assert listening(grpc_port)
    assert service.post(b"{}", token=ENV_TOKEN) == 401  # the flag's token replaced the variable's
    assert service.post(b" " * 6000, token=FLAG_TOKEN) != 413  # over the variable's limit, within the flag's
    assert service.post(b" " * 9000, token=FLAG_TOKEN) == 413
    assert "airline" in service.list_domains(FLAG_TOKEN)
    assert (folder / "flag.sqlite").is_file() and (folder / "flag_results").is_dir()
    assert not (folder / "env.sqlite").exists() and not (folder / "env_results").exists()


@pytest.mark.parametrize("env, args, line", [
    ({"TAU2_EVAL_MAX_RUNNING": "two"}, [], "error: TAU2_EVAL_MAX_RUNNING must be a whole number, got 'two'."),
    ({"TAU2_EVAL_LEASE_SECONDS": "0"}, [], "error: TAU2_EVAL_LEASE_SECONDS must be a positive number, got '0'."),
    ({"TAU2_EVAL_LEASE_SECONDS": "30"}, ["--lease-seconds", "0"],
     "error: --lease-seconds and --max-request-bytes must be positive."),
])
def test_a_bad_setting_stops_the_service_in_one_line(env: dict[str, str], args: list[str], line: str,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Through the command's entry point in this process: the settings are refused before anything starts."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", "--port", str(free_port()), *args]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [line] and captured.out == ""
