"""examples/adk_mcp_agent under google-adk's own `adk api_server --a2a`, as a user serves it.

An ADK LlmAgent whose tools are ADK's McpToolset on tau2-a2a's MCP server, the
stand-in LLM playing the model over OpenAI function calling through LiteLLM.
Scored exactly, in both ways the agent finds its tools: per-conversation
tokens at a URL named beforehand (three simulations at a time), and one fixed
URL with an unmodified agent (one at a time).
"""

from __future__ import annotations

import pytest

from tau2_a2a.client.config import A2AConfig, McpServing
from tau2_a2a.protocol.hosting import free_port
from testbed.standin_llm import StandinLLM
from tests.support.adk_apps import adk_api_server
from tests.support.golden import golden_calls, rewards, trajectory_calls
from tests.support.runs import FAST, run_a2a

TASKS = ["3", "7", "8"]  # a read, a cancellation, a booking


@pytest.mark.parametrize("fixed", [False, True], ids=["per-conversation-tokens", "fixed-url"])
def test_adk_api_server_serves_the_mcp_example_app(serve, tmp_path, fixed):
    standin = StandinLLM.serve(serve)
    mcp_port = free_port()
    mcp_url = f"http://127.0.0.1:{mcp_port}/mcp"
    with adk_api_server("adk_mcp_agent", standin.api_base, tmp_path, TAU2_MCP_URL=mcp_url,
                        TAU2_MCP_FIXED="1" if fixed else "") as url:
        # The run tells agents a URL that leads nowhere: ADK reaches its tools by the one it was configured with.
        serving = McpServing(port=mcp_port, fixed=fixed, public_url=f"http://mcp.invalid:{mcp_port}/mcp")
        outcome = run_a2a(url, tmp_path / "run", task_ids=TASKS, max_concurrency=1 if fixed else 3,
                          a2a=A2AConfig(endpoint=url, retry=FAST, tools="auto", mcp=serving))
    assert "failed to load" not in (tmp_path / "adk.log").read_text()  # ADK would run on without its MCP tools
    golden = golden_calls("airline", TASKS)
    assert rewards(outcome) == dict.fromkeys(TASKS, 1.0)
    assert trajectory_calls(outcome) == golden
    assert outcome.results.info.agent_info.llm_args["a2a_tools_used"] == "mcp"  # agent.json's extension asked
    assert len(standin.requests) == sum(len(calls) + 1 for calls in golden.values())
    calls = [r for s in outcome.metrics["simulations"] for r in s.get("mcp", {}).get("requests", [])
             if r["method"] == "tools/call"]
    assert len(calls) == sum(len(c) for c in golden.values())
    assert {r["error"] for r in calls} == {None}
