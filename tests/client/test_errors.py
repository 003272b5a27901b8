"""How a run copes with agents that are away, refuse us, fail, hang, die or talk nonsense.

Setup problems (no agent, no card, a refused token) must stop a run before
any simulation, with one line that says what to do. Transient failures are
retried. A simulation whose agent still fails ends as agent_error with its
trajectory kept, and every other simulation of the run goes on.
All against real servers on loopback; the agents are in tests/support/executors.py.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import new_data_part
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from tau2.data_model.message import AssistantMessage, ToolMessage
from tau2.data_model.simulation import TerminationReason

from tau2_a2a.client.config import A2AConfig, RetryPolicy
from tau2_a2a.client.errors import (
    A2AFailure,
    AgentAuthError,
    AgentCardError,
    AgentUnreachable,
)
from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.runner.outcome import format_summary
from tau2_a2a.tau2bench.participants.oracle_script import oracle_steps
from tests.support.cli import run_cli
from tests.support.executors import (
    CARD_PATH,
    CallsUnknownToolFirst,
    DiesOnTask,
    FailsTask,
    OracleLike,
    ReplyOnTask,
    SlowOnTask,
    agent_app,
    card_app,
    card_json,
)
from tests.support.middleware import FailFirst, FailWhen, HttpExchange, RequireBearer, ResetFirst, WireLog, middleware
from tests.support.proxy import KillableProxy
from tests.support.records import by_task, marker, outline, records_of
from tests.support.runs import FAST, Serve, run_a2a

LEGACY_CARD_PATH = "/.well-known/agent.json"


@pytest.fixture(scope="module", autouse=True)
def plans_loaded() -> None:
    """Load the airline tasks once, so no agent's first reply waits on it."""
    oracle_steps("airline", "0")


# What the OS says when nothing listens on a loopback port (the message around it names the URL).
REFUSED = f"[Errno {errno.ECONNREFUSED}] {os.strerror(errno.ECONNREFUSED)}"


def run_must_not_start(url: str, results_dir: Path, a2a: A2AConfig | None = None) -> A2AFailure:
    """Evaluate and expect an A2AFailure before any simulation: no results file is written."""
    with pytest.raises(A2AFailure) as caught:
        run_a2a(url, results_dir, task_ids=["0"], a2a=a2a)
    assert list(results_dir.iterdir()) == []
    return caught.value


def sends(exchanges: list[HttpExchange]) -> list[HttpExchange]:
    return [e for e in exchanges if e.rpc_method == "SendMessage"]


def error_message(simulation: Any) -> str:
    """The text of the message that records why a simulation ended in an agent error."""
    last = simulation.messages[-1]
    assert isinstance(last, AssistantMessage)
    return last.content


# -- the run does not start -------------------------------------------------------------


def test_unreachable_endpoint_stops_the_run_before_any_simulation(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    error = run_must_not_start(url, tmp_path)
    assert isinstance(error, AgentUnreachable)
    assert str(error) == (
        f"Fetching the agent card {url}{CARD_PATH} failed: cannot connect ({REFUSED}). "
        "Is the agent running, and is the URL right?"
    )


def test_missing_card_stops_the_run_before_any_simulation(serve: Serve, tmp_path: Path) -> None:
    server = serve(lambda url: Starlette())
    error = run_must_not_start(server.url, tmp_path)
    assert isinstance(error, AgentCardError)
    assert str(error) == (
        f"No agent card at {server.url}{CARD_PATH} nor {server.url}{LEGACY_CARD_PATH} (HTTP 404). "
        "Check that --a2a-endpoint is the agent's base URL and that the agent serves its card."
    )


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"supportedInterfaces": None}, "it lists no interface (supportedInterfaces, or url in a 0.3 card)"),
        ({"name": None, "supportedInterfaces": [
            {"url": "http://127.0.0.1:1", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]},
         "it has no name"),
    ],
    ids=["no-interface", "no-name"],
)
def test_invalid_card_stops_the_run_before_any_simulation(serve: Serve, tmp_path: Path,
                                                          changes: dict[str, Any], problem: str) -> None:
    server = serve(lambda url: card_app({CARD_PATH: JSONResponse(card_json(url, **changes))}))
    error = run_must_not_start(server.url, tmp_path)
    assert isinstance(error, AgentCardError)
    assert str(error) == f"The agent card at {server.url} is invalid: {problem}."


