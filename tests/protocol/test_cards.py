"""Our cards declare every binding for A2A 1.0 and 0.3, and a 1.x client completes a request over each.

Real servers on loopback (the oracle and the evaluation service, each with
its gRPC server), the a2a-sdk 1.x client. The 0.3 client is in
test_sdk03_client.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.types import AgentCard, Message, SendMessageRequest

from tau2_a2a.cli import main as cli_main
from tau2_a2a.protocol.cards import agent_card, card_json, interfaces
from tau2_a2a.protocol.hosting import BackgroundServer
from tau2_a2a.reference.oracle_agent import NO_MARKER
from tau2_a2a.service.caller import request_message, result_data
from tau2_a2a.tau2bench.seam.distribution import DISTRIBUTION, UPSTREAM
from tests.support.distributions import structured, with_installed_tau2
from tests.support.paths import REPO
from tests.support.service import SERVICE_TOKEN

BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]
ALL = [("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"), ("HTTP+JSON", "0.3"), ("GRPC", "1.0"),
       ("GRPC", "0.3")]


def declared(card: AgentCard | dict[str, Any]) -> list[tuple[str, str, str]]:
    if isinstance(card, dict):
        return [(i["protocolBinding"], i["protocolVersion"], i["url"]) for i in card["supportedInterfaces"]]
    return [(i.protocol_binding, i.protocol_version, i.url) for i in card.supported_interfaces]


async def fetch_card(url: str) -> AgentCard:
    async with httpx.AsyncClient(timeout=30) as http:  # no token: the card is public
        return await A2ACardResolver(http, url).get_agent_card()


async def send(card: AgentCard, binding: str, message: Message, token: str | None = None) -> Any:
    """One blocking send with the a2a-sdk 1.x client over `binding`; the last event."""
    config = ClientConfig(streaming=False, supported_protocol_bindings=[binding],
                          grpc_channel_factory=grpc.aio.insecure_channel)
    client = ClientFactory(config).create(card)
    context = ClientCallContext(timeout=120, service_parameters={"Authorization": f"Bearer {token}"} if token else None)
    try:
        return [event async for event in client.send_message(SendMessageRequest(message=message), context=context)][-1]
    finally:
        await client.close()


# -- the cards ------------------------------------------------------------------------------


def test_interfaces_are_json_rpc_first_each_for_1_0_then_0_3() -> None:
    url, grpc_url = "http://agent.example:9100", "agent.example:50051"
    assert [(b, v, u) for b, v, u in declared(agent_card("a", "d", url, grpc_url=grpc_url))] == [
        (binding, version, grpc_url if binding == "GRPC" else url) for binding, version in ALL]
    assert [(i.protocol_binding, i.protocol_version) for i in interfaces(url)] == ALL[:4]
    assert [(i.protocol_binding, i.protocol_version) for i in interfaces(url, http_bindings=("JSONRPC",))] == ALL[:2]


def test_served_card_lists_every_interface_for_both_versions(oracle_all_bindings: BackgroundServer) -> None:
    server = oracle_all_bindings
    served = httpx.get(f"{server.url}/.well-known/agent-card.json").json()
    assert declared(served) == [(b, v, server.grpc_url if b == "GRPC" else server.url) for b, v in ALL]
    # The 0.3 fields, for 0.3 clients: JSON-RPC preferred, the other bindings beside it.
    assert (served["url"], served["preferredTransport"], served["protocolVersion"]) == (server.url, "JSONRPC", "0.3")
    assert served["additionalInterfaces"] == [{"transport": "HTTP+JSON", "url": server.url},
                                              {"transport": "GRPC", "url": server.grpc_url}]
    assert httpx.get(f"{server.url}/.well-known/agent.json").json() == served  # the older path too


def test_service_card_declares_grpc_and_no_secret(service_all_bindings: BackgroundServer) -> None:
    server = service_all_bindings
    response = httpx.get(f"{server.url}/.well-known/agent-card.json")  # public: no token
    assert response.status_code == 200 and SERVICE_TOKEN not in response.text
    assert declared(response.json()) == [(b, v, server.grpc_url if b == "GRPC" else server.url) for b, v in ALL]
    assert response.json()["preferredTransport"] == "JSONRPC"


@pytest.mark.nvidia
def test_adk_card_is_what_write_card_makes_json_rpc_only(tmp_path: Path) -> None:
    committed = json.loads((REPO / "adk_agents" / "tau2_eval" / "agent.json").read_text())
    url = committed["url"]
    assert url.endswith("/a2a/tau2_eval")
    written = tmp_path / "agent.json"
    assert cli_main(["serve", "--write-card", str(written), "--public-url", url]) == 0
    generated = json.loads(written.read_text())
    assert with_installed_tau2(committed) == structured(generated)
    if DISTRIBUTION == UPSTREAM:  # the card is generated on the default distribution: there it is the same JSON
        assert written.read_text() == (REPO / "adk_agents" / "tau2_eval" / "agent.json").read_text()
    assert declared(committed) == [("JSONRPC", "1.0", url), ("JSONRPC", "0.3", url)]
    assert committed["preferredTransport"] == "JSONRPC" and "additionalInterfaces" not in committed
    assert card_json(agent_card("a", "d", url, http_bindings=("JSONRPC",)))["protocolVersion"] == "0.3"


# -- the 1.x client over each binding ------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_oracle_answers_over_each_binding(oracle_all_bindings: BackgroundServer, binding: str) -> None:
    card = await fetch_card(oracle_all_bindings.url)
    event = await send(card, binding, request_message(text="hello"))
    assert [part.text for part in event.message.parts] == [NO_MARKER]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_service_answers_over_each_binding_with_the_token(service_all_bindings: BackgroundServer,
                                                                binding: str) -> None:
    card = await fetch_card(service_all_bindings.url)
    event = await send(card, binding, request_message("list_domains"), token=SERVICE_TOKEN)
    assert event.WhichOneof("payload") == "message"  # a read-only call: a Message, no task kept
    assert "airline" in {d["domain"] for d in result_data(event.message)["domains"]}


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("token", [None, "wrong-token"])
async def test_service_refuses_a_missing_or_wrong_token_on_each_binding(
        service_all_bindings: BackgroundServer, binding: str, token: str | None) -> None:
    card = await fetch_card(service_all_bindings.url)
    with pytest.raises(Exception) as refused:
        await send(card, binding, request_message("list_domains"), token=token)
    reason = str(refused.value)
    assert ("UNAUTHENTICATED" if binding == "GRPC" else "401") in reason, reason
    assert SERVICE_TOKEN not in reason and "Traceback" not in reason
