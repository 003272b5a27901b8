"""Two `tau2-a2a serve` replicas on one real PostgreSQL database share the work and stand in for each other.

The replicas are real processes with a shared results directory, each with its
own port and replica id. Where a take-over is what the test is about, the lease
is short (3 s), so that it is quick; elsewhere it is long (60 s), so that a
replica slowed down by a busy machine is never taken for dead.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventQueue
from a2a.types import TaskState

from tau2_a2a.protocol.hosting import BackgroundServer
from tau2_a2a.reference.oracle_agent import OracleExecutor
from tau2_a2a.service.jobs.directory import results_file
from tests.support.executors import OracleLike, Seen, agent_app
from tests.support.processes import gone
from tests.support.runs import saved_simulations
from tests.support.service import STARTUP_SECONDS, Service, ask, call_tool, done_so_far, result_data, wait_for_task
from tests.support.waiting import wait_until

SHORT_LEASE = "3"
LONG_LEASE = "60"


@pytest.fixture
def replicas(postgres: Any, tmp_path: Path) -> Iterator[Callable[[str], Service]]:
    """Replicas of one service: one fresh database, one results directory."""
    database = postgres.create_database(f"replicas_{uuid.uuid4().hex[:8]}")
    started: list[Service] = []

    def make(name: str, *extra: str, lease: str = LONG_LEASE) -> Service:
        # Evaluations at the service's own priority: niced, they would start slowly behind a busy machine's
        # other work, and their priority is not what these tests are about.
        service = Service(tmp_path / "results", "--database", database, "--replica-id", name,
                          "--lease-seconds", lease, "--max-running", "1", "--evaluation-nice", "0", *extra)
        started.append(service)
        return service.start()

    yield make
    for service in started:
        service.stop()


@pytest.fixture
def slow_oracle(serve: Callable[..., BackgroundServer]) -> str:
    return serve(lambda url: agent_app(OracleExecutor(delay=0.3), url)).url


class HoldsAllBut(OracleLike):
    """The oracle, answering the tasks in `prompt` at once and the others only once released: an evaluation
    has a finished simulation, and is still running, for as long as a test needs (a held reply is within its
    300 s A2A timeout), however slowly a busy machine starts the other replica."""

    def __init__(self, prompt: set[str]) -> None:
        super().__init__()
        self.prompt = prompt
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        while seen.task not in self.prompt and not self._released.is_set():
            await asyncio.sleep(0.05)
        await super().respond(context, event_queue, seen)


@pytest.fixture
def holding(serve: Callable[..., BackgroundServer]) -> Iterator[Callable[[set[str]], tuple[HoldsAllBut, str]]]:
    """holding(prompt) -> (agent, URL) of a HoldsAllBut, released at the end of the test if not before."""
    agents: list[HoldsAllBut] = []

    def start(prompt: set[str]) -> tuple[HoldsAllBut, str]:
        agents.append(HoldsAllBut(prompt))
        return agents[-1], serve(lambda url: agent_app(agents[-1], url)).url

    yield start
    for agent in agents:  # before `serve` stops the servers: no reply is left waiting
        agent.release()


def request(endpoint: str, tasks: list[str]) -> dict[str, Any]:
    return {"domain": "airline", "agent_endpoint": endpoint, "user": "scripted_user", "user_llm": "scripted",
            "task_ids": tasks, "max_concurrency": 1}


def submit(service: Service, endpoint: str, tasks: list[str]) -> tuple[str, str]:
    """Start an evaluation through `service`; its A2A task id and evaluation id."""
    task = asyncio.run(ask(service.url, "run_tau2_evaluation", request(endpoint, tasks), return_immediately=True))
    wait_until(lambda: asyncio.run(first_update(service.url, task.id)) is not None, "the first progress update",
               timeout=STARTUP_SECONDS)
    return task.id, asyncio.run(first_update(service.url, task.id))["evaluation_id"]


async def first_update(url: str, task_id: str) -> dict[str, Any] | None:
    """The evaluation id the task's first progress update names (None before it exists)."""
    from a2a.types import GetTaskRequest

    from tau2_a2a.service.caller import connect

    client, http = await connect(url)
    try:
        task = await client.get_task(GetTaskRequest(id=task_id))
    finally:
        await http.aclose()
    for message in [*task.history, task.status.message]:
        data = result_data(message) if message.parts else None
        if isinstance(data, dict) and "evaluation_id" in data:
            return data
    return None


def record(service: Service, evaluation_id: str) -> dict[str, Any]:
    return asyncio.run(call_tool(service.url, "get_evaluation", {"evaluation_id": evaluation_id}))


