"""Faults over HTTP+JSON and gRPC, with real servers: what test_errors.py checks over JSON-RPC.

Transient refusals are retried, a timeout and a dying host end only their own
simulation, a gRPC server that aborts with a chosen status code gets the
category (and retry) that status deserves, and a whole run against a
token-protected agent works on both bindings. The gRPC faults come from a
real grpc.aio interceptor (tests/support/middleware.py `GrpcAbort`) in front of a2a-sdk's
own servicer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.middleware import Middleware
from tau2.data_model.simulation import TerminationReason

from tau2_a2a.client.config import A2AConfig, RetryPolicy
from tau2_a2a.client.errors import AgentAuthError
from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tests.support.executors import DiesOnTask, OracleLike, SlowOnTask, agent_app
from tests.support.middleware import FailFirst, GrpcAbort, HttpExchange, RequireBearer, ResetFirst, WireLog
from tests.support.proxy import KillableProxy
from tests.support.records import by_task, marker, records_of
from tests.support.runs import FAST, run_a2a

TOKEN = "binding-token-5e1f"


@dataclass
class Agent:
    """An agent served on HTTP (JSON-RPC, HTTP+JSON) and gRPC; `url` is what the run is pointed at."""

    server: BackgroundServer
    url: str  # errors name it whichever binding carried the request: it is what the user gave


@pytest.fixture
def agent_on() -> Iterator[Any]:
    """agent_on(executor, transport, middleware=..., interceptors=..., proxy=...) -> Agent."""
    started: list[BackgroundServer] = []

    def start(executor: Any, transport: str, *, middleware: list[Middleware] | None = None,
              interceptors: list[Any] | None = None, proxy: KillableProxy | None = None,
              bearer: bool = False) -> Agent:
        port, grpc_port = free_port(), free_port()
        url = f"http://127.0.0.1:{port}"
        grpc_url = f"127.0.0.1:{grpc_port}"
        card_url, card_grpc = url, grpc_url
        if proxy is not None:
            if transport == "grpc":
                card_grpc = f"127.0.0.1:{proxy.port}"
            else:
                card_url = proxy.url
        app = agent_app(executor, url, middleware, card_url=card_url, bearer=bearer, grpc_url=card_grpc,
                        grpc_interceptors=interceptors)
        server = BackgroundServer(app, port=port, grpc_port=grpc_port).start()
        started.append(server)
        if proxy is not None:
            proxy.start(grpc_port if transport == "grpc" else port)
        run_url = proxy.url if proxy is not None and transport != "grpc" else url
        return Agent(server, run_url)

    yield start
    for server in started:
        server.stop()


def config(agent: Agent, transport: str, **options: Any) -> A2AConfig:
    return A2AConfig(endpoint=agent.url, transport=transport, **{"retry": FAST, **options})


def outline(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(turn, attempt, transport, http status, gRPC status, error) of each record."""
    return [(r["turn"], r["attempt"], r["transport"], r["http_status"], r["grpc_status"], r["error"])
            for r in records]


def error_message(simulation: Any) -> str:
    return simulation.messages[-1].content


# -- transient failures are retried ---------------------------------------------------------------


def test_http_json_refusals_are_retried(agent_on: Any, tmp_path: Path) -> None:
    wire: list[HttpExchange] = []
    agent = agent_on(OracleLike(), "http-json", middleware=[Middleware(WireLog, exchanges=wire),
                                                           Middleware(FailFirst, status=503, count=2)])
    outcome = run_a2a(agent.url, tmp_path, task_ids=["1"], a2a=config(agent, "http-json"))
    assert by_task(outcome)["1"].reward_info.reward == 1.0
    records = records_of(outcome, "1")
    assert outline(records) == [
        (0, 1, "HTTP+JSON", 503, None, "http"),
        (0, 2, "HTTP+JSON", 503, None, "http"),
        (0, 3, "HTTP+JSON", 200, None, None),
        (1, 1, "HTTP+JSON", 200, None, None),
        (2, 1, "HTTP+JSON", 200, None, None),
    ]
    assert records[0]["error_message"] == (
        f"SendMessage to {agent.url} failed with HTTP 503: agent overloaded (503), try again")
    assert [e.path for e in wire if e.method == "POST"] == ["/message:send"] * 5
    assert outcome.metrics["run"]["errors_by_category"] == {"http": 2}