@pytest.mark.parametrize("status", [401, 403])
def test_refused_card_stops_the_run_before_any_simulation(serve: Serve, tmp_path: Path, status: int) -> None:
    server = serve(lambda url: card_app({CARD_PATH: Response("no", status_code=status)}))
    error = run_must_not_start(server.url, tmp_path)
    assert isinstance(error, AgentAuthError)
    assert error.status == status
    assert str(error) == (
        f"The agent at {server.url} refused the card request with HTTP {status}. "
        "Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN."
    )


@pytest.mark.parametrize("status", [401, 403])
def test_refused_token_stops_the_run_before_any_simulation(serve: Serve, tmp_path: Path, status: int) -> None:
    """The card is public, JSON-RPC is not: the wrong token must show before the first simulation."""
    wire: list[HttpExchange] = []
    server = serve(lambda url: agent_app(OracleLike(), url, [
        middleware(WireLog, exchanges=wire), middleware(RequireBearer, token="right-token", status=status)]))
    a2a = A2AConfig(endpoint=server.url, auth_token="wrong-token", retry=FAST)
    error = run_must_not_start(server.url, tmp_path, a2a)
    assert isinstance(error, AgentAuthError)
    assert str(error) == (
        f"The agent at {server.url} refused a JSON-RPC request to {server.url} with HTTP {status}. "
        "Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN."
    )
    assert [(e.method, e.path, e.rpc_method, e.status) for e in wire] == [
        ("GET", CARD_PATH, None, 200), ("POST", "/", "GetTask", status)]


def test_missing_token_for_an_agent_that_declares_bearer_auth(serve: Serve, tmp_path: Path) -> None:
    """No token at all, and the card says one is needed: the run does not start."""
    wire: list[HttpExchange] = []
    server = serve(lambda url: agent_app(OracleLike(), url, [
        middleware(WireLog, exchanges=wire), middleware(RequireBearer, token="right-token")], bearer=True))
    error = run_must_not_start(server.url, tmp_path, A2AConfig(endpoint=server.url, retry=FAST))
    assert isinstance(error, AgentAuthError)
    assert str(error) == (
        f"The agent at {server.url} refused a JSON-RPC request to {server.url} with HTTP 401. "
        "Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN."
    )
    assert sends(wire) == []


def test_card_naming_a_json_rpc_url_where_nothing_listens(serve: Serve, tmp_path: Path) -> None:
    """A card copied from another deployment names the wrong host: say so before any simulation."""
    dead_port = free_port()
    dead = f"http://127.0.0.1:{dead_port}"
    server = serve(lambda url: agent_app(OracleLike(), url, card_url=dead))
    a2a = A2AConfig(endpoint=server.url, auth_token="any-token", retry=FAST)
    error = run_must_not_start(server.url, tmp_path, a2a)
    assert isinstance(error, AgentUnreachable)
    assert str(error) == (
        f"The agent card at {server.url} names {dead} for JSON-RPC, but nothing answers there "
        f"({REFUSED}). Fix the url in the agent's card, or start the agent there."
    )


