"""`tau2-a2a serve` killed in the middle of an evaluation, started again: nothing is lost.

The service runs as a real process (`tau2-a2a serve`) on its default embedded
database (a SQLite file in its results directory). It is SIGKILLed while an
evaluation of the oracle runs, then started again on the same port and
directory; the client goes on polling the same A2A task id.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState, a2a_pb2_grpc
from starlette.middleware import Middleware

from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor
from tau2_a2a.service.jobs.directory import results_file
from tau2_a2a.service.jobs.scheduler import TOKEN_LOST
from tau2_a2a.service.request_limit import too_large_message
from tests.support.executors import agent_app
from tests.support.middleware import RequireBearer
from tests.support.processes import gone
from tests.support.runs import saved_simulations
from tests.support.service import STARTUP_SECONDS, Service, ask, call_tool, done_so_far, result_data, wait_for_task
from tests.support.waiting import wait_until

CLI = str(Path(sys.executable).parent / "tau2-a2a")
TASKS = [str(task) for task in range(6)]
TARGET_TOKEN = "restart-target-token-7d1c"


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
                                         "avg_agent_cost": None}
    assert [(t["task_id"], t["rewards"]) for t in data["result"]["tasks"]] == [(t, [1.0]) for t in TASKS]
    simulations = saved_simulations(results_file(service.results_dir / evaluation_id))
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
    kept = saved_simulations(results_file(service.results_dir / evaluation_id))
    assert record["result"]["metrics"]["num_simulations"] == len(kept) >= 1  # finished simulations are kept
    database = (service.results_dir / "service.sqlite").read_bytes()
    assert TARGET_TOKEN.encode() not in database


def test_a_second_service_on_one_sqlite_file_is_refused(services: Callable[..., Service]) -> None:
    first = services().start()
    second = subprocess.run([CLI, "serve", "--port", str(free_port()), "--results-dir", str(first.results_dir)],
                            capture_output=True, text=True, timeout=STARTUP_SECONDS)
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
