"""The ADK reference agent, run by google-adk's own A2A executor on every binding, backed by a real local stand-in
LLM; and an example ADK app under google-adk's own `adk api_server --a2a`.

The stand-in asks for tool calls the way the agent's instruction says, as
`{"tool_calls": [...]}` text, so LiteLlm and ADK run unchanged between it and
tau2: whatever ADK did to that text would show in the scores.
"""

from __future__ import annotations

import json

import httpx
import pytest
from tau2.agent.llm_agent import LLMAgent
from tau2.registry import registry

from tau2_a2a.client.config import A2AConfig, RetryPolicy
from tau2_a2a.client.pricing import price_tokens
from tau2_a2a.protocol.hosting import free_port, wait_for_card
from tau2_a2a.reference.adk_agent import INSTRUCTION, adk_app
from tau2_a2a.tau2bench.seam.distribution import load_tasks
from testbed.standin_llm import MODEL, StandinLLM, content_text
from tests.support.adk_apps import BINDINGS, adk_agent_on_every_binding, adk_api_server
from tests.support.cli import run_cli
from tests.support.runs import run_a2a

AIRLINE_TASKS = ["3", "7", "8", "12", "14"]  # reads, cancellations, a booking, baggage, what to tell the user
RETAIL_TASKS = ["0", "5", "6"]  # exchanges and a return of delivered items
DATA_START, DATA_END = "<a2a_datapart_json>", "</a2a_datapart_json>"


@pytest.fixture
def standin(serve) -> StandinLLM:
    return StandinLLM.serve(serve, tool_calls_as_text=True)


def prompt_and_tools(domain: str) -> tuple[str, list[dict]]:
    """tau2's own system prompt and tool schemas for `domain`, as its llm_agent builds them."""
    environment = registry.get_env_constructor(domain)()
    agent = LLMAgent(tools=environment.get_tools(), domain_policy=environment.get_policy(), llm=MODEL)
    return agent.system_prompt, [tool.openai_schema for tool in agent.tools]


def golden_calls(domain: str, task_ids: list[str]) -> dict[str, list[tuple[str, dict]]]:
    tasks = {task.id: task for task in load_tasks(domain)}
    return {
        task_id: [(a.name, a.arguments) for a in tasks[task_id].evaluation_criteria.actions
                  if a.requestor == "assistant"]
        for task_id in task_ids
    }


def trajectory_calls(outcome) -> dict[str, list[tuple[str, dict]]]:
    return {
        s.task_id: [(c.name, c.arguments) for m in s.messages for c in (getattr(m, "tool_calls", None) or [])]
        for s in outcome.results.simulations
    }


