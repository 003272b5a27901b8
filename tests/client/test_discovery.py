"""Agent discovery against real servers on loopback: A2A 1.0 and 0.3 cards, and every way it fails.

Discovery is the first thing a run does; its errors are what a user sees when
the endpoint, the card or the token is wrong, so each failure is checked for
the type and the words that tell the user what to do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.helpers import new_text_part
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCard, Message
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tau2_a2a.cli.card import describe_card
from tau2_a2a.client.config import A2AConfig, RetryPolicy
from tau2_a2a.client.errors import AgentAuthError, AgentCardError, AgentUnreachable
from tau2_a2a.client.session import A2ASession
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tau2_a2a.reference.oracle_agent import NO_MARKER, OracleExecutor, oracle_card
from tests.support.runs import Serve, run_a2a

CARD_PATH = "/.well-known/agent-card.json"
LEGACY_CARD_PATH = "/.well-known/agent.json"


# -- servers ------------------------------------------------------------------------


class JsonRpcLog:
    """ASGI middleware keeping the JSON-RPC method and A2A-Version header of every POST.

    It shows which protocol the client actually spoke, not what the card promised.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls: list[tuple[str | None, str | None]] = []

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        received: list[dict[str, Any]] = []
        body = b""
        while True:
            event = await receive()
            received.append(event)
            body += event.get("body", b"")
            if not event.get("more_body", False):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.calls.append((json.loads(body).get("method"), headers.get("a2a-version")))

        async def replay() -> dict[str, Any]:
            return received.pop(0) if received else await receive()

        await self.app(scope, replay, send)


def card_v03(url: str, **extra: Any) -> dict[str, Any]:
    """An A2A 0.3 card as 0.3 agents (and ADK before 2.x) serve it."""
    return {
        "name": "tau2 oracle (A2A 0.3)",
        "description": "The reference oracle behind a 0.3 card.",
        "url": url,
        "version": "0.3.1",
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{"id": "tau2-oracle", "name": "tau2 oracle", "description": "Golden actions.", "tags": ["tau2"]}],
        **extra,
    }


def app_v03(url: str, card_json: dict[str, Any] | None = None) -> JsonRpcLog:
    """An oracle agent that advertises itself with a 0.3 card; JSON-RPC with 0.3 compatibility."""
    handler = DefaultRequestHandler(agent_executor=OracleExecutor(), task_store=InMemoryTaskStore(),
                                    agent_card=oracle_card(url))
    card = card_json or card_v03(url)

    async def serve_card(request: Request) -> Response:
        return JSONResponse(card)

    routes = [Route(CARD_PATH, serve_card), *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)]
    return JsonRpcLog(Starlette(routes=routes))


def app_v10(url: str, card_path: str = CARD_PATH) -> JsonRpcLog:
    """The oracle with its A2A 1.0 card, optionally only at another path."""
    if card_path == CARD_PATH:
        return JsonRpcLog(a2a_app(OracleExecutor(), oracle_card(url)))
    card = oracle_card(url)
    handler = DefaultRequestHandler(agent_executor=OracleExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = [*create_agent_card_routes(card, card_url=card_path),
              *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)]
    return JsonRpcLog(Starlette(routes=routes))


def card_body_app(body: str, media_type: str = "application/json", status: int = 200) -> Starlette:
    """A server whose card path answers with exactly `body`; no JSON-RPC."""

    async def serve_card(request: Request) -> Response:
        return Response(body, status_code=status, media_type=media_type)

    return Starlette(routes=[Route(CARD_PATH, serve_card)])


def bearer_app(url: str, token: str) -> Starlette:
    """The oracle behind a bearer-token check on every request, the card included."""
    inner = a2a_app(OracleExecutor(), oracle_card(url))

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        if scope["type"] == "http" and headers.get("authorization") != f"Bearer {token}":
            await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
            return
        await inner(scope, receive, send)

    return app  # type: ignore[return-value]


def serve_logged(serve: Serve, make_app: Callable[[str], JsonRpcLog]) -> tuple[BackgroundServer, JsonRpcLog]:
    """Serve an app wrapped in JsonRpcLog; return the server and its log."""
    apps: list[JsonRpcLog] = []

    def build(url: str) -> JsonRpcLog:
        apps.append(make_app(url))
        return apps[0]

    server = serve(build)
    return server, apps[0]


def discover(url: str, token: str | None = None) -> tuple[AgentCard, str]:
    """The card and protocol version a fresh session finds at `url`."""
    session = A2ASession(A2AConfig(endpoint=url, auth_token=token, timeout=10))
    try:
        return session.card, session.protocol_version
    finally:
        session.close()


