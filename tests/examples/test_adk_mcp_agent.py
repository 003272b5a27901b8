"""examples/adk_mcp_agent under google-adk's own `adk api_server --a2a`, as a user serves it.

An ADK LlmAgent whose tools are ADK's McpToolset on tau2-a2a's MCP server, the
stand-in LLM playing the model over OpenAI function calling through LiteLLM.
Scored exactly, in both ways the agent finds its tools: per-conversation
tokens at a URL named beforehand (three simulations at a time), and one fixed
URL with an unmodified agent (one at a time).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tau2_a2a.client.config import A2AConfig, McpServing
from tau2_a2a.protocol.hosting import free_port, wait_for_card
from testbed.standin_llm import MODEL, StandinLLM
from tests.support.golden import golden_calls, rewards, trajectory_calls
from tests.support.paths import REPO
from tests.support.runs import FAST, run_a2a

EXAMPLE_APP = REPO / "examples" / "adk_mcp_agent"
TASKS = ["3", "7", "8"]  # a read, a cancellation, a booking


@pytest.mark.parametrize("fixed", [False, True], ids=["per-conversation-tokens", "fixed-url"])
def test_adk_api_server_serves_the_mcp_example_app(serve, tmp_path, fixed):
    standin = StandinLLM.serve(serve)
    port, mcp_port = free_port(), free_port()
    url, mcp_url = f"http://127.0.0.1:{port}/a2a/adk_mcp_agent", f"http://127.0.0.1:{mcp_port}/mcp"
    app = tmp_path / "agents" / "adk_mcp_agent"
    shutil.copytree(EXAMPLE_APP, app, ignore=shutil.ignore_patterns("__pycache__"))
    card = app / "agent.json"
    card.write_text(card.read_text().replace("http://127.0.0.1:8000", f"http://127.0.0.1:{port}"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TAU2_ADK_MODEL": MODEL,
           "TAU2_ADK_API_BASE": standin.api_base, "OPENAI_API_KEY": "standin-key", "TAU2_MCP_URL": mcp_url,
           "TAU2_MCP_FIXED": "1" if fixed else ""}
    log = (tmp_path / "adk.log").open("w")
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("adk")), "api_server", "--a2a", "--port", str(port),
         "--session_service_uri", "memory://", str(app.parent)],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
    )
    try:
        wait_for_card(url, server, timeout=120)
        # The run tells agents a URL that leads nowhere: ADK reaches its tools by the one it was configured with.
        serving = McpServing(port=mcp_port, fixed=fixed, public_url=f"http://mcp.invalid:{mcp_port}/mcp")
        outcome = run_a2a(url, tmp_path / "run", task_ids=TASKS, max_concurrency=1 if fixed else 3,
                          a2a=A2AConfig(endpoint=url, retry=FAST, tools="auto", mcp=serving))
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    assert "failed to load" not in (tmp_path / "adk.log").read_text()  # ADK would run on without its MCP tools
    golden = golden_calls("airline", TASKS)
    assert rewards(outcome) == dict.fromkeys(TASKS, 1.0)
    assert trajectory_calls(outcome) == golden
    assert outcome.results.info.agent_info.llm_args["a2a_tools_used"] == "mcp"  # agent.json's extension asked
    assert len(standin.requests) == sum(len(calls) + 1 for calls in golden.values())
    calls = [r for s in outcome.report["simulations"] for r in s.get("mcp", {}).get("requests", [])
             if r["method"] == "tools/call"]
    assert len(calls) == sum(len(c) for c in golden.values())
    assert {r["error"] for r in calls} == {None}
