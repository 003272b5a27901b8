"""A real a2a-sdk 0.3.22 client (its own virtualenv) discovers each of our servers and completes a request.

It runs as AgentBeats' gateway does: card from A2ACardResolver, ClientFactory,
streaming on, status updates followed, results collected from the final task.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app
from tau2_a2a.protocol.messages import conversation_start, user_turn
from tau2_a2a.reference.llm_agent import LLMExecutor, llm_agent_card
from tau2_a2a.reference.oracle_agent import NO_MARKER
from tau2_a2a.tau2bench.participants.oracle_script import oracle_steps
from testbed.standin_llm import MODEL, StandinLLM
from tests.support.service import SERVICE_TOKEN

Sdk03 = Callable[..., dict[str, Any]]


def assert_read_as_0_3(result: dict[str, Any], url: str, grpc_url: str | None = None) -> None:
    """A 0.3 client answered, and read the 0.3 fields of our card: JSON-RPC first, then the others."""
    assert "error" not in result, result["error"]
    assert result["sdk_version"].startswith("0.3.")
    card = result["card"]
    assert (card["url"], card["preferred_transport"], card["protocol_version"]) == (url, "JSONRPC", "0.3")
    expected = [{"transport": "HTTP+JSON", "url": url}] + ([{"transport": "GRPC", "url": grpc_url}]
                                                           if grpc_url else [])
    assert card["additional_interfaces"] == expected


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
def test_oracle_answers_a_0_3_client(sdk03: Sdk03, oracle_all_bindings: BackgroundServer, transport: str) -> None:
    server = oracle_all_bindings
    result = sdk03(server.url, text="hello", transport=transport)
    assert_read_as_0_3(result, server.url, server.grpc_url)
    assert result["transport"] == transport
    assert result["final"] == {"kind": "message", "text": [NO_MARKER], "results": []}


def test_llm_agent_answers_a_0_3_client(sdk03: Sdk03, serve: Callable[..., BackgroundServer]) -> None:
    standin = StandinLLM.serve(serve)
    executor = LLMExecutor(MODEL, {"api_base": standin.api_base, "api_key": "standin-key"})
    server = serve(lambda url: a2a_app(executor, llm_agent_card(url, MODEL)))
    start = conversation_start("You are a test agent.", [], user_turn("Hi. [tau2-task domain=airline id=1]"), [])
    parts = [{"kind": p.WhichOneof("content"), **MessageToDict(p)} for p in start]  # 1.0 parts, as 0.3 JSON
    result = sdk03(server.url, parts=parts)
    assert_read_as_0_3(result, server.url)
    first = oracle_steps("airline", "1")[0]  # get_user_details: the stand-in asks for the task's first action
    assert result["final"]["kind"] == "message"
    [call] = result["final"]["results"][0]["tool_calls"]
    assert (call["name"], json.loads(call["arguments"])) == (first.tool_name, first.arguments)
    assert standin.requests, "the agent asked the stand-in LLM"


def test_service_lists_domains_for_a_0_3_client(sdk03: Sdk03, service_all_bindings: BackgroundServer) -> None:
    server = service_all_bindings
    result = sdk03(server.url, data={"tool": "list_domains", "arguments": {}}, token=SERVICE_TOKEN)
    assert_read_as_0_3(result, server.url, server.grpc_url)
    final = result["final"]
    assert final["kind"] == "message"  # a read-only call: answered with a Message, no task kept
    domains = [d["domain"] for d in final["results"][-1]["domains"]]
    assert "airline" in domains and "retail" in domains


def test_service_evaluates_the_oracle_for_a_0_3_client(sdk03: Sdk03, service_all_bindings: BackgroundServer,
                                                      oracle_url: str) -> None:
    """AgentBeats' path: message/stream, progress as status updates, the metrics in the final task's artifact."""
    arguments = {"domain": "airline", "agent_endpoint": oracle_url, "user": "scripted_user",
                 "user_llm": "scripted", "task_ids": ["0", "1"]}
    result = sdk03(service_all_bindings.url, data={"tool": "run_tau2_evaluation", "arguments": arguments},
                   token=SERVICE_TOKEN)
    assert "error" not in result, result["error"]
    assert "status-update" in result["events"] and "working" in result["states"]
    final = result["final"]
    assert final["kind"] == "task" and final["state"] == "completed", final
    data = final["results"][-1]
    assert data["status"] == "completed"
    assert data["result"]["metrics"]["avg_reward"] == 1.0 and data["result"]["metrics"]["num_simulations"] == 2


def test_a_0_3_client_without_the_token_is_refused(sdk03: Sdk03, service_all_bindings: BackgroundServer) -> None:
    result = sdk03(service_all_bindings.url, data={"tool": "list_domains", "arguments": {}})
    assert "401" in result["error"] and SERVICE_TOKEN not in result["error"]