def discovery_error(url: str, token: str | None = None) -> BaseException:
    """What a fresh session raises when it looks for the card at `url`."""
    session = A2ASession(A2AConfig(endpoint=url, auth_token=token, timeout=10))
    try:
        with pytest.raises(Exception) as caught:
            _ = session.card
        return caught.value
    finally:
        session.close()


def say_hello(url: str) -> Message:
    """One real exchange through a fresh session; the oracle answers NO_MARKER without a task marker."""
    session = A2ASession(A2AConfig(endpoint=url, timeout=10))
    try:
        reply = session.send([new_text_part("Hello")], None, None, 0).reply
    finally:
        session.close()
    assert isinstance(reply, Message)
    return reply


# -- A2A 1.0 ------------------------------------------------------------------------


def test_a2a_1_0_agent_is_discovered_and_spoken_to_in_1_0(serve: Serve) -> None:
    server, log = serve_logged(serve, app_v10)
    card, version = discover(server.url)
    assert card.name == "tau2 oracle"
    assert [(i.protocol_binding, i.url, i.protocol_version) for i in card.supported_interfaces] == [
        ("JSONRPC", server.url, "1.0"), ("JSONRPC", server.url, "0.3"),
        ("HTTP+JSON", server.url, "1.0"), ("HTTP+JSON", server.url, "0.3"),
    ]
    assert version == "1.0"
    assert [p.text for p in say_hello(server.url).parts] == [NO_MARKER]
    # each session checks access before its first message: discover's, then say_hello's
    assert log.calls == [("GetTask", "1.0"), ("GetTask", "1.0"), ("SendMessage", "1.0")]


# -- A2A 0.3 ------------------------------------------------------------------------


def test_a2a_0_3_card_is_read_as_0_3(serve: Serve) -> None:
    server = serve(app_v03)
    card, version = discover(server.url)
    assert card.name == "tau2 oracle (A2A 0.3)"
    assert card.version == "0.3.1"
    assert [(i.protocol_binding, i.url, i.protocol_version) for i in card.supported_interfaces] == [
        ("JSONRPC", server.url, "0.3.0")
    ]
    assert version == "0.3.0"


def test_a2a_0_3_agent_is_spoken_to_in_0_3(serve: Serve) -> None:
    """The client follows the card: 0.3 method names and version header."""
    server, log = serve_logged(serve, app_v03)
    assert [p.text for p in say_hello(server.url).parts] == [NO_MARKER]
    assert log.calls == [("tasks/get", "0.3"), ("message/send", "0.3")]


def test_tau2_evaluation_of_an_a2a_0_3_agent(serve: Serve, tmp_path: Path) -> None:
    """A real airline task end to end over 0.3: golden actions score 1.0, metrics say 0.3.

    Task 20 books a reservation whose payment amounts and baggage count are
    integers, so the database check also proves the call's types survived.
    """
    server, log = serve_logged(serve, app_v03)
    outcome = run_a2a(server.url, tmp_path, task_ids=["20"],
                      a2a=A2AConfig(endpoint=server.url, timeout=30, retry=RetryPolicy(backoff_seconds=0.05)))
    [simulation] = outcome.results.simulations
    assert simulation.task_id == "20"
    assert simulation.reward_info.reward == 1.0
    [booking] = [c for m in simulation.messages for c in (getattr(m, "tool_calls", None) or [])]
    assert booking.name == "book_reservation"
    assert booking.arguments["total_baggages"] == 3 and type(booking.arguments["total_baggages"]) is int
    assert [type(p["amount"]) for p in booking.arguments["payment_methods"]] == [int, int]
    assert outcome.metrics is not None
    requests = outcome.metrics["simulations"][0]["requests"]
    assert len(requests) == 2  # the booking, then the closing text
    assert {r["protocol_version"] for r in requests} == {"0.3.0"}
    assert {r["error"] for r in requests} == {None}
    assert outcome.metrics["run"]["failed_requests"] == 0
    assert outcome.metrics_path is not None and outcome.metrics_path.exists()
    assert [method for method, _ in log.calls] == ["tasks/get"] + ["message/send"] * len(requests)
    assert outcome.metrics["discovery"]["requests"][-1]["method"] == "GetTask"  # the access check


# -- where the card is --------------------------------------------------------------


def test_card_only_at_the_legacy_path_is_found(serve: Serve) -> None:
    server = serve(lambda url: app_v10(url, card_path=LEGACY_CARD_PATH))
    assert httpx.get(server.url + CARD_PATH).status_code == 404
    assert httpx.get(server.url + LEGACY_CARD_PATH).status_code == 200
    card, version = discover(server.url)
    assert card.name == "tau2 oracle"
    assert version == "1.0"
    assert [p.text for p in say_hello(server.url).parts] == [NO_MARKER]


