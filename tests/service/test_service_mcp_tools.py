"""The service evaluates agents that take their tools over MCP: a caller asks for the mode (`agent_tools`,
`agent_driven`), the operator says where the tools are served (`mcp_host`, `mcp_public_host`). Real service,
real oracle agent with the official MCP client, real tau2 runs in the evaluation's process."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tau2_a2a.client.targets import TargetPolicy
from tau2_a2a.protocol.hosting import BackgroundServer, a2a_app, free_port
from tau2_a2a.reference.oracle_agent import OracleExecutor, oracle_card
from tau2_a2a.service.argument_policy import ArgumentRefused
from tau2_a2a.service.assessment import AssessmentRejected, parse
from tau2_a2a.service.jobs.directory import results_file
from tau2_a2a.service.request import RequestPolicy, check_request
from tau2_a2a.service.tool_specs import tool_specs
from tests.support.runs import saved_simulations
from tests.support.service import ask, result_data, start_service

RUN = "run_tau2_evaluation"
TASKS = ["0", "1", "2"]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundServer]:
    """The operator serves MCP tools on loopback and tells agents the host name `localhost`."""
    server = start_service(tmp_path_factory.mktemp("service"), mcp_public_host="localhost")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def mcp_oracle() -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with BackgroundServer(a2a_app(OracleExecutor(), oracle_card(url, mcp_tools=True)), port=port):
        yield url


def mcp_endpoints(simulations: list[dict[str, Any]]) -> set[str]:
    return {record["endpoint"] for simulation in simulations for message in simulation["messages"]
            for record in ((message.get("raw_data") or {}).get("a2a") or {}).get("mcp_requests", [])}


@pytest.mark.parametrize("mode", [{"agent_tools": "mcp"}, {"agent_tools": "auto"}, {"agent_driven": True}],
                         ids=["mcp", "auto", "agent-driven"])
def test_the_service_evaluates_an_agent_over_mcp_where_the_operator_serves_the_tools(
        mode: dict[str, Any], service: BackgroundServer, mcp_oracle: str, tmp_path: Path) -> None:
    arguments = {"domain": "airline", "agent_endpoint": mcp_oracle, "user": "scripted_user",
                 "user_llm": "scripted", "task_ids": TASKS, **mode}
    task = asyncio.run(ask(service.url, RUN, arguments))
    data = result_data(task)
    assert data["status"] == "completed", data
    assert [(t["task_id"], t["rewards"]) for t in data["result"]["tasks"]] == [(t, [1.0]) for t in TASKS]
    assert {key: data["request"][key] for key in mode} == mode  # the Result says how the tools travelled
    simulations = saved_simulations(results_file(Path(service.app.state.tools.manager.root) / data["evaluation_id"]))
    endpoints = mcp_endpoints(simulations or [])
    assert endpoints and all(url.startswith("http://localhost:") for url in endpoints)  # the operator's host


def test_the_message_mode_stays_the_default(service: BackgroundServer, oracle_url: str) -> None:
    task = asyncio.run(ask(service.url, RUN, {"domain": "airline", "agent_endpoint": oracle_url,
                                              "user": "scripted_user", "user_llm": "scripted", "task_ids": ["0"]}))
    data = result_data(task)
    assert data["status"] == "completed" and data["result"]["tasks"][0]["rewards"] == [1.0]
    assert (data["request"]["agent_tools"], data["request"]["agent_driven"]) == ("message", False)
    simulations = saved_simulations(results_file(Path(service.app.state.tools.manager.root) / data["evaluation_id"]))
    assert mcp_endpoints(simulations or []) == set()


@pytest.mark.parametrize("arguments, refusal", [
    ({"agent_tools": "grpc"}, "agent_tools must be one of message, mcp, auto, got 'grpc'."),
    ({"agent_driven": "yes"}, "agent_driven must be true or false, got 'yes'."),
])
def test_a_bad_tools_mode_is_refused_in_one_line(arguments: dict[str, Any], refusal: str) -> None:
    sent = {"domain": "airline", "agent_endpoint": "http://127.0.0.1:9", **arguments}
    with pytest.raises(ArgumentRefused) as refused:
        check_request(sent, RequestPolicy(targets=TargetPolicy.from_entries(("loopback",))))
    assert str(refused.value) == refusal


def test_the_card_offers_the_modes_and_no_place_for_the_tools() -> None:
    """A caller picks the mode; where the tools are served is the operator's alone."""
    run = tool_specs()[RUN]
    properties = run.parameters["properties"]
    assert properties["agent_tools"]["enum"] == ["message", "mcp", "auto"]
    assert properties["agent_driven"]["type"] == "boolean"
    assert not [name for name in properties if "mcp" in name or "host" in name or "port" in name]


def test_an_agentbeats_assessment_asks_for_the_mode_in_its_config() -> None:
    request = {"participants": {"agent": "https://agent.example"},
               "config": {"domain": "airline", "agent_driven": True, "agent_tools": "mcp"}}
    assessment = parse(request)
    assert (assessment.arguments["agent_tools"], assessment.arguments["agent_driven"]) == ("mcp", True)
    with pytest.raises(AssessmentRejected) as rejected:
        parse({**request, "config": {"domain": "airline", "agent_driven": "true"}})
    assert str(rejected.value) == ("config.agent_driven must be true or false: the agent drives the conversation "
                                   "over MCP (default false); got \"true\".")
