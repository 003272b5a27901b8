"""Streaming agents: SendStreamingMessage, replies assembled from the stream, cut streams retried.

The agents here stream the way a2a-sdk agents do: a Task, `working` status
updates, an artifact sent in `append` chunks, then `completed`. The client must
score them exactly as the oracle scores, and meter the stream.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import new_task, new_text_part
from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentSkill, TaskState
from starlette.types import ASGIApp, Receive, Scope, Send

from tau2_a2a.client.config import A2AConfig, RetryPolicy
from tau2_a2a.client.errors import AgentTimeout
from tau2_a2a.client.session import A2ASession
from tau2_a2a.protocol.cards import agent_card
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tau2_a2a.protocol.messages import user_turn
from tau2_a2a.tau2bench.run.fidelity import trajectory_differences
from tests.support.executors import FinishesLater, OracleLike, Seen, StreamsChunks
from tests.support.records import by_task
from tests.support.runs import FAST, run_a2a, run_native_oracle

TASKS = ["0", "1", "5"]


class KeepsWorking(OracleLike):
    """Streams a `working` update every 0.2 s and completes only once released: a stream alive past any timeout."""

    def __init__(self) -> None:
        super().__init__()
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        await event_queue.enqueue_event(new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        while not self._released.is_set():
            await updater.update_status(TaskState.TASK_STATE_WORKING,
                                        updater.new_agent_message([new_text_part("Still on it...")]))
            await asyncio.sleep(0.2)
        await updater.complete(updater.new_agent_message([new_text_part("Done.")]))


class FallsSilent(OracleLike):
    """Streams a `working` update at once and another after `quiet` seconds, then falls silent until
    `answer_at` seconds, when it completes with its reply."""

    def __init__(self, quiet: float, answer_at: float) -> None:
        super().__init__()
        self.quiet = quiet
        self.answer_at = answer_at

    async def respond(self, context: RequestContext, event_queue: EventQueue, seen: Seen) -> None:
        await event_queue.enqueue_event(new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.update_status(TaskState.TASK_STATE_WORKING)
        await asyncio.sleep(self.quiet)
        await updater.update_status(TaskState.TASK_STATE_WORKING,
                                    updater.new_agent_message([new_text_part("Almost there...")]))
        await asyncio.sleep(self.answer_at - self.quiet)
        await updater.complete(updater.new_agent_message([new_text_part("Here is your answer.")]))


class CutsStreamOnce:
    """ASGI middleware: the first streaming reply is cut off after its first chunk, as a dropped connection."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.cut = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.cut:
            await self.app(scope, receive, send)
            return
        streaming = False

        async def cutting_send(event: dict[str, Any]) -> None:
            nonlocal streaming
            await send(event)
            if event["type"] == "http.response.start":
                streaming = any(k == b"content-type" and v.startswith(b"text/event-stream")
                                for k, v in event.get("headers", []))
            elif streaming and event.get("body") and not self.cut:
                self.cut = True
                raise ConnectionResetError("test agent drops the stream mid-reply")

        await self.app(scope, receive, cutting_send)


def streaming_app(executor: Any, url: str, middleware: type | None = None) -> Any:
    card = agent_card("streaming test agent", "Streams like a2a-sdk agents do.", url, streaming=True,
                      skills=[AgentSkill(id="test", name="test", description="test agent", tags=["test"])])
    app = a2a_app(executor, card)
    return middleware(app) if middleware else app


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return run_native_oracle(tmp_path_factory.mktemp("native"), "airline", task_ids=TASKS)


def serve_agent(executor: Any, middleware: type | None = None) -> Iterator[BackgroundServer]:
    port = free_port()
    with BackgroundServer(streaming_app(executor, f"http://127.0.0.1:{port}", middleware), port=port) as server:
        yield server


@pytest.fixture
def chunked() -> Iterator[BackgroundServer]:
    yield from serve_agent(StreamsChunks())


def test_streamed_replies_score_exactly_as_the_oracle(chunked: BackgroundServer, native: Any,
                                                      tmp_path: Path) -> None:
    url = chunked.url
    outcome = run_a2a(url, tmp_path, task_ids=TASKS, a2a=A2AConfig(endpoint=url, streaming=True, retry=FAST))
    assert {s.reward_info.reward for s in outcome.results.simulations} == {1.0}
    assert trajectory_differences(outcome.results, native) == []
    records = [r for s in outcome.metrics["simulations"] for r in s["requests"]]
    assert {r["method"] for r in records} == {"SendStreamingMessage"}
    assert {r["error"] for r in records} == {None}
    # task, working update, artifact chunk(s), completed: four events or more per reply
    assert min(r["events"] for r in records) >= 4
    assert all(0 < r["first_event_ms"] <= r["latency_ms"] for r in records)
    texts = [m.content for s in outcome.results.simulations for m in s.messages
             if m.role == "assistant" and m.content]
    assert texts and not any("Looking into it" in text for text in texts)  # progress is not the reply
    assert outcome.metrics["run"]["first_event_ms"]["p50"] is not None