# -- the command line -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def refused_cli_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`tau2-a2a run` against a dead URL, a server without a card, and a refused token, side by side.

    Each process imports tau2 and litellm (seconds of CPU), so all three start together.
    """
    dead_port = free_port()
    no_card_port, guarded_port = free_port(), free_port()
    urls = {"dead": f"http://127.0.0.1:{dead_port}", "no-card": f"http://127.0.0.1:{no_card_port}",
            "refused": f"http://127.0.0.1:{guarded_port}"}
    guarded = agent_app(OracleLike(), urls["refused"], [middleware(RequireBearer, token="right-token")])
    results = {name: tmp_path_factory.mktemp(name) for name in urls}
    with BackgroundServer(Starlette(), port=no_card_port), BackgroundServer(guarded, port=guarded_port):
        processes = {
            name: run_cli(["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", url,
                           "--user", "scripted_user", "--task-ids", "0", "--results-dir", str(results[name]),
                           *(["--a2a-auth-token", "wrong-token"] if name == "refused" else [])],
                          cwd=results[name].parent)
            for name, url in urls.items()
        }
        outputs = {name: (*p.communicate(timeout=180), p.returncode) for name, p in processes.items()}
    yield {"urls": urls, "outputs": outputs, "results": results}


@pytest.mark.parametrize("case", ["dead", "no-card", "refused"])
def test_cli_refuses_to_start_with_one_line(refused_cli_runs: dict[str, Any], case: str) -> None:
    url = refused_cli_runs["urls"][case]
    expected = {
        "dead": f"Fetching the agent card {url}{CARD_PATH} failed: cannot connect "
                f"({REFUSED}). Is the agent running, and is the URL right?",
        "no-card": f"No agent card at {url}{CARD_PATH} nor {url}{LEGACY_CARD_PATH} (HTTP 404). "
                   "Check that --a2a-endpoint is the agent's base URL and that the agent serves its card.",
        "refused": f"The agent at {url} refused a JSON-RPC request to {url} with HTTP 401. "
                   "Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN.",
    }[case]
    stdout, stderr, code = refused_cli_runs["outputs"][case]
    assert code == 2
    assert stdout == ""
    assert "Traceback" not in stderr
    assert [line for line in stderr.splitlines() if line.startswith("error: ")] == [f"error: {expected}"]
    assert stderr.splitlines()[-1] == f"error: {expected}"
    assert list(refused_cli_runs["results"][case].iterdir()) == []


# -- transient failures are retried -------------------------------------------------------------


@pytest.mark.parametrize("status", [503, 429])
def test_transient_http_failures_are_retried(serve: Serve, tmp_path: Path, status: int) -> None:
    """Two refusals, then the agent answers: the run scores 1.0 and the records show all three attempts."""
    wire: list[HttpExchange] = []
    server = serve(lambda url: agent_app(OracleLike(), url, [
        middleware(WireLog, exchanges=wire), middleware(FailFirst, status=status, count=2)]))
    outcome = run_a2a(server.url, tmp_path, task_ids=["1"], a2a=A2AConfig(endpoint=server.url, retry=FAST))
    assert by_task(outcome)["1"].reward_info.reward == 1.0
    records = records_of(outcome, "1")
    assert outline(records) == [
        (0, 1, "SendMessage", status, "http"),
        (0, 2, "SendMessage", status, "http"),
        (0, 3, "SendMessage", 200, None),
        (1, 1, "SendMessage", 200, None),
        (2, 1, "SendMessage", 200, None),
    ]
    assert [r["error_message"] for r in records[:2]] == [
        f"SendMessage to {server.url} failed with HTTP {status}: agent overloaded ({status}), try again"] * 2
    assert outcome.metrics["run"]["errors_by_category"] == {"http": 2}
    assert [e.status for e in sends(wire)] == [status, status, 200, 200, 200]
    message_ids = [e.sent_message["messageId"] for e in sends(wire)]
    assert message_ids[0] == message_ids[1] == message_ids[2]  # a retry resends the same message
    assert len(set(message_ids)) == 3


def test_dropped_connection_is_retried(serve: Serve, tmp_path: Path) -> None:
    """The connection dies in the middle of a reply once; the retry gets through."""
    server = serve(lambda url: agent_app(OracleLike(), url, [middleware(ResetFirst, count=1)]))
    outcome = run_a2a(server.url, tmp_path, task_ids=["1"], a2a=A2AConfig(endpoint=server.url, retry=FAST))
    assert by_task(outcome)["1"].reward_info.reward == 1.0
    records = records_of(outcome, "1")
    assert outline(records)[:2] == [(0, 1, "SendMessage", 200, "connection"), (0, 2, "SendMessage", 200, None)]
    assert records[0]["error_message"] == (
        f"SendMessage to {server.url} failed: the connection was dropped (peer closed connection without "
        "sending complete message body (received 19 bytes, expected 1000)). Did the agent crash or restart?"
    )
    assert outcome.metrics["run"]["errors_by_category"] == {"connection": 1}


# -- a simulation that still fails ends alone ------------------------------------------------------


def assert_only_task_1_failed(outcome: Any, others: tuple[str, ...] = ("0",)) -> Any:
    """The `others` score 1.0; task 1 ends as agent_error with reward 0 and its trajectory kept."""
    simulations = by_task(outcome)
    assert sorted(simulations) == sorted(("1", *others))
    assert [simulations[t].reward_info.reward for t in others] == [1.0] * len(others)
    assert [simulations[t].termination_reason for t in others] == [TerminationReason.USER_STOP] * len(others)
    failed = simulations["1"]
    assert failed.termination_reason == TerminationReason.AGENT_ERROR
    assert failed.reward_info.reward == 0.0
    assert outcome.metrics["run"]["simulations"] == len(others) + 1
    return failed


def test_agent_answering_500_every_time(serve: Serve, tmp_path: Path) -> None:
    """Every request of task 1 gets HTTP 500: three attempts, then agent_error; tasks 0 and 2 score."""
    server = serve(lambda url: agent_app(OracleLike(), url, [
        middleware(FailWhen, status=500, needle=marker("1"))]))
    outcome = run_a2a(server.url, tmp_path, task_ids=["0", "1", "2"], max_concurrency=3,
                      a2a=A2AConfig(endpoint=server.url, retry=FAST))
    failed = assert_only_task_1_failed(outcome, others=("0", "2"))
    message = f"SendMessage to {server.url} failed with HTTP 500: internal error"
    assert [m.role for m in failed.messages] == ["assistant", "user", "assistant"]
    assert failed.messages[0].content == "Hi! How can I help you today?"
    assert marker("1") in failed.messages[1].content
    assert error_message(failed) == f"[A2A http error] {message} (3 attempts: http, http, http)"
    assert outline(records_of(outcome, "1")) == [(0, n, "SendMessage", 500, "http") for n in (1, 2, 3)]
    assert [r["error_message"] for r in records_of(outcome, "1")] == [message] * 3
    assert outcome.metrics["run"]["errors_by_category"] == {"http": 3}


def test_agent_too_slow_for_the_timeout(serve: Serve, tmp_path: Path) -> None:
    """Task 1 never answers (until the test ends): both attempts time out, task 0 is unaffected. The timeout
    is 5 s, so task 0's replies, which the same timeout bounds, come in time on a busy machine too."""
    timeout = 5.0
    agent = SlowOnTask("1")
    server = serve(lambda url: agent_app(agent, url))
    try:
        outcome = run_a2a(server.url, tmp_path, task_ids=["0", "1"],
                          a2a=A2AConfig(endpoint=server.url, timeout=timeout, retry=RetryPolicy(2, 0.05)))
    finally:
        agent.release()
    failed = assert_only_task_1_failed(outcome)
    message = f"SendMessage to {server.url} timed out after {timeout:g}s; raise --a2a-timeout if the agent is slow."
    assert error_message(failed) == f"[A2A timeout error] {message[:-1]} (2 attempts: timeout, timeout)."
    records = records_of(outcome, "1")
    assert outline(records) == [(0, n, "SendMessage", None, "timeout") for n in (1, 2)]
    assert [r["error_message"] for r in records] == [message] * 2
    assert len(agent.messages_of("1")) == 2  # the retry reached the agent too