def test_missing_card_names_both_paths(serve: Serve) -> None:
    server = serve(lambda url: Starlette(routes=[]))
    error = discovery_error(server.url)
    assert isinstance(error, AgentCardError)
    assert error.status == 404
    assert str(error) == (
        f"No agent card at {server.url}{CARD_PATH} nor {server.url}{LEGACY_CARD_PATH} (HTTP 404). "
        "Check that --a2a-endpoint is the agent's base URL and that the agent serves its card."
    )


def test_card_request_failing_with_a_server_error(serve: Serve) -> None:
    server = serve(lambda url: card_body_app("boom", media_type="text/plain", status=500))
    error = discovery_error(server.url)
    assert isinstance(error, AgentCardError)
    assert error.status == 500
    assert str(error) == f"Fetching the agent card {server.url}{CARD_PATH} failed with HTTP 500."


# -- invalid cards ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("card", "problems"),
    [
        ({"hello": "world"},
         "it has no name; it lists no interface (supportedInterfaces, or url in a 0.3 card)"),
        ({"name": "Nameless agent", "description": "No interfaces", "version": "1.0.0",
          "capabilities": {}, "skills": []},
         "it lists no interface (supportedInterfaces, or url in a 0.3 card)"),
    ],
    ids=["not-a-card", "no-interfaces"],
)
def test_card_that_tau2_cannot_use(serve: Serve, card: dict[str, Any], problems: str) -> None:
    server = serve(lambda url: card_body_app(json.dumps(card)))
    error = discovery_error(server.url)
    assert isinstance(error, AgentCardError)
    assert str(error) == f"The agent card at {server.url} is invalid: {problems}."


def test_card_with_no_binding_we_speak_is_refused_naming_what_it_offers(serve: Serve) -> None:
    card = {"name": "Websocket only", "supportedInterfaces": [
        {"url": "ws://127.0.0.1:1/a2a", "protocolBinding": "WEBSOCKET", "protocolVersion": "1.0"}]}
    server = serve(lambda url: card_body_app(json.dumps(card)))
    error = discovery_error(server.url)
    assert isinstance(error, AgentCardError)
    assert str(error) == (
        f"The agent card at {server.url} offers no interface tau2-a2a speaks: it offers "
        "WEBSOCKET 1.0 at ws://127.0.0.1:1/a2a; tau2-a2a speaks JSONRPC, HTTP+JSON and GRPC."
    )


def test_transport_the_card_does_not_offer_is_refused_naming_what_it_offers(serve: Serve) -> None:
    server = serve(app_v10)
    session = A2ASession(A2AConfig(endpoint=server.url, timeout=10, transport="grpc"))
    try:
        with pytest.raises(AgentCardError) as caught:
            _ = session.card
    finally:
        session.close()
    assert str(caught.value) == (
        f"--a2a-transport grpc: the agent card at {server.url} offers no GRPC interface (it offers "
        f"JSONRPC 1.0 at {server.url}, JSONRPC 0.3 at {server.url}, HTTP+JSON 1.0 at {server.url}, "
        f"HTTP+JSON 0.3 at {server.url}); pass --a2a-transport http-json or jsonrpc (or auto)."
    )


@pytest.mark.parametrize(
    ("body", "media_type"),
    [("[1, 2, 3]", "application/json"), ("<html><body>Welcome</body></html>", "text/html"),
     ('{"name": ["not", "a", "string"]}', "application/json")],
    ids=["json-array", "html-page", "wrong-field-type"],
)
def test_card_that_is_not_an_agent_card(serve: Serve, body: str, media_type: str) -> None:
    server = serve(lambda url: card_body_app(body, media_type=media_type))
    error = discovery_error(server.url)
    assert isinstance(error, AgentCardError)
    assert str(error).startswith(f"The agent card at {server.url}{CARD_PATH} is not a valid A2A agent card: ")


# -- reachability and auth ----------------------------------------------------------


def test_unreachable_endpoint() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    error = discovery_error(url)
    assert isinstance(error, AgentUnreachable)
    message = str(error)
    assert message.startswith(f"Fetching the agent card {url}{CARD_PATH} failed: cannot connect (")
    assert message.endswith("Is the agent running, and is the URL right?")


def test_card_refused_without_token(serve: Serve) -> None:
    server = serve(lambda url: bearer_app(url, "s3cret-token"))
    error = discovery_error(server.url)
    assert isinstance(error, AgentAuthError)
    assert error.status == 401
    assert str(error) == (
        f"The agent at {server.url} refused the card request with HTTP 401. "
        "Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN."
    )