def test_http_json_dropped_connection_is_retried(agent_on: Any, tmp_path: Path) -> None:
    agent = agent_on(OracleLike(), "http-json", middleware=[Middleware(ResetFirst, count=1)])
    outcome = run_a2a(agent.url, tmp_path, task_ids=["1"], a2a=config(agent, "http-json"))
    assert by_task(outcome)["1"].reward_info.reward == 1.0
    records = records_of(outcome, "1")
    assert outline(records)[:2] == [(0, 1, "HTTP+JSON", 200, None, "connection"),
                                    (0, 2, "HTTP+JSON", 200, None, None)]
    assert records[0]["error_message"].startswith(f"SendMessage to {agent.url} failed: the connection was dropped (")
    assert records[0]["error_message"].endswith("). Did the agent crash or restart?")


def test_grpc_unavailable_is_retried(agent_on: Any, tmp_path: Path) -> None:
    aborts = GrpcAbort("UNAVAILABLE", count=2)
    agent = agent_on(OracleLike(), "grpc", interceptors=[aborts])
    outcome = run_a2a(agent.url, tmp_path, task_ids=["1"], a2a=config(agent, "grpc"))
    assert by_task(outcome)["1"].reward_info.reward == 1.0
    assert outline(records_of(outcome, "1")) == [
        (0, 1, "GRPC", None, "UNAVAILABLE", "connection"),
        (0, 2, "GRPC", None, "UNAVAILABLE", "connection"),
        (0, 3, "GRPC", None, "OK", None),
        (1, 1, "GRPC", None, "OK", None),
        (2, 1, "GRPC", None, "OK", None),
    ]
    assert aborts.statuses == ["UNAVAILABLE", "UNAVAILABLE", "OK", "OK", "OK"]


# -- a gRPC server aborting with chosen status codes ----------------------------------------------


@pytest.mark.parametrize(("code", "category", "attempts", "says"), [
    ("RESOURCE_EXHAUSTED", "http", 3, "failed with gRPC RESOURCE_EXHAUSTED: agent says resource_exhausted "
                                      "(3 attempts: http, http, http)"),
    ("INTERNAL", "http", 3, "failed with gRPC INTERNAL: agent says internal (3 attempts: http, http, http)"),
    ("DEADLINE_EXCEEDED", "timeout", 3, "failed: the agent answered gRPC DEADLINE_EXCEEDED (agent says "
                                        "deadline_exceeded), a timeout on its side; if it recurs, ask the "
                                        "agent's operator (3 attempts: timeout, timeout, timeout)."),
    ("INVALID_ARGUMENT", "protocol", 1, "failed: gRPC Error INVALID_ARGUMENT: agent says invalid_argument"),
], ids=["RESOURCE_EXHAUSTED", "INTERNAL", "DEADLINE_EXCEEDED", "INVALID_ARGUMENT"])
def test_grpc_aborts_end_only_their_simulation(agent_on: Any, tmp_path: Path, code: str, category: str,
                                               attempts: int, says: str) -> None:
    """Every SendMessage of task 1 is aborted with `code`: retried only when worth it; task 0 scores."""
    aborts = GrpcAbort(code, needle=marker("1"))
    agent = agent_on(OracleLike(), "grpc", interceptors=[aborts])
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0", "1"], max_concurrency=1, a2a=config(agent, "grpc"))
    simulations = by_task(outcome)
    assert simulations["0"].reward_info.reward == 1.0
    failed = simulations["1"]
    assert (failed.termination_reason, failed.reward_info.reward) == (TerminationReason.AGENT_ERROR, 0.0)
    records = records_of(outcome, "1")
    assert outline(records) == [(0, n, "GRPC", None, code, category) for n in range(1, attempts + 1)]
    assert error_message(failed) == f"[A2A {category} error] SendMessage to {agent.url} {says}"
    assert aborts.statuses.count(code) == attempts
    assert outcome.metrics["run"]["errors_by_category"] == {category: attempts}


@pytest.mark.parametrize("code", ["UNAUTHENTICATED", "PERMISSION_DENIED"])
def test_grpc_refusing_our_credentials_mid_run_stops_the_run(agent_on: Any, tmp_path: Path, code: str) -> None:
    agent = agent_on(OracleLike(), "grpc", interceptors=[GrpcAbort(code, needle=marker("1"))])
    with pytest.raises(AgentAuthError) as caught:
        run_a2a(agent.url, tmp_path, task_ids=["0", "1"], max_concurrency=1, a2a=config(agent, "grpc"))
    assert "Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN" in str(caught.value)


