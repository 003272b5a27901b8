"""`tau2-a2a serve` killed in the middle of an evaluation, started again: nothing is lost.

The service runs as a real process (`tau2-a2a serve`) on its default embedded
database (a SQLite file in its results directory). It is SIGKILLed while an
evaluation of the oracle runs, then started again on the same port and
directory; the client goes on polling the same A2A task id.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState, a2a_pb2_grpc
from starlette.middleware import Middleware

from tau2_a2a.reference.oracle_agent import OracleExecutor
from tau2_a2a.service.evaluations import TOKEN_LOST
from tau2_a2a.service.request_limit import too_large_message
from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tests.agents import RequireBearer, agent_app
from tests.conftest import descendants, saved_simulations
from tests.service_support import ask, call_tool, result_data, wait_for_task

CLI = str(Path(sys.executable).parent / "tau2-a2a")
TASKS = [str(task) for task in range(6)]
TARGET_TOKEN = "restart-target-token-7d1c"


class Service:
    """A `tau2-a2a serve` process that can be killed and started again on the same port and directory."""

    def __init__(self, results_dir: Path, *extra: str) -> None:
        self.results_dir = results_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra = extra
        self.process: subprocess.Popen | None = None

    def start(self) -> Service:
        log = open(self.results_dir.parent / f"serve-{self.port}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [CLI, "serve", "--port", str(self.port), "--results-dir", str(self.results_dir),
             "--max-running", "2", "--allowed-targets", "public,loopback", *self.extra],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "TAU2_EVAL_LOG_LEVEL": "warning"})
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, (self.results_dir.parent / f"serve-{self.port}.log").read_text()
            try:
                if httpx.get(f"{self.url}/.well-known/agent-card.json", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the service did not start within 60 s"
            time.sleep(0.2)

    def kill(self) -> set[int]:
        """SIGKILL the service alone (not its children); the pids of the children it had."""
        assert self.process is not None
        children = descendants(self.process.pid)
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        return children

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Callable[..., Service]]:
    started: list[Service] = []

    def make(*extra: str) -> Service:
        service = Service(tmp_path / "results", *extra)
        started.append(service)
        return service

    yield make
    for service in started:
        service.stop()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.2)


def gone(pids: set[int]) -> bool:
    return not any(Path(f"/proc/{pid}").exists() for pid in pids)


def done_so_far(url: str, evaluation_id: str) -> int:
    record = asyncio.run(call_tool(url, "get_evaluation", {"evaluation_id": evaluation_id}))
    return (record.get("progress") or {}).get("simulations_done", 0)


def the_evaluation(url: str) -> str:
    """The id of the service's one evaluation (a return-immediately send answers before the agent
    has submitted it)."""
    def listed() -> list[dict[str, Any]]:
        return asyncio.run(call_tool(url, "list_evaluations"))["evaluations"]

    wait_until(lambda: len(listed()) >= 1, "the evaluation's submission", timeout=60)
    evaluations = listed()
    assert len(evaluations) == 1
    return evaluations[0]["evaluation_id"]


def evaluation_request(endpoint: str, **arguments: Any) -> dict[str, Any]:
    return {"domain": "airline", "agent_endpoint": endpoint, "user": "scripted_user", "user_llm": "scripted",
            "task_ids": TASKS, "max_concurrency": 2, **arguments}


def test_a_killed_service_resumes_its_evaluation_and_the_a2a_task_completes(
        serve: Callable[..., BackgroundServer], services: Callable[..., Service]) -> None:
    slow = serve(lambda url: agent_app(OracleExecutor(delay=0.4), url))
    service = services().start()
    task = asyncio.run(ask(service.url, "run_tau2_evaluation", evaluation_request(slow.url),
                           return_immediately=True))
    evaluation_id = the_evaluation(service.url)
    wait_until(lambda: done_so_far(service.url, evaluation_id) >= 2, "two simulations")

    children = service.kill()
    assert children, "the evaluation ran in a child process"
    wait_until(lambda: gone(children), "the evaluation's processes ending with their service", timeout=10)

    service.start()
    finished = asyncio.run(wait_for_task(service.url, task.id, timeout=300))
    assert finished.status.state == TaskState.TASK_STATE_COMPLETED
    data = result_data(finished)
    assert (data["evaluation_id"], data["status"], data["resumed"]) == (evaluation_id, "completed", 1)
    assert data["result"]["metrics"] == {"avg_reward": 1.0, "pass_hat_k": {"1": 1.0}, "num_simulations": 6,
                                         "avg_agent_cost": 0.0}
    assert [(t["task_id"], t["rewards"]) for t in data["result"]["tasks"]] == [(t, [1.0]) for t in TASKS]
    simulations = saved_simulations(service.results_dir / evaluation_id / "results.json")
    assert Counter((s["task_id"], s["trial"]) for s in simulations) == Counter((t, 0) for t in TASKS)
    assert all(s["reward_info"]["reward"] == 1.0 for s in simulations)
    # The same task id, continued: its progress updates went on after the restart, and one artifact ends it.
    assert len(finished.artifacts) == 1
    progress = [" ".join(p.text for p in m.parts) for m in finished.history]
    assert any("Progress: 5/6 simulations done" in text for text in progress)


def test_a_resumed_evaluation_whose_target_needs_a_token_ends_saying_so(
        serve: Callable[..., BackgroundServer], services: Callable[..., Service]) -> None:
    guarded = serve(lambda url: agent_app(OracleExecutor(delay=0.4), url,
                                          [Middleware(RequireBearer, token=TARGET_TOKEN)]))
    service = services().start()
    task = asyncio.run(ask(service.url, "run_tau2_evaluation",
                           evaluation_request(guarded.url, agent_auth_token=TARGET_TOKEN), return_immediately=True))
    evaluation_id = the_evaluation(service.url)
    wait_until(lambda: done_so_far(service.url, evaluation_id) >= 1, "a simulation")
    service.kill()
    service.start()
    finished = asyncio.run(wait_for_task(service.url, task.id, timeout=120))
    assert finished.status.state == TaskState.TASK_STATE_FAILED
    record = asyncio.run(call_tool(service.url, "get_evaluation", {"evaluation_id": evaluation_id}))
    assert (record["status"], record["error"]) == ("failed", TOKEN_LOST)
    kept = saved_simulations(service.results_dir / evaluation_id / "results.json")
    assert record["result"]["metrics"]["num_simulations"] == len(kept) >= 1  # finished simulations are kept
    database = (service.results_dir / "service.sqlite").read_bytes()
    assert TARGET_TOKEN.encode() not in database


def test_a_second_service_on_one_sqlite_file_is_refused(services: Callable[..., Service]) -> None:
    first = services().start()
    second = subprocess.run([CLI, "serve", "--port", str(free_port()), "--results-dir", str(first.results_dir)],
                            capture_output=True, text=True, timeout=60)
    assert second.returncode == 2
    assert second.stderr.strip().splitlines()[-1] == (
        f"error: Another tau2-a2a serve uses {first.results_dir / 'service.sqlite'} already. Give this one "
        "another --results-dir, or run replicas on one PostgreSQL database (--database postgresql://...).")
    assert "Traceback" not in second.stderr


def test_a_request_body_over_the_limit_is_refused(services: Callable[..., Service]) -> None:
    grpc_port = free_port()
    service = services("--max-request-bytes", "100000", "--grpc-port", str(grpc_port)).start()
    big = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "x" * 200_000}]}}}
    reply = httpx.post(service.url, json=big, headers={"A2A-Version": "1.0"}, timeout=30)
    assert reply.status_code == 413
    assert reply.json() == {"error": too_large_message(100000)}

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds on the bytes received
        yield b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"parts": [{"text": "'
        for _ in range(30):
            yield b"y" * 10_000
        yield b'"}]}}}'

    streamed = httpx.post(service.url, content=chunks(), headers={"Content-Type": "application/json"}, timeout=30)
    assert streamed.status_code == 413
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        message = Message(role=Role.ROLE_USER, message_id="m2", parts=[Part(text="z" * 200_000)])
        with pytest.raises(grpc.RpcError) as refused:
            stub.SendMessage(SendMessageRequest(message=message), timeout=30)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    small = asyncio.run(call_tool(service.url, "list_domains"))  # the service is unharmed
    assert {d["domain"] for d in small["domains"]} >= {"airline", "retail", "telecom"}