@pytest.mark.parametrize(("domain", "task_ids"), [("airline", AIRLINE_TASKS), ("retail", RETAIL_TASKS)])
def test_adk_agent_scores_the_golden_actions(serve, standin, tmp_path, domain, task_ids):
    agent = serve(lambda url: adk_app(MODEL, url, standin.api_base, {"api_key": "standin-key", "temperature": 0.0}))

    outcome = run_a2a(agent.url, tmp_path, domain, task_ids=task_ids)

    golden = golden_calls(domain, task_ids)
    assert {s.task_id: s.reward_info.reward for s in outcome.results.simulations} == dict.fromkeys(task_ids, 1.0)
    assert trajectory_calls(outcome) == golden
    # One model call per tau2 turn: each golden call, then the words for the user; ADK added none.
    assert len(standin.requests) == sum(len(calls) + 1 for calls in golden.values())

    system_prompt, tools = prompt_and_tools(domain)
    first_turns = [body for body in standin.requests if len(body["messages"]) == 2]
    assert len(first_turns) == len(task_ids)
    for body in standin.requests:
        assert "tools" not in body  # the agent declares none: tau2 runs them
        assert body["messages"][0]["role"] == "system"
        assert body["messages"][0]["content"].startswith(INSTRUCTION)
        assert body["messages"][1]["role"] == "user"
        blocks = [block["text"] for block in body["messages"][1]["content"]]
        assert blocks[0] == system_prompt
        assert blocks[1].startswith("<tools>\n") and all(f'"{t["function"]["name"]}"' in blocks[1] for t in tools)
        assert blocks[2].startswith(DATA_START) and blocks[2].endswith(DATA_END)
        assert json.loads(blocks[2][len(DATA_START):-len(DATA_END)]) == {"tools": tools}
    # ADK keeps one session per A2A context: each call carries the conversation so far,
    # the model's tool-call text and tau2's results in turn.
    for body in standin.requests:
        later = body["messages"][2:]
        assert [m["role"] for m in later] == ["assistant", "user"] * (len(later) // 2)
        assert all(json.loads(m["content"])["tool_calls"] for m in later[::2])
        assert all(content_text(m["content"]).startswith("Tool result for ") for m in later[1::2])


def test_adk_agent_streamed_scores_the_golden_actions(serve, standin, tmp_path):
    """ADK's executor streams (the card says so): with --a2a-streaming the reply is read off the stream."""
    agent = serve(lambda url: adk_app(MODEL, url, standin.api_base, {"api_key": "standin-key", "temperature": 0.0}))
    task_ids = AIRLINE_TASKS[:3]

    outcome = run_a2a(agent.url, tmp_path, "airline", task_ids=task_ids,
                      a2a=A2AConfig(endpoint=agent.url, streaming=True))

    assert {s.task_id: s.reward_info.reward for s in outcome.results.simulations} == dict.fromkeys(task_ids, 1.0)
    assert trajectory_calls(outcome) == golden_calls("airline", task_ids)
    records = [r for s in outcome.metrics["simulations"] for r in s["requests"]]
    assert {(r["method"], r["error"]) for r in records} == {("SendStreamingMessage", None)}
    assert min(r["events"] for r in records) >= 2  # the task and its updates, not one blocking reply


def test_cli_serves_the_adk_agent_and_reports_llm_failures(serve, tmp_path):
    """`tau2-a2a agent adk --grpc-port` in its own process: a card 1.0 and 0.3 clients read, declaring every
    binding, a full score over gRPC, then, with the LLM gone, a failed task that names the error, logged without
    a traceback or the key."""
    llm = StandinLLM(tool_calls_as_text=True)
    llm_server = serve(lambda url: llm.app())
    llm.api_base = f"{llm_server.url}/v1"
    secret = "sk-standin-never-logged-7"
    port, grpc_port = free_port(), free_port()
    url, grpc_url = f"http://127.0.0.1:{port}", f"127.0.0.1:{grpc_port}"
    process = run_cli(["agent", "adk", "--model", MODEL, "--api-base", llm.api_base, "--api-key-env", "STANDIN_KEY",
                       "--port", str(port), "--grpc-port", str(grpc_port)], env={"STANDIN_KEY": secret})
    try:
        wait_for_card(url, process, timeout=180)
        card = httpx.get(f"{url}/.well-known/agent-card.json").json()
        assert card["supportedInterfaces"] == [
            {"url": where, "protocolBinding": binding, "protocolVersion": version}
            for binding, where in [("JSONRPC", url), ("HTTP+JSON", url), ("GRPC", grpc_url)]
            for version in ("1.0", "0.3")
        ]
        assert (card["url"], card["preferredTransport"], card["protocolVersion"]) == (url, "JSONRPC", "0.3")
        assert card["capabilities"]["streaming"] is True

        served = run_a2a(url, tmp_path / "served", task_ids=["1"],
                         a2a=A2AConfig(endpoint=url, transport="grpc"))
        assert [s.reward_info.reward for s in served.results.simulations] == [1.0]
        assert {r["transport"] for s in served.metrics["simulations"] for r in s["requests"]} == {"GRPC"}
        assert llm.requests[0]["temperature"] == 0.0

        llm_server.stop()
        failed = run_a2a(url, tmp_path / "failed", task_ids=["1"],
                         a2a=A2AConfig(endpoint=url, retry=RetryPolicy(max_attempts=1)))
        [simulation] = failed.results.simulations
        assert simulation.termination_reason.value == "agent_error"
        assert "TASK_STATE_FAILED: litellm." in simulation.messages[-1].content
        assert "Connection error" in simulation.messages[-1].content
    finally:
        process.terminate()
        stdout, stderr = process.communicate(timeout=30)
    assert stdout.startswith(f"tau2 ADK agent ({MODEL}) at {url}")
    assert f"gRPC at {grpc_url}" in stdout
    assert "Error handling A2A request: litellm." in stderr
    assert "Traceback" not in stdout + stderr
    assert "[EXPERIMENTAL]" not in stderr
    for text in (stdout, stderr, served.results_path.read_text(), failed.results_path.read_text()):
        assert secret not in text


def test_adk_api_server_serves_the_example_app(standin, tmp_path):
    """examples/adk_tau2_agent under google-adk's own `adk api_server --a2a`, on a free port."""
    with adk_api_server("adk_tau2_agent", standin.api_base, tmp_path) as url:
        outcome = run_a2a(url, tmp_path / "run", task_ids=["8"])
    assert [s.reward_info.reward for s in outcome.results.simulations] == [1.0]
    assert trajectory_calls(outcome) == golden_calls("airline", ["8"])


PRICE_MODEL = "gpt-4.1-2025-04-14"


def reply_usages(outcome) -> list[tuple[int, int]]:
    return [(m.usage["prompt_tokens"], m.usage["completion_tokens"]) for s in outcome.results.simulations
            for m in s.messages if m.role == "assistant" and m.usage is not None]


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
@pytest.mark.parametrize("transport", list(BINDINGS))
def test_adks_own_usage_is_recorded_and_priced_on_every_binding(standin, tmp_path, transport, streaming):
    """ADK's converter puts each LLM call's usage (genai UsageMetadata) on its events: the client records exactly the
    stand-in's tokens, once per turn, blocking (the task's metadata) or streamed (the status updates), over each
    binding; ADK names no model, so --a2a-price-model prices them."""
    task_ids = ["3", "8"]
    with adk_agent_on_every_binding(standin.api_base) as agent:
        outcome = run_a2a(agent.url, tmp_path, task_ids=task_ids, max_concurrency=1, a2a=A2AConfig(
            endpoint=agent.url, transport=transport, streaming=streaming, price_model=PRICE_MODEL))

    assert {s.task_id: s.reward_info.reward for s in outcome.results.simulations} == dict.fromkeys(task_ids, 1.0)
    used = [(u["prompt_tokens"], u["completion_tokens"]) for u in standin.usages]
    assert len(used) == len(standin.requests) == sum(len(calls) + 1 for calls in golden_calls("airline", task_ids)
                                                     .values())
    assert sorted(reply_usages(outcome)) == sorted(used)
    replies = [m for s in outcome.results.simulations for m in s.messages if m.role == "assistant" and m.usage]
    assert {(m.usage["reported_as"], m.usage["priced_with"], m.usage["llm_calls"]) for m in replies} == {
        ("adk", PRICE_MODEL, 1)}
    for message in replies:
        assert message.cost == pytest.approx(price_tokens(PRICE_MODEL, message.usage["prompt_tokens"],
                                                          message.usage["completion_tokens"]), rel=1e-12)
    expected = sum(price_tokens(PRICE_MODEL, p, c) for p, c in used)
    assert expected > 0
    assert sum(s.agent_cost for s in outcome.results.simulations) == pytest.approx(expected, rel=1e-9)
    assert outcome.metrics["run"]["cost_usd"]["agent"] == pytest.approx(expected, rel=1e-6)
    assert outcome.metrics["run"]["cost_usd"]["total"] == pytest.approx(expected, rel=1e-6)
    records = [r for s in outcome.metrics["simulations"] for r in s["requests"]]
    assert {(r["method"], r["transport"]) for r in records} == {
        ("SendStreamingMessage" if streaming else "SendMessage", BINDINGS[transport])}


def test_adk_tokens_without_a_price_model_cost_not_reported(serve, standin, tmp_path):
    agent = serve(lambda url: adk_app(MODEL, url, standin.api_base, {"api_key": "standin-key", "temperature": 0.0}))

    outcome = run_a2a(agent.url, tmp_path, task_ids=["8"])

    assert reply_usages(outcome) == [(u["prompt_tokens"], u["completion_tokens"]) for u in standin.usages]
    [simulation] = outcome.results.simulations
    assert simulation.agent_cost is None and simulation.user_cost == 0.0
    assert {m.cost for m in simulation.messages if m.role == "assistant" and m.usage} == {None}
    assert outcome.metrics["run"]["cost_usd"] == {"agent": None, "user": 0.0, "judge": 0.0, "total": None}
