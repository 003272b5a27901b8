"""The client over every A2A binding: JSON-RPC, HTTP+JSON and gRPC, each through a2a-sdk's own transport.

The oracle self-test runs over each binding against one server that serves all
three; every binding must score exactly what the native oracle scores, turn
for turn, and say in its metrics which binding carried each request.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tau2_a2a.client.config import A2AConfig
from tau2_a2a.client.errors import AgentAuthError, AgentUnreachable
from tau2_a2a.client.session import A2ASession
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.tau2bench.run.fidelity import trajectory_differences
from tests.support.runs import FAST, run_a2a, run_native_oracle

SUBSETS = {"airline": ["0", "1", "20"], "retail": ["0", "5"]}
BINDINGS = {"jsonrpc": "JSONRPC", "http-json": "HTTP+JSON", "grpc": "GRPC"}


@pytest.fixture(scope="module")
def every_binding() -> Iterator[BackgroundServer]:
    """The oracle serving JSON-RPC and HTTP+JSON on one port and gRPC on another."""
    port, grpc_port = free_port(), free_port()
    card = oracle_card(f"http://127.0.0.1:{port}", grpc_url=f"127.0.0.1:{grpc_port}")
    with BackgroundServer(a2a_app(OracleExecutor(), card), port=port, grpc_port=grpc_port) as server:
        yield server


@pytest.mark.parametrize("domain", sorted(SUBSETS))
def test_oracle_scores_exactly_over_every_binding(domain: str, every_binding: BackgroundServer,
                                                   tmp_path: Path) -> None:
    url, task_ids = every_binding.url, SUBSETS[domain]
    native = run_native_oracle(tmp_path / "native", domain, task_ids=task_ids)
    runs = {}
    for transport, binding in BINDINGS.items():
        outcome = run_a2a(url, tmp_path / transport, domain, task_ids=task_ids,
                          a2a=A2AConfig(endpoint=url, transport=transport, retry=FAST))
        runs[transport] = outcome.results
        assert {s.reward_info.reward for s in outcome.results.simulations} == {1.0}
        assert len(outcome.results.simulations) == len(task_ids)
        assert trajectory_differences(outcome.results, native) == [], transport
        records = [r for s in outcome.metrics["simulations"] for r in s["requests"]]
        assert {r["transport"] for r in records} == {binding}
        assert {r["protocol_version"] for r in records} == {"1.0"}
        assert {r["error"] for r in records} == {None}
        assert all(r["request_bytes"] > 0 and r["response_bytes"] > 0 for r in records)
        assert {r["grpc_status"] for r in records} == ({"OK"} if binding == "GRPC" else {None})
        assert outcome.metrics["run"]["transports"] == {binding: len(records)}
    assert trajectory_differences(runs["grpc"], runs["http-json"]) == []
    assert trajectory_differences(runs["http-json"], runs["jsonrpc"]) == []


def session_of(url: str, transport: str, token: str | None = None) -> A2ASession:
    return A2ASession(A2AConfig(endpoint=url, transport=transport, timeout=10, retry=FAST, auth_token=token))


def test_auto_takes_the_cards_first_interface(every_binding: BackgroundServer) -> None:
    session = session_of(every_binding.url, "auto")
    try:
        _ = session.card
        assert (session.binding, session.protocol_version) == ("JSONRPC", "1.0")
    finally:
        session.close()


@pytest.mark.parametrize("transport", ["http-json", "grpc"])
def test_card_naming_a_dead_url_for_the_binding_stops_before_any_simulation(transport: str, serve) -> None:
    """The card is served, but the interface of the chosen binding points where nothing listens."""
    dead_port = free_port()
    dead = f"http://127.0.0.1:{dead_port}"

    def app(url: str):
        card = oracle_card(url, grpc_url=f"127.0.0.1:{dead_port}")
        for interface in card.supported_interfaces:
            if interface.protocol_binding == "HTTP+JSON":
                interface.url = dead
        return a2a_app(OracleExecutor(), card)

    server = serve(app)
    session = session_of(server.url, transport)
    try:
        with pytest.raises(AgentUnreachable) as caught:
            _ = session.card
    finally:
        session.close()
    where = dead if transport == "http-json" else f"127.0.0.1:{dead_port}"
    readable = {"http-json": "HTTP+JSON", "grpc": "gRPC"}[transport]
    message = str(caught.value)
    assert message.startswith(f"The agent card at {server.url} names {where} for {readable}, but nothing answers "
                              "there (")
    assert message.endswith("Fix the url in the agent's card, or start the agent there.")


@pytest.fixture(scope="module")
def guarded_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundServer]:
    """The evaluation service with a bearer token, on every binding."""
    from tau2_a2a.service.app import build_app
    from tau2_a2a.service.settings import ServiceSettings

    port, grpc_port = free_port(), free_port()
    settings = ServiceSettings(results_dir=tmp_path_factory.mktemp("guarded"), auth_token="right-token")
    app = build_app(settings, f"http://127.0.0.1:{port}", grpc_url=f"127.0.0.1:{grpc_port}")
    with BackgroundServer(app, port=port, grpc_port=grpc_port) as server:
        yield server


@pytest.mark.parametrize("transport", sorted(BINDINGS))
def test_wrong_token_is_caught_by_the_access_check_on_every_binding(transport: str,
                                                                     guarded_service: BackgroundServer) -> None:
    session = session_of(guarded_service.url, transport, token="wrong-token")
    try:
        with pytest.raises(AgentAuthError) as caught:
            _ = session.card
    finally:
        session.close()
    assert "wrong-token" not in str(caught.value)
    assert str(caught.value).endswith("Pass a valid bearer token with --a2a-auth-token or TAU2_A2A_AUTH_TOKEN.")
    right = session_of(guarded_service.url, transport, token="right-token")
    try:
        _ = right.card  # the same check passes with the right token
        assert right.binding == BINDINGS[transport]
    finally:
        right.close()


@pytest.mark.parametrize(("code", "category", "retryable"), [
    ("UNAVAILABLE", "connection", True),
    ("DEADLINE_EXCEEDED", "timeout", True),
    ("UNAUTHENTICATED", "auth", False),
    ("PERMISSION_DENIED", "auth", False),
    ("RESOURCE_EXHAUSTED", "http", True),
    ("INTERNAL", "http", True),
    ("INVALID_ARGUMENT", "protocol", False),
])
def test_grpc_status_codes_map_to_the_categories_http_statuses_get(code: str, category: str,
                                                                    retryable: bool) -> None:
    """As a2a-sdk's gRPC transport raises them: its own error, caused by grpc's AioRpcError."""
    import grpc
    from a2a.client.errors import A2AClientError

    from tau2_a2a.client.failures import classify, grpc_status

    rpc = grpc.aio.AioRpcError(getattr(grpc.StatusCode, code), grpc.aio.Metadata(), grpc.aio.Metadata(),
                               details="said by the agent, with token s3cret")
    try:
        raise A2AClientError(f"gRPC Error {code}") from rpc
    except A2AClientError as raised:
        failure = classify(raised, None, "s3cret", "SendMessage to grpc-agent")
        assert grpc_status(raised) == code
    assert (failure.category.value, failure.retryable) == (category, retryable)
    assert "s3cret" not in str(failure)
    assert str(failure).startswith("SendMessage to grpc-agent")