def test_wrong_token_is_refused_and_never_echoed(serve: Serve) -> None:
    server = serve(lambda url: bearer_app(url, "s3cret-token"))
    error = discovery_error(server.url, token="wrong-token-123")
    assert isinstance(error, AgentAuthError)
    assert "--a2a-auth-token" in str(error)
    assert "wrong-token-123" not in str(error) and "s3cret-token" not in str(error)


def test_right_token_reaches_card_and_agent(serve: Serve) -> None:
    server = serve(lambda url: bearer_app(url, "s3cret-token"))
    card, _ = discover(server.url, token="s3cret-token")
    assert card.name == "tau2 oracle"
    session = A2ASession(A2AConfig(endpoint=server.url, auth_token="s3cret-token", timeout=10))
    try:
        reply = session.send([new_text_part("Hello")], None, None, 0).reply
    finally:
        session.close()
    assert [p.text for p in reply.parts] == [NO_MARKER]


# -- the card command ---------------------------------------------------------------


def cli() -> str:
    """The installed console script of this environment."""
    local = Path(sys.executable).parent / "tau2-a2a"
    found = str(local) if local.exists() else shutil.which("tau2-a2a")
    assert found, "tau2-a2a is not installed in this environment"
    return found


@pytest.fixture(scope="module")
def card_commands(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`tau2-a2a card` for a live 1.0 agent and for a dead URL, run side by side.

    Each run imports tau2 and litellm (seconds of CPU), so both start together.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    dead = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("TAU2_A2A_AUTH_TOKEN", None)
    cwd = tmp_path_factory.mktemp("cli")
    with BackgroundServer(a2a_app(OracleExecutor(), oracle_card(url)), port=port):
        processes = {
            name: subprocess.Popen([cli(), "card", target, "--a2a-timeout", "10"], cwd=cwd, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name, target in (("live", url), ("dead", dead))
        }
        outputs = {name: (p.communicate(timeout=120), p.returncode) for name, p in processes.items()}
    yield {"urls": {"live": url, "dead": dead}, "outputs": outputs}


def test_card_command_shows_a_1_0_agent(card_commands: dict[str, Any]) -> None:
    url = card_commands["urls"]["live"]
    (stdout, stderr), code = card_commands["outputs"]["live"]
    assert code == 0, stderr
    assert stdout.splitlines() == [
        f"Agent card of {url}: valid",
        "  name:        tau2 oracle",
        "  description: Reference agent: replays each tau2 task's golden actions over A2A.",
        "  version:     0.1.0",
        f"  interfaces:  JSONRPC {url} (A2A 1.0)",
        f"               JSONRPC {url} (A2A 0.3)",
        f"               HTTP+JSON {url} (A2A 1.0)",
        f"               HTTP+JSON {url} (A2A 0.3)",
        f"  protocol:    A2A 1.0 over JSON-RPC at {url} (what tau2 will speak with --a2a-transport auto)",
        "  streaming:   no (tau2 sends blocking requests)",
        "  auth:        none declared",
        "  skills:      tau2 oracle",
    ]


def test_card_description_of_a_0_3_agent_with_auth(serve: Serve) -> None:
    """What `tau2-a2a card` prints for a 0.3 card that declares bearer auth."""
    card_json = card_v03("", securitySchemes={"bearer": {"type": "http", "scheme": "bearer"}},
                         security=[{"bearer": []}])
    server = serve(lambda url: app_v03(url, {**card_json, "url": url}))
    card, _ = discover(server.url)
    assert describe_card(card, server.url).splitlines() == [
        f"Agent card of {server.url}: valid",
        "  name:        tau2 oracle (A2A 0.3)",
        "  description: The reference oracle behind a 0.3 card.",
        "  version:     0.3.1",
        f"  interfaces:  JSONRPC {server.url} (A2A 0.3.0)",
        f"  protocol:    A2A 0.3.0 over JSON-RPC at {server.url} (what tau2 will speak with --a2a-transport auto)",
        "  streaming:   no (tau2 sends blocking requests)",
        "  auth:        bearer",
        "  skills:      tau2 oracle",
    ]


def test_card_command_on_a_dead_url_fails_in_one_line(card_commands: dict[str, Any]) -> None:
    """A user who mistypes the URL gets one clear line, not a traceback or log noise."""
    url = card_commands["urls"]["dead"]
    (stdout, stderr), code = card_commands["outputs"]["dead"]
    assert code != 0
    assert stdout == ""
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1
    assert errors[0].startswith(f"error: Fetching the agent card {url}{CARD_PATH} failed: cannot connect (")
    assert errors[0].endswith("Is the agent running, and is the URL right?")
    assert stderr.splitlines() == errors, "stderr holds more than the error line"
