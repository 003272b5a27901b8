"""`--card-url`, AgentBeats' contract: the green agent and the oracle started as AgentBeats starts their images
(`--host 0.0.0.0 --port PORT --card-url URL`, nothing else), as real processes with no Docker.

The cards advertise the URLs given; clients that follow them (the test's A2A client to the service, the service's
to the oracle) reach the agents through them, and an assessment of the oracle completes with reward 1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from a2a.types import TaskState

from tau2_a2a.cli import build_parser
from tau2_a2a.cli.urls import advertised_urls
from tau2_a2a.errors import ConfigError
from tau2_a2a.mcp.tool_server import advertised_host
from tau2_a2a.protocol.hosting import free_port
from tests.support.assessments import assess, request, result_of
from tests.support.cli import run_cli
from tests.support.service import CLI
from tests.support.started import Started

# The image's environment (docker/Dockerfile), with loopback in place of private: the agents here are on loopback.
IMAGE_ENV = {"TAU2_EVAL_ALLOWED_TARGETS": "public,loopback", "TAU2_EVAL_MCP_HOST": "0.0.0.0",
             "LITELLM_LOCAL_MODEL_COST_MAP": "True",
             "TAU2_EVAL_EVALUATION_NICE": "0"}  # the suite's priority (tests/support/service.py, start_service)


def agentbeats_args(port: int, card_url: str) -> list[str]:
    return ["--host", "0.0.0.0", "--port", str(port), "--card-url", card_url]


def interface_urls(card: dict) -> set[str]:
    return {card["url"]} | {i["url"] for i in card["supportedInterfaces"]} | {
        i["url"] for i in card.get("additionalInterfaces", [])}


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, dict]]]:
    """The oracle and the green agent, each listening on every address and advertising another loopback one."""
    folder = tmp_path_factory.mktemp("agentbeats")
    oracle_port, green_port = free_port(), free_port()
    oracle_url, green_url = f"http://127.0.0.3:{oracle_port}", f"http://127.0.0.2:{green_port}"
    oracle = Started([CLI, "agent", "oracle", *agentbeats_args(oracle_port, oracle_url)], folder)
    green = Started([CLI, "serve", *agentbeats_args(green_port, green_url + "/")], folder,
                    env={**IMAGE_ENV, "TAU2_EVAL_RESULTS_DIR": str(folder / "results")})
    try:
        yield {"oracle": (oracle_url, oracle.card(oracle_url)), "green": (green_url, green.card(green_url))}
    finally:
        green.stop()
        oracle.stop()


@pytest.mark.parametrize("agent", ["oracle", "green"])
def test_the_card_advertises_the_card_url_not_the_wildcard(started: dict[str, tuple[str, dict]], agent: str) -> None:
    url, card = started[agent]
    assert interface_urls(card) == {url}


def test_an_assessment_through_the_advertised_urls_scores_the_oracle_1(started: dict[str, tuple[str, dict]]) -> None:
    (green_url, _), (oracle_url, _) = started["green"], started["oracle"]
    _, task = asyncio.run(assess(green_url, request(oracle_url, num_tasks=2)))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    result = result_of(task)
    assert (result["participant"], result["total_simulations"], result["avg_reward"], result["pass_hat_1"],
            result["clean"]) == (oracle_url, 2, 1.0, 1.0, True)


def test_public_url_is_the_same_argument_as_card_url() -> None:
    parse = build_parser().parse_args
    assert parse(["serve", "--public-url", "http://green:9009"]).card_url == "http://green:9009"
    assert parse(["serve", "--card-url", "http://green:9009"]).card_url == "http://green:9009"
    for kind in (["oracle"], ["llm", "--model", "m"], ["adk", "--model", "m"]):
        assert parse(["agent", *kind, "--card-url", "http://purple:9009"]).card_url == "http://purple:9009"


def test_without_card_url_a_wildcard_host_advertises_this_machines_address() -> None:
    assert advertised_urls("0.0.0.0", 9009, 9010) == (f"http://{advertised_host('0.0.0.0')}:9009",
                                                      f"{advertised_host('0.0.0.0')}:9010")
    assert advertised_urls("127.0.0.1", 9009) == ("http://127.0.0.1:9009", None)
    assert advertised_urls("::1", 9009, 9010) == ("http://[::1]:9009", "[::1]:9010")
    assert advertised_urls("0.0.0.0", 9009, 9010, "https://green.example/a2a/") == (
        "https://green.example/a2a", "green.example:9010")


LINE = ("error: --card-url must be the http(s) URL clients reach this agent at, with no user name, password or query, "
        "e.g. http://green-agent:9009; got {}.")


@pytest.mark.parametrize("url, shown", [("ftp://green:9009", "'ftp://green:9009'"),
                                        ("http://user:secret@green:9009", "'http://***@green:9009'"),
                                        ("http://green:port", "'http://green:port'"),
                                        ("green:9009", "'green:9009'"),
                                        ("http://green:9009/?token=1", "'http://green:9009/?token=1'")])
def test_a_card_url_no_client_could_use_is_refused_naming_it(url: str, shown: str) -> None:
    with pytest.raises(ConfigError) as refused:
        advertised_urls("0.0.0.0", 9009, card_url=url)
    assert f"error: {refused.value}" == LINE.format(shown)


@pytest.mark.parametrize("command", [["serve", "--public-url"], ["agent", "oracle", "--card-url"]])
def test_the_command_says_so_in_one_line_and_exits_2(command: list[str], tmp_path: Path) -> None:
    process = run_cli([*command, "http://user:secret@green:9009"], cwd=tmp_path)
    stdout, stderr = process.communicate(timeout=300)
    assert (process.returncode, stdout, stderr) == (2, "", LINE.format("'http://***@green:9009'") + "\n")