def test_stream_cut_mid_reply_is_retried(native: Any, tmp_path: Path) -> None:
    for server in serve_agent(StreamsChunks(), CutsStreamOnce):
        outcome = run_a2a(server.url, tmp_path, task_ids=["1"], max_concurrency=1,
                          a2a=A2AConfig(endpoint=server.url, streaming=True, retry=FAST))
    [simulation] = outcome.results.simulations
    assert simulation.reward_info.reward == 1.0
    records = outcome.metrics["simulations"][0]["requests"]
    assert [(r["turn"], r["attempt"], r["error"]) for r in records[:2]] == [(0, 1, "connection"), (0, 2, None)]
    assert "the connection was dropped" in records[0]["error_message"]
    assert {r["error"] for r in records[2:]} == {None}


def test_a_stream_still_open_when_the_reply_is_due_times_out() -> None:
    """Events keep coming, none the reply: the stream is cut at --a2a-timeout, as a blocking reply would be.
    The agent streams until the test ends, so only the timeout can end the request; its first updates come
    at once, seconds before the timeout."""
    timeout = 3.0
    agent = KeepsWorking()
    for server in serve_agent(agent):
        session = A2ASession(A2AConfig(endpoint=server.url, streaming=True, timeout=timeout,
                                       retry=RetryPolicy(1, 0.05)))
        try:
            with pytest.raises(AgentTimeout) as caught:
                session.send(user_turn("Hello"), None, None, 0)
        finally:
            session.close()
            agent.release()  # before the server stops
    [record] = caught.value.records
    assert (record.method, record.error, record.http_status) == ("SendStreamingMessage", "timeout", 200)
    assert record.events >= 2 and record.response_bytes > 0  # the stream was flowing when its time ran out
    assert str(caught.value) == (f"SendStreamingMessage to {server.url} timed out after {timeout:g}s with its "
                                 f"reply begun ({record.events} events in): the agent is answering, so the request "
                                 "was not sent again; raise --a2a-timeout if the agent is this slow.")


def test_a_stream_that_falls_silent_just_before_its_reply_is_due_times_out_when_due() -> None:
    """The pool reads with the timeout the request started with: the last event, half the timeout in, must not
    buy the stream a whole timeout more. The reply comes just inside that whole timeout more: a client that
    restarted its clock at the last event would take it; this one gave up half a timeout earlier.

    Every bound is a fraction of the timeout (5 s), not a fixed margin: the last update comes 2.5 s before the
    reply is due, the reply 2 s after it."""
    timeout = 5.0
    quiet = timeout / 2
    for server in serve_agent(FallsSilent(quiet=quiet, answer_at=quiet + timeout - 0.5)):
        session = A2ASession(A2AConfig(endpoint=server.url, streaming=True, timeout=timeout,
                                       retry=RetryPolicy(1, 0.05)))
        try:
            with pytest.raises(AgentTimeout) as caught:
                session.send(user_turn("Hello"), None, None, 0)
        finally:
            session.close()
    [record] = caught.value.records
    assert (record.error, record.events) == ("timeout", 3)  # the task, both updates: the stream flowed, then stopped
    assert str(caught.value) == (f"SendStreamingMessage to {server.url} timed out after {timeout:g}s with its "
                                 "reply begun (3 events in): the agent is answering, so the request was not sent "
                                 "again; raise --a2a-timeout if the agent is this slow.")


def test_task_left_working_when_the_stream_ends_is_polled(native: Any, tmp_path: Path) -> None:
    for server in serve_agent(FinishesLater(delay=0.3)):
        outcome = run_a2a(server.url, tmp_path, task_ids=["1"],
                          a2a=A2AConfig(endpoint=server.url, streaming=True, retry=FAST))
    assert by_task(outcome)["1"].reward_info.reward == 1.0
    methods = [r["method"] for r in outcome.metrics["simulations"][0]["requests"]]
    assert methods[0] == "SendStreamingMessage" and "GetTask" in methods


def test_streaming_asked_of_an_agent_that_does_not_stream_falls_back_once(oracle_url: str, tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="tau2_a2a.client"):
        outcome = run_a2a(oracle_url, tmp_path, task_ids=["1", "5"],
                          a2a=A2AConfig(endpoint=oracle_url, streaming=True, retry=FAST))
    assert {s.reward_info.reward for s in outcome.results.simulations} == {1.0}
    assert {r["method"] for s in outcome.metrics["simulations"] for r in s["requests"]} == {"SendMessage"}
    warnings = [r.getMessage() for r in caplog.records if "does not stream" in r.getMessage()]
    assert warnings == [f"--a2a-streaming: the agent at {oracle_url} does not stream (its card says so); "
                        "sending blocking SendMessage requests instead."]