# -- timeouts and dying hosts --------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["http-json", "grpc"])
def test_agent_too_slow_for_the_timeout(agent_on: Any, tmp_path: Path, transport: str) -> None:
    """Task 1 never answers (until the test ends); task 0's replies, bounded by the same 5 s, come in time."""
    timeout = 5.0
    slow = SlowOnTask("1")
    agent = agent_on(slow, transport)
    try:
        outcome = run_a2a(agent.url, tmp_path, task_ids=["0", "1"],
                          a2a=config(agent, transport, timeout=timeout, retry=RetryPolicy(2, 0.05)))
    finally:
        slow.release()
    simulations = by_task(outcome)
    assert simulations["0"].reward_info.reward == 1.0
    failed = simulations["1"]
    assert (failed.termination_reason, failed.reward_info.reward) == (TerminationReason.AGENT_ERROR, 0.0)
    message = f"SendMessage to {agent.url} timed out after {timeout:g}s; raise --a2a-timeout if the agent is slow"
    assert error_message(failed) == f"[A2A timeout error] {message} (2 attempts: timeout, timeout)."
    binding = {"http-json": "HTTP+JSON", "grpc": "GRPC"}[transport]
    # Our own timer cuts the call, on gRPC too: no status came back.
    assert outline(records_of(outcome, "1")) == [(0, n, binding, None, None, "timeout") for n in (1, 2)]
    assert len(slow.messages_of("1")) == 2  # the retry reached the agent too


@pytest.mark.parametrize("transport", ["http-json", "grpc"])
def test_agent_dying_mid_run(agent_on: Any, tmp_path: Path, transport: str) -> None:
    """The host dies while task 1 awaits its second reply: that simulation ends, the run completes."""
    proxy = KillableProxy()
    agent = agent_on(DiesOnTask("1", at=1, die=proxy.kill), transport, proxy=proxy)
    try:
        outcome = run_a2a(agent.url, tmp_path, task_ids=["0", "1"], max_concurrency=1,
                          a2a=config(agent, transport))
    finally:
        proxy.stop()
    simulations = by_task(outcome)
    assert simulations["0"].reward_info.reward == 1.0
    failed = simulations["1"]
    assert (failed.termination_reason, failed.reward_info.reward) == (TerminationReason.AGENT_ERROR, 0.0)
    assert [type(m).__name__ for m in failed.messages] == [
        "AssistantMessage", "UserMessage", "AssistantMessage", "ToolMessage", "AssistantMessage"]
    assert error_message(failed).startswith(f"[A2A connection error] SendMessage to {agent.url} failed")
    records = records_of(outcome, "1")
    assert [(r["turn"], r["attempt"], r["error"]) for r in records] == [
        (0, 1, None), (1, 1, "connection"), (1, 2, "connection"), (1, 3, "connection")]


# -- a token-protected agent ------------------------------------------------------------------------


def test_whole_run_against_a_token_protected_agent_over_http_json(agent_on: Any, tmp_path: Path) -> None:
    wire: list[HttpExchange] = []
    agent = agent_on(OracleLike(), "http-json", bearer=True, middleware=[
        Middleware(WireLog, exchanges=wire), Middleware(RequireBearer, token=TOKEN)])
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0", "1"], a2a=config(agent, "http-json", auth_token=TOKEN))
    assert {t: s.reward_info.reward for t, s in by_task(outcome).items()} == {"0": 1.0, "1": 1.0}
    posts = [e for e in wire if e.method == "POST"]
    assert posts and {e.path for e in posts} == {"/message:send"}
    assert {e.headers.get("authorization") for e in posts} == {f"Bearer {TOKEN}"}
    assert {e.status for e in posts} == {200}
    assert TOKEN not in outcome.results_path.read_text()


def test_whole_run_against_a_token_protected_agent_over_grpc(agent_on: Any, tmp_path: Path) -> None:
    guard = GrpcAbort(token=TOKEN)
    agent = agent_on(OracleLike(), "grpc", bearer=True, interceptors=[guard])
    outcome = run_a2a(agent.url, tmp_path, task_ids=["0", "1"], a2a=config(agent, "grpc", auth_token=TOKEN))
    assert {t: s.reward_info.reward for t, s in by_task(outcome).items()} == {"0": 1.0, "1": 1.0}
    assert guard.seen and {m.get("authorization") for m in guard.seen} == {f"Bearer {TOKEN}"}
    assert set(guard.statuses) == {"OK"}
    assert TOKEN not in outcome.results_path.read_text()
