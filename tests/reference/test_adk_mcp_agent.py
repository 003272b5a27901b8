"""An ordinary ADK LlmAgent whose tools are ADK's own McpToolset, run by ADK's own A2A executor, scored over MCP.

The stand-in LLM plays the model by OpenAI function calling, so ADK runs its own
tool loop unchanged: it lists the run's MCP tools, calls them through McpToolset,
and answers the user in text. In the message mode this agent had no way to run
tau2's tools and looped; over MCP it scores every task.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tau2_a2a.client.config import A2AConfig, McpServing
from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.reference.adk_agent import adk_app
from tau2_a2a.tau2bench.participants.oracle_script import oracle_steps
from testbed.standin_llm import MODEL, StandinLLM
from tests.reference.test_adk_agent import golden_calls, trajectory_calls
from tests.support.runs import FAST, Serve, run_a2a

TASKS = [str(n) for n in range(10)]


@pytest.mark.parametrize(("way", "concurrency"), [("token", 3), ("fixed", 1), ("driven", 2)])
def test_an_adk_agent_with_mcptoolset_scores_every_task(way: str, concurrency: int, serve: Serve,
                                                        tmp_path: Path) -> None:
    standin = StandinLLM.serve(serve)
    mcp_port = free_port()
    agent = serve(lambda url: adk_app(MODEL, url, standin.api_base, {"api_key": "standin-key", "temperature": 0.0},
                                      mcp_url=f"http://127.0.0.1:{mcp_port}/mcp", mcp_fixed=way == "fixed"))

    outcome = run_a2a(agent.url, tmp_path, "airline", task_ids=TASKS, max_concurrency=concurrency, a2a=A2AConfig(
        endpoint=agent.url, retry=FAST, tools="auto", driven=way == "driven",
        mcp=McpServing(port=mcp_port, fixed=way == "fixed")))

    assert {s.task_id: s.reward_info.reward for s in outcome.results.simulations} == dict.fromkeys(TASKS, 1.0)
    assert trajectory_calls(outcome) == golden_calls("airline", TASKS)
    assert outcome.results.info.agent_info.llm_args["a2a_tools_used"] == ("driven" if way == "driven" else "mcp")
    # Every model call saw the domain's tools as MCP listed them (and, driven, the user's tool); none came as text.
    # Agent-driven, the model stopped once send_message_to_user said the user had ended the conversation.
    golden = golden_calls("airline", TASKS)
    texts = {task_id: len([s for s in oracle_steps("airline", task_id) if s.tool_name is None]) for task_id in TASKS}
    assert len(standin.requests) == sum(len(golden[t]) + texts[t] + (1 if way == "driven" else 0) for t in TASKS)
    for body in standin.requests:
        names = {tool["function"]["name"] for tool in body["tools"]}
        assert "get_user_details" in names and ("send_message_to_user" in names) == (way == "driven")