def test_agent_dying_mid_run(serve: Serve, tmp_path: Path) -> None:
    """The host dies while task 1 awaits its second reply: that simulation ends, the run completes.

    Tasks run one at a time, so task 0 is done before the crash and scores 1.0.
    """
    proxy = KillableProxy()
    agent = DiesOnTask("1", at=1, die=proxy.kill)
    server = serve(lambda url: agent_app(agent, url, card_url=proxy.url))
    proxy.start(server.port)
    try:
        outcome = run_a2a(proxy.url, tmp_path, task_ids=["0", "1"], max_concurrency=1,
                          a2a=A2AConfig(endpoint=proxy.url, retry=FAST))
    finally:
        proxy.stop()
    simulations = by_task(outcome)
    assert simulations["0"].reward_info.reward == 1.0
    failed = simulations["1"]
    assert failed.termination_reason == TerminationReason.AGENT_ERROR
    assert failed.reward_info.reward == 0.0
    # The trajectory up to the crash is kept: the first golden call and its result.
    [call] = [c for m in failed.messages if isinstance(m, AssistantMessage) for c in (m.tool_calls or [])]
    assert call.name == oracle_steps("airline", "1")[0].tool_name
    assert [type(m).__name__ for m in failed.messages] == [
        "AssistantMessage", "UserMessage", "AssistantMessage", "ToolMessage", "AssistantMessage"]
    assert error_message(failed) == (
        f"[A2A connection error] SendMessage to {proxy.url} failed: cannot connect ({REFUSED}). "
        "Is the agent running, and is the URL right? (3 attempts: connection, connection, connection)"
    )
    records = records_of(outcome, "1")
    assert outline(records) == [
        (0, 1, "SendMessage", 200, None),
        (1, 1, "SendMessage", None, "connection"),
        (1, 2, "SendMessage", None, "connection"),
        (1, 3, "SendMessage", None, "connection"),
    ]
    assert records[1]["error_message"] == (
        f"SendMessage to {proxy.url} failed: the connection was dropped "
        "(Server disconnected without sending a response.). Did the agent crash or restart?"
    )