def test_two_replicas_share_the_queue_and_answer_for_each_other(
        replicas: Callable[..., Service], slow_oracle: str) -> None:
    first, second = replicas("replica-a"), replicas("replica-b")
    started = [submit(first, slow_oracle, [str(task), str(task + 1)]) for task in range(0, 8, 2)]
    for task_id, evaluation_id in started:  # every task and record, read through the other replica
        finished = asyncio.run(wait_for_task(second.url, task_id, timeout=300))
        assert finished.status.state == TaskState.TASK_STATE_COMPLETED
        assert result_data(finished)["evaluation_id"] == evaluation_id
    records = [record(second, evaluation_id) for _, evaluation_id in started]
    assert [r["status"] for r in records] == ["completed"] * 4
    assert [r["result"]["metrics"]["avg_reward"] for r in records] == [1.0] * 4
    assert {r["replica"] for r in records} == {"replica-a", "replica-b"}  # the queue is shared
    assert all("resumed" not in r for r in records)  # each claimed once
    listed = asyncio.run(call_tool(second.url, "list_evaluations"))["evaluations"]
    assert {e["evaluation_id"] for e in listed} == {evaluation_id for _, evaluation_id in started}


def test_a_killed_replica_s_evaluation_is_finished_by_the_other(
        replicas: Callable[..., Service], holding: Callable[[set[str]], tuple[HoldsAllBut, str]]) -> None:
    agent, url = holding({"0"})  # task 0 is answered; the others wait until the first replica is dead
    first = replicas("replica-a", lease=SHORT_LEASE)
    tasks = [str(task) for task in range(5)]
    task_id, evaluation_id = submit(first, url, tasks)
    wait_until(lambda: done_so_far(first.url, evaluation_id) >= 1, "a simulation", timeout=STARTUP_SECONDS)
    second = replicas("replica-b", lease=SHORT_LEASE)
    children = first.kill()
    wait_until(lambda: gone(children), "the killed replica's evaluation process ending", timeout=60)
    agent.release()

    finished = asyncio.run(wait_for_task(second.url, task_id, timeout=300))
    assert finished.status.state == TaskState.TASK_STATE_COMPLETED
    data = result_data(finished)
    assert (data["evaluation_id"], data["status"], data["replica"], data["resumed"]) == (
        evaluation_id, "completed", "replica-b", 1)
    assert data["result"]["metrics"]["avg_reward"] == 1.0
    simulations = saved_simulations(results_file(second.results_dir / evaluation_id))
    assert Counter(s["task_id"] for s in simulations) == Counter(tasks)  # each exactly once


def test_cancel_through_one_replica_stops_the_evaluation_the_other_runs(
        replicas: Callable[..., Service], holding: Callable[[set[str]], tuple[HoldsAllBut, str]]) -> None:
    _, url = holding({"0", "25"})  # each evaluation's first task is answered, the rest held: both keep running
    first = replicas("replica-a", "--max-running", "2")
    by_tool = submit(first, url, [str(task) for task in range(25)])
    by_a2a = submit(first, url, [str(task) for task in range(25, 50)])
    for _, evaluation_id in (by_tool, by_a2a):
        wait_until(lambda: done_so_far(first.url, evaluation_id) >= 1, "a simulation", timeout=STARTUP_SECONDS)
    second = replicas("replica-b")

    canceled = asyncio.run(call_tool(second.url, "cancel_evaluation", {"evaluation_id": by_tool[1]}))
    assert (canceled["status"], canceled["replica"]) == ("canceled", "replica-a")
    kept = saved_simulations(results_file(first.results_dir / by_tool[1]))
    assert canceled["result"]["metrics"]["num_simulations"] == len(kept) >= 1
    ended = asyncio.run(wait_for_task(first.url, by_tool[0], timeout=300))
    assert result_data(ended)["status"] == "canceled"

    task = asyncio.run(cancel_task(second.url, by_a2a[0]))  # A2A CancelTask, through the other replica
    assert task.status.state == TaskState.TASK_STATE_CANCELED
    wait_until(lambda: record(second, by_a2a[1])["status"] == "canceled", "the evaluation ending", timeout=300)


async def cancel_task(url: str, task_id: str) -> Any:
    from a2a.types import CancelTaskRequest

    from tau2_a2a.service.caller import connect

    client, http = await connect(url)
    try:
        return await client.cancel_task(CancelTaskRequest(id=task_id))
    finally:
        await http.aclose()
