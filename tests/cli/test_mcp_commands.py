"""The MCP tools modes as a user types them: `tau2-a2a agent ... --tools mcp` and `tau2-a2a run --a2a-tools auto`,
`--a2a-driven`, the MCP server's flags, and the settings no run can use, refused in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from tau2.data_model.simulation import Results

from tau2_a2a.cli import main
from tau2_a2a.protocol.cards import MCP_TOOLS_EXTENSION
from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.tau2bench.run.layout import results_path
from testbed.standin_llm import MODEL, StandinLLM
from tests.cli.test_commands import agent_process, finish, run_args  # noqa: F401  (agent_process: a fixture)
from tests.support.cli import run_cli


def results_of(results_dir: Path) -> Results:
    return Results.load(results_path("run", results_dir))


def test_the_oracle_declares_mcp_tools_and_a_run_gives_them_so(agent_process: Any, tmp_path: Path) -> None:
    tools = ["--a2a-tools", "auto"]
    url, _ = agent_process(["oracle", "--tools", "mcp"])
    card = httpx.get(f"{url}/.well-known/agent-card.json", timeout=30).json()
    assert {"uri": MCP_TOOLS_EXTENSION, "description": "Give this agent the domain's tools over MCP "
            "(docs/protocol.md).", "required": False} in card["capabilities"]["extensions"]

    code, stdout, stderr = finish(run_cli(run_args(url, tmp_path, "--task-ids", "0", "1", *tools)))

    assert code == 0, stderr[-2000:]
    assert ("driving the conversation over MCP" if "--a2a-driven" in tools else "tools over MCP") in stdout
    results = results_of(tmp_path)
    assert sorted((s.task_id, s.reward_info.reward) for s in results.simulations) == [("0", 1.0), ("1", 1.0)]
    assert results.info.agent_info.llm_args["a2a_tools_used"] == ("driven" if "--a2a-driven" in tools else "mcp")


def test_the_baseline_agent_over_mcp_from_the_command_line(agent_process: Any, serve: Any, tmp_path: Path) -> None:
    llm = StandinLLM.serve(serve)
    url, _ = agent_process(["llm", "--model", MODEL, "--api-base", llm.api_base, "--api-key-env", "STANDIN_KEY",
                            "--tools", "mcp"], env={"STANDIN_KEY": "standin-agent-key"})
    code, _, stderr = finish(run_cli(run_args(url, tmp_path, "--task-ids", "1", "3", "--a2a-tools", "auto",
                                              "--a2a-mcp-host", "127.0.0.1")))
    assert code == 0, stderr[-2000:]
    assert {s.task_id: s.reward_info.reward for s in results_of(tmp_path).simulations} == {"1": 1.0, "3": 1.0}


def test_an_adk_agent_configured_with_the_fixed_url(serve: Any, tmp_path: Path) -> None:
    """`agent adk --mcp-url URL --mcp-fixed` and `run --a2a-mcp-fixed --a2a-mcp-port PORT`, as the docs say."""
    from tau2_a2a.protocol.hosting import wait_for_card

    llm = StandinLLM.serve(serve)
    port, mcp_port = free_port(), free_port()
    agent = run_cli(["agent", "adk", "--model", MODEL, "--api-base", llm.api_base, "--api-key-env", "STANDIN_KEY",
                     "--port", str(port), "--mcp-url", f"http://127.0.0.1:{mcp_port}/mcp", "--mcp-fixed"],
                    env={"STANDIN_KEY": "standin-agent-key"})
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_card(url, agent)
        code, _, stderr = finish(run_cli(run_args(url, tmp_path, "--task-ids", "0", "3", "--a2a-tools", "mcp",
                                                  "--a2a-mcp-fixed", "--a2a-mcp-port", str(mcp_port),
                                                  "--max-concurrency", "1")))
    finally:
        agent.terminate()
        agent.communicate(timeout=30)
    assert code == 0, stderr[-2000:]
    assert {s.task_id: s.reward_info.reward for s in results_of(tmp_path).simulations} == {"0": 1.0, "3": 1.0}


@pytest.mark.parametrize(("flags", "says"), [
    (["--a2a-driven", "--a2a-tools", "message"], "--a2a-driven gives the agent its tools and the user over MCP"),
    (["--a2a-tools", "mcp", "--a2a-mcp-fixed"], "--a2a-mcp-fixed serves the tools at one URL"),
    (["--a2a-mcp-fixed", "--a2a-mcp-port", "8931", "--max-concurrency", "3"], "run with --max-concurrency 1"),
    (["--a2a-tools", "mcp", "--a2a-mcp-port", "8931", "--ray", "local"], "leave out --a2a-mcp-port"),
    (["--a2a-tools", "mcp", "--a2a-mcp-port", "70000"], "--a2a-mcp-port must be a TCP port"),
    (["--a2a-tools", "mcp", "--a2a-mcp-public-url", "ftp://tau2/mcp"], "--a2a-mcp-public-url must be an http(s)"),
    (["--a2a-tools", "mcp", "--a2a-mcp-public-url", "http://user:pw@tau2:8931/mcp"], "without credentials"),
    (["--a2a-tools", "mcp", "--a2a-mcp-fixed", "--a2a-mcp-host", "0.0.0.0", "--a2a-mcp-port", "8931",
      "--max-concurrency", "1"], "with no token: configure your agent with a bearer token and pass --a2a-mcp-token-env"),
    (["--a2a-tools", "mcp", "--a2a-mcp-fixed", "--a2a-mcp-host", "0.0.0.0", "--a2a-mcp-port", "8931",
      "--a2a-mcp-token-env", "TAU2_TEST_UNSET_TOKEN", "--max-concurrency", "1"], "TAU2_TEST_UNSET_TOKEN is unset"),
    (["--a2a-tools", "mcp", "--a2a-mcp-max-connections", "0"], "--a2a-mcp-max-connections must be a whole number"),
    (["--a2a-tools", "mcp", "--a2a-mcp-read-timeout", "nan"], "--a2a-mcp-read-timeout must be a number of seconds"),
    (["--a2a-max-mcp-requests", "0"], "--a2a-max-mcp-requests must be a whole number"),
    (["--a2a-max-agent-bytes", "-5"], "--a2a-max-agent-bytes must be a whole number"),
])
def test_settings_no_run_can_use_are_refused_in_one_line(flags: list[str], says: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code = main(run_args("http://127.0.0.1:9", tmp_path, "--task-ids", "0", *flags))
    stdout, stderr = capsys.readouterr()
    assert code == 2
    assert says in stderr and len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert "pw" not in stderr + stdout
    assert not list(tmp_path.glob("*.json"))