# -- replies that make no sense ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "expected", "texts", "datas"),
    [
        ([new_data_part({"tool_calls": {"name": "get_user_details"}})],
         'expected "tool_calls" to be a list of calls, got object {"name": "get_user_details"}', [],
         [{"tool_calls": {"name": "get_user_details"}}]),
        ([], "expected text for the user or tool calls, got an empty reply", [], []),
    ],
    ids=["tool-calls-not-a-list", "empty-reply"],
)
def test_malformed_reply_ends_its_simulation(serve: Serve, tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                             parts: list[Any], expected: str, texts: list[str],
                                             datas: list[Any]) -> None:
    server = serve(lambda url: agent_app(ReplyOnTask("1", parts, at=1), url))
    with caplog.at_level(logging.ERROR, logger="tau2_a2a.client"):
        outcome = run_a2a(server.url, tmp_path, task_ids=["0", "1"],
                          a2a=A2AConfig(endpoint=server.url, retry=FAST))
    failed = assert_only_task_1_failed(outcome)
    message = (f"Malformed reply from {server.url}: {expected}. Got text {texts!r} and data {datas!r}. "
               "See docs/protocol.md for the accepted forms.")
    assert message in [r.getMessage() for r in caplog.records if r.name == "tau2_a2a.client"]
    assert error_message(failed) == f"[A2A malformed-reply error] {message}"
    assert outline(records_of(outcome, "1")) == [
        (0, 1, "SendMessage", 200, None), (1, 1, "SendMessage", 200, "malformed-reply")]
    assert records_of(outcome, "1")[-1]["error_message"] == message
    assert outcome.metrics["run"]["errors_by_category"] == {"malformed-reply": 1}


def test_task_failed_by_the_agent_is_a_protocol_error(serve: Serve, tmp_path: Path) -> None:
    agent = FailsTask("1", why="cannot look up reservations today")
    server = serve(lambda url: agent_app(agent, url))
    outcome = run_a2a(server.url, tmp_path, task_ids=["0", "1"],
                      a2a=A2AConfig(endpoint=server.url, retry=FAST))
    failed = assert_only_task_1_failed(outcome)
    [seen] = agent.messages_of("1")
    message = f"the agent ended task {seen.a2a_task_id} as TASK_STATE_FAILED: cannot look up reservations today"
    assert error_message(failed) == f"[A2A protocol error] {message}"
    assert outline(records_of(outcome, "1")) == [(0, 1, "SendMessage", 200, "protocol")]
    assert records_of(outcome, "1")[0]["error_message"] == message
    assert outcome.metrics["run"]["errors_by_category"] == {"protocol": 1}


def test_unknown_tool_goes_back_to_the_agent_as_a_tool_error(serve: Serve, tmp_path: Path) -> None:
    agent = CallsUnknownToolFirst("teleport_passenger", {"destination": "Mars"})
    server = serve(lambda url: agent_app(agent, url))
    outcome = run_a2a(server.url, tmp_path, task_ids=["1"], a2a=A2AConfig(endpoint=server.url, retry=FAST))
    simulation = by_task(outcome)["1"]
    assert simulation.reward_info.reward == 1.0
    [result] = [m for m in simulation.messages if isinstance(m, ToolMessage)][:1]
    assert (result.error, result.content) == (True, "Error: Tool 'teleport_passenger' not found.")
    # The agent was told, as a tool result flagged as an error.
    [told] = agent.messages_of("1")[1].turn.tool_results
    assert (told.name, told.error, told.content) == (
        "teleport_passenger", True, "Error: Tool 'teleport_passenger' not found.")
    assert [r["unknown_tool_calls"] for r in records_of(outcome, "1")] == [1, 0, 0, 0]
    assert outcome.metrics["run"]["unknown_tool_calls"] == 1
    assert "  unknown tool calls: 1" in format_summary(outcome.metrics).splitlines()
    assert outcome.metrics["run"]["errors_by_category"] == {}
