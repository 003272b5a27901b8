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
from tau2_a2a.client.pricing import price_tokens
from tau2_a2a.protocol.hosting import free_port
from tau2_a2a.reference.adk_agent import adk_app
from tau2_a2a.runner.outcome import format_summary
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


PRICE_MODEL = "gpt-4.1-2025-04-14"


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
def test_adk_over_mcp_counts_every_llm_call_or_says_it_cannot(streaming: bool, serve: Serve, tmp_path: Path) -> None:
    """A turn over MCP makes several LLM calls (one per tool call, then the text). Streamed, each call's usage
    arrives on its own event: the run counts the stand-in's tokens exactly. Blocking, the Task keeps only the last
    call's: those replies say they are partial, their cost is unknown (its lower bound kept apart), and the run's
    usage reads "at least"."""
    standin = StandinLLM.serve(serve)
    mcp_port = free_port()
    agent = serve(lambda url: adk_app(MODEL, url, standin.api_base, {"api_key": "standin-key", "temperature": 0.0},
                                      mcp_url=f"http://127.0.0.1:{mcp_port}/mcp"))
    tasks = ["1", "3"]

    outcome = run_a2a(agent.url, tmp_path, "airline", task_ids=tasks, max_concurrency=1, a2a=A2AConfig(
        endpoint=agent.url, retry=FAST, tools="auto", streaming=streaming, price_model=PRICE_MODEL,
        mcp=McpServing(port=mcp_port)))

    assert {s.task_id: s.reward_info.reward for s in outcome.results.simulations} == dict.fromkeys(tasks, 1.0)
    served = [(u["prompt_tokens"], u["completion_tokens"]) for u in standin.usages]
    replies = [m for s in outcome.results.simulations for m in s.messages if m.role == "assistant" and m.usage]
    partial = [m for m in replies if m.usage.get("partial")]
    usage = outcome.metrics["run"]["agent_usage"]
    summary = format_summary(outcome.metrics).splitlines()
    assert len(replies) == usage["replies_with_usage"] == usage["replies"]
    if streaming:
        assert sum(m.usage["llm_calls"] for m in replies) == len(served) > len(replies)
        assert (usage["input"], usage["output"]) == tuple(map(sum, zip(*served)))
        assert usage["replies_with_partial_usage"] == 0 and not partial
        spent = sum(price_tokens(PRICE_MODEL, p, c) for p, c in served)
        assert sum(s.agent_cost for s in outcome.results.simulations) == pytest.approx(spent, rel=1e-9)
        assert f"  agent's reported LLM usage, tokens: in {usage['input']}   out {usage['output']}" in summary
        return
    # Blocking: a reply whose turn made one LLM call is whole; one that made several is partial, never whole-looking.
    assert partial and usage["replies_with_partial_usage"] == len(partial)
    assert usage["input"] < sum(p for p, _ in served)
    for message in replies:
        assert (message.usage["prompt_tokens"], message.usage["completion_tokens"]) in served
    for message in partial:
        assert message.cost is None
        assert message.usage["cost_at_least"] == pytest.approx(price_tokens(
            PRICE_MODEL, message.usage["prompt_tokens"], message.usage["completion_tokens"]), rel=1e-12)
    assert {s.agent_cost for s in outcome.results.simulations} == {None}
    assert outcome.metrics["run"]["cost_usd"]["agent"] is None
    [line] = [line for line in summary if line.startswith("  agent's reported LLM usage")]
    assert line.startswith(f"  agent's reported LLM usage, tokens: at least in {usage['input']}   ")
    assert f"({len(partial)} only in part:" in line
